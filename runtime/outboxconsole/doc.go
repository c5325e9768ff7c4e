// Package outboxconsole is the on-call web console of an outbox. It shows per event type the
// counts and ages that outbox.Stats reads, with alerts worded like `outboxgen status --check`.
// It charts the backlog and throughput of the last hour, from samples the console takes itself.
// It lists the FAILED messages with their errors, shows one message whole, and shows the
// named-lock jobs' last runs. It offers Retry and Purge, and the on-call controls: Pause and
// Resume per event type, Cancel and Run now per message and per type.
//
// It is an http.Handler, as plain as net/http/pprof's pages. It uses html/template, and embeds
// a stylesheet and a small script with go:embed. It needs no CDN and no build step. Every page
// reads without JavaScript. The script only refreshes the overview and a message that is on
// its way, and ticks checkboxes. `outboxgen console --dsn ...` serves it on its own. An
// application mounts it in its admin server, behind that server's own authentication.
//
//	c := outboxconsole.New(db, outboxconsole.AllowWrites(), outboxconsole.WithLogger(logger))
//	defer c.Close()
//	admin.Handle("/outbox/", http.StripPrefix("/outbox", c))
//
// Links are relative and the pages are flat. The overview is at "/" of the mount, followed by
// failed, message?id=N and jobs. The console thus works under any prefix that ends in a slash.
//
// Serve it from an http.Server with timeouts, as `outboxgen console` does. It sets
// ReadHeaderTimeout to 10s and ReadTimeout to 30s, since its forms are small. Its WriteTimeout
// of 60s is longer than WithQueryTimeout. It sets an IdleTimeout of 2m and MaxHeaderBytes of
// 64 KiB. The zero http.Server has none of these. It lets a client that sends slowly hold a
// connection forever.
//
// # Writes
//
// The console is read-only unless AllowWrites is given. A write retries one, the selected or
// every FAILED message of a type, or purges FAILED messages by id. It cancels one PENDING
// message or every one of a type (outbox.Cancel), or makes those that wait for a backoff due
// now (outbox.RetryPending). Each of these is a form and then a confirmation page that shows
// the dry run's count. Only the confirmation changes rows. Pause (with a reason and an
// optional duration) and Resume of an event type (outbox.Pause, outbox.Resume) take effect at
// once, since each undoes the other; the overview's banner lists each pause with a Resume
// button.
// Each write must carry the console's CSRF token, a per-process secret in a hidden field,
// compared in constant time. It must come from the console's own origin. Origin and
// Sec-Fetch-Site are checked when the browser sends them. Each write, and each refused one, is
// logged with who, what and how many. Who is the remote address.
//
// # Authentication
//
// WithToken makes every page require a token. A login form sets a cookie derived from it, so
// the token itself is never stored in the browser. A client may instead send "Authorization:
// Bearer <token>". The token is compared in constant time. It must pass CheckToken, which asks
// for a random token, not merely a long one. Wrong tokens are throttled.
//   - One address may try 10 at once, then one every 6s. An IPv6 address counts by its /64.
//   - All addresses together may try 100 at once, then 10 a second.
//   - Past that, a login or a bearer token is answered 429 with Retry-After without being
//     compared. The first refusal of a run is logged.
//   - A session cookie is never throttled.
//
// Without WithToken the console trusts whoever reaches it. Bind it to loopback, or mount it
// behind your own authentication.
//
// # Escaping
//
// Payloads, errors and event types come from the database and are attacker-controlled. They
// reach the page only through html/template, which escapes them for their context, never as
// template.HTML. WithRedact also masks secrets in every text read from the database and in
// every error shown or logged. The CLI passes it the DSN's password. Some characters change how
// text reads without showing. They are controls, bidi overrides and marks, zero-width and
// other format characters, and line separators. They are shown as escapes such as \u202E, and
// so are bytes that are not UTF-8, such as \xFF. "safe_\u202Eliame_emoclew" thus never reads as
// "safe_welcome_email". A payload is shown as stored, not re-indented, and cut after 64 KiB
// with a note. Forms and links name an event type by a reference to its exact bytes. Retrying
// a type thus retries that type even when it is masked, escaped, or holds a byte a browser
// would not send back.
package outboxconsole
