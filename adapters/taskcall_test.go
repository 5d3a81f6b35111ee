package adapters

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestTaskCallBoundsTheAnswer(t *testing.T) {
	big := strings.Repeat("x", MaxTaskAnswer+1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			_, _ = w.Write([]byte(big))
			return
		}
		_, _ = w.Write([]byte(`{"ok":true}`))
	}))
	defer srv.Close()
	hr, _ := NewTaskGet(context.Background(), srv.URL+"/big")
	if _, _, err := TaskCall(http.DefaultClient, hr); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("an answer past the bound: %v", err)
	}
	hr, _ = NewTaskGet(context.Background(), srv.URL+"/small")
	if status, body, err := TaskCall(http.DefaultClient, hr); err != nil || status != 200 || string(body) != `{"ok":true}` {
		t.Fatalf("a small answer: %d %s %v", status, body, err)
	}
}

func TestTaskCallGivesUpOnAHangingUpstream(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	hr, _ := NewTaskGet(ctx, srv.URL)
	_, _, err := TaskCall(http.DefaultClient, hr)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a hanging upstream: %v", err)
	}
	if e := TaskError(&Upstream{Channel: "c"}, "reading the task", err); !errors.Is(e, context.DeadlineExceeded) || !strings.Contains(e.Error(), `channel "c"`) {
		t.Fatalf("wrapped: %v", e)
	}
}

func TestTaskImageForms(t *testing.T) {
	png := "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
	cases := []struct{ in, url, b64, err string }{
		{"https://img.example.com/a.png", "https://img.example.com/a.png", "https://img.example.com/a.png", ""},
		{"data:image/png;base64," + png, "data:image/png;base64," + png, png, ""},
		{png, "data:image/png;base64," + png, png, ""},
		{"data:text/plain;base64,aGk=", "", "", "data:image/<type>;base64"},
		{"aGVsbG8gd29ybGQ=", "", "aGVsbG8gd29ybGQ=", "not of an image"},
		{"not base64 at all", "", "", "http(s) URL"},
	}
	for _, c := range cases {
		u, err := TaskImageURL(c.in)
		if c.err != "" && c.url == "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("TaskImageURL(%.30q) = %q, %v; want an error saying %q", c.in, u, err, c.err)
			}
		} else if err != nil || u != c.url {
			t.Errorf("TaskImageURL(%.30q) = %q, %v; want %q", c.in, u, err, c.url)
		}
		b, err := TaskImageBase64(c.in)
		if c.b64 == "" {
			if err == nil {
				t.Errorf("TaskImageBase64(%.30q) = %q, want an error", c.in, b)
			}
		} else if err != nil || b != c.b64 {
			t.Errorf("TaskImageBase64(%.30q) = %q, %v; want %q", c.in, b, err, c.b64)
		}
	}
}

func TestRefuseOwnedAndMarshal(t *testing.T) {
	if err := RefuseOwned(json.RawMessage(`{"style":"x","duration":5}`), []string{"model", "duration"}, "acme"); err == nil ||
		err.(*Error).Status != 400 || err.(*Error).Param != "metadata.duration" {
		t.Fatalf("owned duration: %#v", err)
	}
	for _, ok := range []string{``, `null`, `{"style":"x"}`} {
		if err := RefuseOwned(json.RawMessage(ok), []string{"duration"}, "acme"); err != nil {
			t.Fatalf("%q: %v", ok, err)
		}
	}
	b, err := MarshalTaskBody(map[string]string{"callback_url": "https://h.example.com/?a=1&b=<2>"})
	if err != nil || string(b) != `{"callback_url":"https://h.example.com/?a=1&b=<2>"}` {
		t.Fatalf("%s %v", b, err)
	}
}
