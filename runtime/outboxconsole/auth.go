package outboxconsole

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// The token and the CSRF checks. With a token, the login form posts it once; the console
// answers with a cookie holding HMAC-SHA256(per-process secret, token), so the browser never
// stores the token and a restart logs everyone out. Scripts send "Authorization: Bearer
// <token>" instead. Every comparison is constant-time.

// cookieName is the session cookie. It has no Path, so the browser scopes it to the directory
// of the login URL: the console's mount point.
const cookieName = "outboxconsole_session"

// maxLoginBody bounds the login form: a token and where to go next.
const maxLoginBody = 16 << 10

// sessionValue is the session cookie's value for token under the process secret.
func sessionValue(secret, token string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte("outboxconsole session\x00" + token))
	return hex.EncodeToString(m.Sum(nil))
}

func equal(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }

// authorized says whether r carries the session cookie or the bearer token. A bearer token is
// throttled as a login is: wait > 0 when this client may not try one now.
func (c *Console) authorized(r *http.Request) (ok bool, wait time.Duration) {
	if ck, err := r.Cookie(cookieName); err == nil && equal(ck.Value, c.cookie) {
		return true, 0
	}
	auth, has := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !has {
		return false, 0
	}
	ok, wait, first := c.logins.try(clientOf(r), func() bool { return equal(strings.TrimSpace(auth), c.cfg.token) })
	c.logRefusedToken(r, "bearer", ok, wait, first)
	return ok, wait
}

// logRefusedToken logs a wrong token, and the first of a run of throttled tries.
func (c *Console) logRefusedToken(r *http.Request, via string, ok bool, wait time.Duration, first bool) {
	switch {
	case ok:
	case wait == 0:
		c.cfg.logger.Warn("console login refused", "remote_addr", r.RemoteAddr, "via", via)
	case first:
		c.cfg.logger.Warn("console logins throttled", "remote_addr", r.RemoteAddr, "via", via, "retry_after_s", retryAfter(wait))
	}
}

// loginRequired answers a request without credentials: the login form with 401 for a page, a
// bare 401 for anything else (a write, a script).
func (c *Console) loginRequired(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		w.Header().Set("WWW-Authenticate", `Bearer realm="outboxconsole"`)
		c.render(w, r, http.StatusUnauthorized, "login", loginPage{Next: loginNext(r)})
		return
	}
	c.cfg.logger.Warn("console write refused", "remote_addr", r.RemoteAddr, "action", strings.TrimPrefix(r.URL.Path, "/"), "reason", "no token")
	http.Error(w, "401 unauthorized: this console needs its token (log in, or send Authorization: Bearer <token>)", http.StatusUnauthorized)
}

type loginPage struct {
	Next   string
	Failed bool
	Wait   string // seconds, when the throttle refused the try
}

// loginNext is where a successful login goes: the page asked for, as a relative URL.
func loginNext(r *http.Request) string {
	p := strings.TrimPrefix(r.URL.Path, "/")
	if p == "login" {
		p = ""
	}
	u := url.URL{Path: p, RawQuery: r.URL.RawQuery}
	return "./" + u.String()
}

func (c *Console) loginForm(w http.ResponseWriter, r *http.Request) {
	if ok, _ := c.authorized(r); c.cfg.token == "" || ok {
		seeOther(w, "./")
		return
	}
	c.render(w, r, http.StatusOK, "login", loginPage{Next: "./"})
}

func (c *Console) login(w http.ResponseWriter, r *http.Request) {
	if c.cfg.token == "" {
		seeOther(w, "./")
		return
	}
	if reason := sameOrigin(r); reason != "" {
		http.Error(w, "403 forbidden: "+reason, http.StatusForbidden)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxLoginBody)
	if err := r.ParseForm(); err != nil {
		http.Error(w, "400 bad request: unreadable login form", http.StatusBadRequest)
		return
	}
	next := safeNext(r.PostFormValue("next"))
	token := r.PostFormValue("token")
	ok, wait, first := c.logins.try(clientOf(r), func() bool { return equal(token, c.cfg.token) })
	c.logRefusedToken(r, "form", ok, wait, first)
	switch {
	case wait > 0:
		w.Header().Set("Retry-After", retryAfter(wait))
		c.render(w, r, http.StatusTooManyRequests, "login", loginPage{Next: next, Wait: retryAfter(wait)})
		return
	case !ok:
		c.render(w, r, http.StatusUnauthorized, "login", loginPage{Next: next, Failed: true})
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: cookieName, Value: c.cookie, HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: r.TLS != nil,
	})
	seeOther(w, next)
}

// safeNext keeps a login's destination relative to the console ("./failed?type=x"), so the
// form cannot send anyone elsewhere.
func safeNext(s string) string {
	if !strings.HasPrefix(s, "./") || strings.ContainsAny(s, "\\\r\n") || strings.HasPrefix(s, ".//") {
		return "./"
	}
	return s
}

// seeOther redirects with 303 to a URL relative to the request's, which the browser resolves
// against the address it used: http.Redirect would make it absolute from r.URL.Path, losing the
// prefix of a console mounted with http.StripPrefix.
func seeOther(w http.ResponseWriter, rel string) {
	w.Header().Set("Location", rel)
	w.WriteHeader(http.StatusSeeOther)
}

// sameOrigin says why r does not come from the console's own pages, or "" when it may: the
// browser's Sec-Fetch-Site must be same-origin (or none: typed by the user), and an Origin
// header must name the host that r was sent to. Clients that send neither (curl with the
// token) are left to the CSRF token.
func sameOrigin(r *http.Request) string {
	switch site := r.Header.Get("Sec-Fetch-Site"); site {
	case "", "same-origin", "none":
	default:
		return "cross-site request (Sec-Fetch-Site: " + site + ")"
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return ""
	}
	u, err := url.Parse(origin)
	if err != nil || origin == "null" || !strings.EqualFold(u.Host, r.Host) {
		return "cross-origin request (Origin " + origin + " is not " + r.Host + ")"
	}
	return ""
}

// checkWrite says why a write must be refused, or "" when it may run: writes allowed, the
// request from the console's own origin, and the CSRF token in the form.
func (c *Console) checkWrite(r *http.Request) (status int, reason string) {
	if !c.cfg.allowWrites {
		return http.StatusForbidden, "read-only console: start it with writes allowed (outboxgen console --allow-writes, or outboxconsole.AllowWrites())"
	}
	if reason := sameOrigin(r); reason != "" {
		return http.StatusForbidden, reason
	}
	if !equal(r.PostFormValue("csrf"), c.csrf) {
		return http.StatusForbidden, "missing or wrong CSRF token (reload the page: a restarted console has a new one)"
	}
	return 0, ""
}
