package web

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestConsoleServes(t *testing.T) {
	c, err := NewConsole(true)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/", "/console", "/console/admin", "/console/assets/app.css", "/console/nope"} {
		if !Handles(p) {
			t.Errorf("%s is not the console's", p)
		}
	}
	for _, p := range []string{"/v1/models", "/consoles", "/api/user/self"} {
		if Handles(p) {
			t.Errorf("%s is the console's", p)
		}
	}

	w := httptest.NewRecorder()
	r := httptest.NewRequest("GET", "https://gw.example/console/playground", nil)
	if err := c.Serve(w, r); err != nil {
		t.Fatal(err)
	}
	if w.Code != 200 || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/html") ||
		!strings.Contains(w.Header().Get("Content-Security-Policy"), "frame-ancestors 'none'") {
		t.Fatalf("page answered %d %v", w.Code, w.Header())
	}
	if !strings.Contains(w.Body.String(), "https://gw.example") {
		t.Fatal("the page is not filled in with the origin the browser reached")
	}

	w = httptest.NewRecorder()
	if err := c.Serve(w, httptest.NewRequest("GET", "/console", nil)); err != nil || w.Code != http.StatusFound || w.Header().Get("Location") != "/" {
		t.Fatalf("/console answered %d %v %v", w.Code, w.Header(), err)
	}

	w = httptest.NewRecorder()
	if err := c.Serve(w, httptest.NewRequest("GET", "/console/assets/i18n.js", nil)); err != nil || w.Code != 200 ||
		!strings.Contains(w.Header().Get("Content-Type"), "javascript") || w.Header().Get("Last-Modified") == "" {
		t.Fatalf("asset answered %d %v %v", w.Code, w.Header(), err)
	}

	status := func(method, p string) (int, http.Header) {
		w := httptest.NewRecorder()
		var se *StatusError
		if err := c.Serve(w, httptest.NewRequest(method, p, nil)); !errors.As(err, &se) {
			t.Fatalf("%s %s: %v, want a status", method, p, err)
		}
		return se.Status, w.Header()
	}
	if code, h := status("POST", "/console/admin"); code != http.StatusMethodNotAllowed || h.Get("Allow") != "GET, HEAD" {
		t.Fatalf("POST answered %d %v", code, h)
	}
	for _, p := range []string{"/console/nope", "/console/assets/index.html", "/console/assets/a/b.js", "/console/assets/missing.css"} {
		if code, _ := status("GET", p); code != http.StatusNotFound {
			t.Errorf("%s answered %d, want 404", p, code)
		}
	}
}
