package caddymodule

import (
	"bytes"
	"html/template"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/web"
)

func init() {
	caddy.RegisterModule(Console{})
}

// Console serves the web console: the home view and dashboard at /, the
// admin pages at /console/admin (users and codes), /console/dashboard,
// /console/channels and /console/usage-log, models and prices at /console/models, the
// playground at /console/playground and their assets under
// /console/assets/. Other paths pass to the next handler.
type Console struct {
	app   *App
	log   *zap.Logger
	pages *template.Template
	// started is the assets' Last-Modified: they change only with the binary
	started time.Time
}

// CaddyModule returns the Caddy module information.
func (Console) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.gateway_console",
		New: func() caddy.Module { return new(Console) },
	}
}

// Provision finds the gateway app and parses the pages.
func (h *Console) Provision(ctx caddy.Context) error {
	h.log = ctx.Logger()
	app, err := gatewayApp(ctx)
	if err != nil {
		return err
	}
	h.app = app
	h.pages, err = template.ParseFS(web.Files, "*.html")
	if err != nil {
		return err
	}
	h.started = time.Now()
	return nil
}

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

func (h *Console) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	p := r.URL.Path
	page, isPage := consolePages[p]
	isAsset := strings.HasPrefix(p, "/console/assets/")
	if !isPage && !isAsset && p != "/console" && !strings.HasPrefix(p, "/console/") {
		return next.ServeHTTP(w, r)
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		return caddyhttp.Error(http.StatusMethodNotAllowed, nil)
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
		return h.serveAsset(w, r, strings.TrimPrefix(p, "/console/assets/"))
	case !isPage:
		return caddyhttp.Error(http.StatusNotFound, nil)
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	origin := scheme + "://" + r.Host
	var buf bytes.Buffer
	if err := h.pages.ExecuteTemplate(&buf, page, pageData{BaseURL: origin + "/v1", Origin: origin, Registration: h.app.Registration}); err != nil {
		return caddyhttp.Error(http.StatusInternalServerError, err)
	}
	hd.Set("Content-Type", "text/html; charset=utf-8")
	hd.Set("Cache-Control", "no-cache")
	_, err := w.Write(buf.Bytes())
	return err
}

func (h *Console) serveAsset(w http.ResponseWriter, r *http.Request, name string) error {
	ext := path.Ext(name)
	if name == "" || strings.Contains(name, "/") || (ext != ".css" && ext != ".js") {
		return caddyhttp.Error(http.StatusNotFound, nil)
	}
	body, err := fs.ReadFile(web.Files, name)
	if err != nil {
		return caddyhttp.Error(http.StatusNotFound, err)
	}
	w.Header().Set("Content-Type", mime.TypeByExtension(ext))
	w.Header().Set("Cache-Control", "no-cache")
	http.ServeContent(w, r, name, h.started, bytes.NewReader(body))
	return nil
}

// Interface guards.
var (
	_ caddyhttp.MiddlewareHandler = (*Console)(nil)
	_ caddy.Provisioner           = (*Console)(nil)
)
