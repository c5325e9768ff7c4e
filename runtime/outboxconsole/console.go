package outboxconsole

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Console is the console's http.Handler. Make one with New; Close stops its sampler.
type Console struct {
	db     *sql.DB
	cfg    config
	mux    *http.ServeMux
	csrf   string // the per-process CSRF token: hex of 32 random bytes
	cookie string // the session cookie's value when a token is set: an HMAC of the token
	samp   *sampler
	types  typeSealer
	logins *throttle
	weak   error // why the token is refused (CheckToken); every request is then refused

	stopOnce sync.Once
	stop     context.CancelFunc
	done     chan struct{}
}

type config struct {
	allowWrites bool
	logger      *slog.Logger
	token       string
	redact      func(string) string
	title       string
	sampleEvery time.Duration
	maxDueAge   time.Duration
	maxHeldAge  time.Duration
	window      time.Duration
	timeout     time.Duration
	pageSize    int
	now         func() time.Time
}

// Option configures a Console.
type Option func(*config)

// AllowWrites enables Retry, Purge, Cancel, Run now, Pause and Resume. Without it the console is read-only: it shows no action
// buttons and refuses every write with 403. Defaults to off.
func AllowWrites() Option { return func(c *config) { c.allowWrites = true } }

// WithLogger sets where the write audit lines go: one info line "console write" per write
// (remote_addr, action, ids or event_type, count) and one warn line "console write refused"
// per refused one. Defaults to slog.Default().
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithToken makes every page require token: a login form sets a cookie derived from it, or a
// client sends "Authorization: Bearer <token>". An empty token means none. Defaults to none:
// without a token, bind to loopback or mount the console behind your own authentication.
// The token must pass CheckToken; a console given a weaker one logs why and refuses every
// request with 500. Wrong tokens are throttled (see the package documentation).
func WithToken(token string) Option { return func(c *config) { c.token = token } }

// WithRedact masks secrets in text read from the database (event types, keys, last_error,
// payloads) and in the errors the console shows or logs. `outboxgen console` passes the
// masking of its DSN's password. Defaults to none.
func WithRedact(f func(string) string) Option { return func(c *config) { c.redact = f } }

// WithTitle names the outbox in each page's header and title (the CLI shows the database as
// user@tcp(host:port)/dbname, without the password). Defaults to "outbox".
func WithTitle(s string) Option { return func(c *config) { c.title = s } }

// WithSampleInterval sets how often the console samples outbox.Stats for its chart of the last
// hour. Defaults to 10s.
func WithSampleInterval(d time.Duration) Option { return func(c *config) { c.sampleEvery = d } }

// WithMaxDueAge sets how long a due message may wait for a worker before the overview alerts
// that nobody claims it, like `outboxgen status --check --max-due-age`. Zero turns the alert
// off. Defaults to 10m.
func WithMaxDueAge(d time.Duration) Option { return func(c *config) { c.maxDueAge = d } }

// WithMaxHeldAge sets how long an ordering key may be held (its head message FAILED or backed
// off while others wait behind it) before the overview alerts, like `outboxgen status --check
// --max-held-age`. Zero turns the alert off. Defaults to 10m.
func WithMaxHeldAge(d time.Duration) Option { return func(c *config) { c.maxHeldAge = d } }

// WithFailedWindow sets how far back a FAILED message raises the overview's new-failures
// alert, like `outboxgen status --check --window`. Defaults to 1h.
func WithFailedWindow(d time.Duration) Option { return func(c *config) { c.window = d } }

// WithQueryTimeout bounds the queries behind one page or one write. Defaults to 15s.
func WithQueryTimeout(d time.Duration) Option { return func(c *config) { c.timeout = d } }

// New returns the console over db, and starts sampling for the chart (Close stops it). The
// pool needs parseTime=true, as every outbox call does.
func New(db *sql.DB, opts ...Option) *Console {
	cfg := config{
		logger:      slog.Default(),
		redact:      func(s string) string { return s },
		title:       "outbox",
		sampleEvery: 10 * time.Second,
		maxDueAge:   10 * time.Minute,
		maxHeldAge:  10 * time.Minute,
		window:      time.Hour,
		timeout:     15 * time.Second,
		pageSize:    50,
		now:         time.Now,
	}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.logger == nil {
		cfg.logger = slog.Default()
	}
	if cfg.redact == nil {
		cfg.redact = func(s string) string { return s }
	}
	cfg.title = visibleLine(cfg.title)
	if cfg.sampleEvery <= 0 {
		cfg.sampleEvery = 10 * time.Second
	}
	if cfg.window <= 0 {
		cfg.window = time.Hour
	}
	if cfg.timeout <= 0 {
		cfg.timeout = 15 * time.Second
	}
	c := &Console{db: db, cfg: cfg, csrf: randomHex(32), done: make(chan struct{})}
	c.types = newTypeSealer(c.csrf)
	c.logins = newThrottle(cfg.now)
	if cfg.token != "" {
		c.cookie = sessionValue(c.csrf, cfg.token)
		if c.weak = CheckToken(cfg.token); c.weak != nil {
			cfg.logger.Error("console token refused: every request is refused until it is replaced", "err", c.weak)
		}
	}
	c.samp = newSampler(db, cfg.sampleEvery, cfg.now)
	c.routes()
	ctx, stop := context.WithCancel(context.Background())
	c.stop = stop
	go func() {
		defer close(c.done)
		c.samp.run(ctx)
	}()
	return c
}

// Close stops the sampler and waits for it. The handler keeps serving (the chart stops
// growing). Safe to call more than once.
func (c *Console) Close() error {
	c.stopOnce.Do(c.stop)
	<-c.done
	return nil
}

func (c *Console) routes() {
	m := http.NewServeMux()
	m.HandleFunc("GET /{$}", c.overview)
	m.HandleFunc("GET /failed", c.failedList)
	m.HandleFunc("GET /message", c.message)
	m.HandleFunc("GET /jobs", c.jobs)
	m.HandleFunc("POST /retry", c.retry)
	m.HandleFunc("POST /purge", c.purge)
	m.HandleFunc("POST /cancel", c.cancelMessages)
	m.HandleFunc("POST /runnow", c.runNow)
	m.HandleFunc("POST /pause", c.pause)
	m.HandleFunc("POST /resume", c.resume)
	m.HandleFunc("GET /login", c.loginForm)
	m.HandleFunc("POST /login", c.login)
	m.Handle("GET /static/", staticHandler())
	c.mux = m
}

// ServeHTTP serves the console's pages. With a token, every path but the login form and the
// stylesheet and script needs the session cookie or the bearer token.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self'; "+
		"form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	// same-origin, not no-referrer: with no-referrer, Chromium sends "Origin: null" on the
	// console's own form posts, which sameOrigin must refuse.
	h.Set("Referrer-Policy", "same-origin")
	if !strings.HasPrefix(r.URL.Path, "/static/") {
		h.Set("Cache-Control", "no-store")
	}
	if c.weak != nil {
		http.Error(w, "500 internal error: the console's token is refused: "+c.weak.Error(), http.StatusInternalServerError)
		return
	}
	if c.cfg.token != "" && r.URL.Path != "/login" && !strings.HasPrefix(r.URL.Path, "/static/") {
		switch ok, wait := c.authorized(r); {
		case wait > 0:
			tooManyTries(w, wait)
			return
		case !ok:
			c.loginRequired(w, r)
			return
		}
	}
	c.mux.ServeHTTP(w, r)
}

// clean makes one line of text from the database or an error fit to show: secrets masked
// (WithRedact), then invisible characters escaped (visibleLine).
func (c *Console) clean(s string) string { return visibleLine(c.cfg.redact(s)) }

// cleanBlock is clean for a text shown in a <pre>, whose line breaks stay.
func (c *Console) cleanBlock(s string) string { return visibleBlock(c.cfg.redact(s)) }

func (c *Console) errText(err error) string { return c.clean(err.Error()) }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never returns an error (Go 1.24+)
	return hex.EncodeToString(b)
}
