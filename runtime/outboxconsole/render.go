package outboxconsole

import (
	"bytes"
	"embed"
	"html/template"
	"io/fs"
	"net/http"
	"strings"
	"time"
)

// The pages are html/template files under assets/, each defining "title" and "content" for
// layout.html; the stylesheet and script are under assets/static. All embedded: the binary
// serves them with nothing else on disk. Database text reaches a page only as a template
// value, escaped for its context (never template.HTML).

//go:embed assets/*.html
var templateFS embed.FS

//go:embed assets/static
var staticFS embed.FS

var pages = func() map[string]*template.Template {
	m := map[string]*template.Template{}
	for _, name := range []string{"overview", "failed", "message", "jobs", "confirm", "login", "error"} {
		m[name] = template.Must(template.New(name).ParseFS(templateFS, "assets/layout.html", "assets/"+name+".html"))
	}
	return m
}()

func staticHandler() http.Handler {
	sub, err := fs.Sub(staticFS, "assets")
	if err != nil {
		panic(err) // the embed pattern above guarantees the directory
	}
	files := http.FileServerFS(sub)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/") {
			http.NotFound(w, r) // no directory listings
			return
		}
		w.Header().Set("Cache-Control", "max-age=300")
		files.ServeHTTP(w, r)
	})
}

// page is what layout.html reads; Data is the page's own.
type page struct {
	Console string // the outbox's name (WithTitle)
	Page    string
	Writes  bool
	CSRF    string
	Refresh int // seconds; 0: the page does not refresh itself
	Now     string
	Data    any
}

// render executes the page template name into a buffer, then writes it with status: a
// template error never leaves half a page.
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, data any) {
	c.renderRefresh(w, r, status, name, data, 0)
}

func (c *Console) renderRefresh(w http.ResponseWriter, _ *http.Request, status int, name string, data any, refresh int) {
	p := page{
		Console: c.cfg.title, Page: name, Writes: c.cfg.allowWrites, Refresh: refresh,
		Now: c.cfg.now().UTC().Format(time.DateTime), Data: data,
	}
	if c.cfg.allowWrites {
		p.CSRF = c.csrf
	}
	var b bytes.Buffer
	if err := pages[name].ExecuteTemplate(&b, "layout", p); err != nil {
		c.cfg.logger.Error("console template failed", "page", name, "err", err)
		http.Error(w, "500 internal error: the page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b.Bytes())
}

type errorPage struct {
	Status  string
	Message string
}

// fail answers with an error page; msg is the console's own wording or cleaned error text.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, status int, msg string) {
	c.render(w, r, status, "error", errorPage{Status: http.StatusText(status), Message: msg})
}
