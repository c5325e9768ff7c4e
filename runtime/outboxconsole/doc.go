// Package outboxconsole is the on-call web console of an outbox: per event type the counts and
// ages that outbox.Stats reads, alerts worded like `outboxgen status --check`, a backlog and
// throughput chart of the last hour that the console samples itself, the FAILED messages with
// their errors, one message whole, the named-lock jobs' last runs, and Retry and Purge.
//
// It is an http.Handler, as plain as net/http/pprof's pages: html/template, a stylesheet and a
// small script embedded with go:embed, no CDN and no build step. Every page reads without
// JavaScript; the script only refreshes the overview and a message that is on its way, and
// ticks checkboxes. `outboxgen console --dsn ...` serves it on its own; an application mounts
// it in its admin server, behind that server's own authentication:
//
//	c := outboxconsole.New(db, outboxconsole.AllowWrites(), outboxconsole.WithLogger(logger))
//	defer c.Close()
//	admin.Handle("/outbox/", http.StripPrefix("/outbox", c))
//
// Links are relative and the pages are flat (overview at "/" of the mount, then failed,
// message?id=N, jobs), so it works under any prefix that ends in a slash.
//
// Serve it from an http.Server with timeouts, as `outboxgen console` does: ReadHeaderTimeout
// and ReadTimeout (10s and 30s there: its forms are small), a WriteTimeout longer than
// WithQueryTimeout (60s), an IdleTimeout (2m) and MaxHeaderBytes (64 KiB). The zero
// http.Server has none, and lets a client that sends slowly hold a connection forever.
//
// # Writes
//
// The console is read-only unless AllowWrites is given. Writes (retry one, selected or every
// FAILED message of a type; purge FAILED messages by id) are a form and then a confirmation
// page that shows the dry run's count; only the confirmation changes rows. Each write must
// carry the console's CSRF token (a per-process secret, in a hidden field, compared in constant
// time) and come from the console's own origin (Origin and Sec-Fetch-Site are checked when the
// browser sends them). Each write, and each refused one, is logged with who (the remote
// address), what and how many.
//
// # Authentication
//
// WithToken makes every page require a token: a login form sets a cookie derived from it (so
// the token itself is never stored in the browser), or a client sends "Authorization: Bearer
// <token>". Compared in constant time. The token must pass CheckToken (random, not merely
// long). Wrong tokens are throttled: 10 at once from one address (an IPv6 address by its /64),
// then one every 6s, and 100 at once from all addresses together, then 10 a second; past that
// a login or a bearer token is answered 429 with Retry-After without being compared, and the
// first refusal of a run is logged. A session cookie is never throttled. Without WithToken the
// console trusts whoever reaches it: bind it to loopback, or mount it behind your own
// authentication.
//
// # Escaping
//
// Payloads, errors and event types come from the database and are attacker-controlled: they
// reach the page only through html/template, which escapes them for their context, never as
// template.HTML. WithRedact additionally masks secrets (the CLI passes the DSN's password) in
// every text read from the database and in every error shown or logged. Characters that change
// how text reads without showing (controls, bidi overrides and marks, zero-width and other
// format characters, line separators) and bytes that are not UTF-8 are shown as escapes,
// \u202E or \xFF, so "safe_\u202Eliame_emoclew" never reads as "safe_welcome_email". A payload
// is shown as stored, not re-indented, and cut after 64 KiB with a note. Forms and links name an
// event type by a reference to its exact bytes, so retrying a type retries that type even when
// it is masked, escaped, or holds a byte a browser would not send back.
package outboxconsole
