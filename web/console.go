package web

import (
	"bytes"
	"html/template"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"
)

// Console serves the console's pages and assets: the home view and
// dashboard at /, the admin pages at /console/admin (users and codes),
// /console/dashboard, /console/channels and /console/usage-log, models and
// prices at /console/models, the playground at /console/playground and
// their assets under /console/assets/.
type Console struct {
	// Registration is whether the pages offer to sign up.
	Registration bool

	pages *template.Template
	// started is the assets' Last-Modified: they change only with the binary
	started time.Time
}

// NewConsole parses the pages.
func NewConsole(registration bool) (*Console, error) {
	pages, err := template.ParseFS(Files, "*.html")
	if err != nil {
		return nil, err
	}
	return &Console{Registration: registration, pages: pages, started: time.Now()}, nil
}

// StatusError is a request the console answers with Status alone (the
// server's error handling writes the page), for Err.
type StatusError struct {
	Status int
	Err    error // nil for a plain 404 or 405
}

func (e *StatusError) Error() string {
	if e.Err != nil {
		return http.StatusText(e.Status) + ": " + e.Err.Error()
	}
	return http.StatusText(e.Status)
}

func (e *StatusError) Unwrap() error { return e.Err }

// consolePages maps paths to page templates.
var consolePages = map[string]string{
	"/":                   "index.html",
	"/console/admin":      "admin.html",
	"/console/models":     "models.html",
	"/console/playground": "playground.html",
	"/console/topup":      "topup.html",
	// the operators' pages
	"/console/dashboard": "dashboard.html",
	"/console/channels":  "channels.html",
	"/console/pricing":   "pricing.html",
	"/console/usage-log": "usagelog.html",
	"/console/audit":     "audit.html",
	// budget alerts: everyone's for administrators, one's own for a user
	"/console/alerts": "alerts.html",
	"/console/user":   "user.html", // one user, ?id=N
	// sign-in beyond a password
	"/console/security": "security.html",
	"/console/reset":    "reset.html",
}

// pageData is what a page template is filled with.
type pageData struct {
	BaseURL      string // <scheme>://<host>/v1, as the browser reached the gateway
	Origin       string // <scheme>://<host>
	Registration bool
}

// Handles reports whether p is the console's: a page, /console or a
// path under /console/. Other paths are for the next handler.
func Handles(p string) bool {
	_, isPage := consolePages[p]
	return isPage || p == "/console" || strings.HasPrefix(p, "/console/")
}

// Serve answers a request for a path Handles: a page, filled in for the
// origin the browser reached; an asset; /console sent to /. A method
// other than GET or HEAD, or a path under /console/ that is neither, is a
// *StatusError (Allow set for a 405).
func (c *Console) Serve(w http.ResponseWriter, r *http.Request) error {
	p := r.URL.Path
	page, isPage := consolePages[p]
	isAsset := strings.HasPrefix(p, "/console/assets/")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		return &StatusError{Status: http.StatusMethodNotAllowed}
	}
	hd := w.Header()
	// everything the pages need is on this origin; nothing may frame them
	hd.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "same-origin")
	switch {
	case p == "/console":
		http.Redirect(w, r, "/", http.StatusFound)
		return nil
	case isAsset:
		return c.serveAsset(w, r, strings.TrimPrefix(p, "/console/assets/"))
	case !isPage:
		return &StatusError{Status: http.StatusNotFound}
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	origin := scheme + "://" + r.Host
	var buf bytes.Buffer
	if err := c.pages.ExecuteTemplate(&buf, page, pageData{BaseURL: origin + "/v1", Origin: origin, Registration: c.Registration}); err != nil {
		return &StatusError{Status: http.StatusInternalServerError, Err: err}
	}
	hd.Set("Content-Type", "text/html; charset=utf-8")
	hd.Set("Cache-Control", "no-cache")
	_, err := w.Write(buf.Bytes())
	return err
}

func (c *Console) serveAsset(w http.ResponseWriter, r *http.Request, name string) error {
	ext := path.Ext(name)
	if name == "" || strings.Contains(name, "/") || (ext != ".css" && ext != ".js") {
		return &StatusError{Status: http.StatusNotFound}
	}
	body, err := fs.ReadFile(Files, name)
	if err != nil {
		return &StatusError{Status: http.StatusNotFound, Err: err}
	}
	w.Header().Set("Content-Type", mime.TypeByExtension(ext))
	w.Header().Set("Cache-Control", "no-cache")
	http.ServeContent(w, r, name, c.started, bytes.NewReader(body))
	return nil
}
