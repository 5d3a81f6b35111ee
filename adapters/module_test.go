package adapters

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
)

// Once its round trip is over, an upstream request no longer holds its
// body, though the answer (a stream, for minutes) and the request itself
// live on, as the transport keeps them.
func TestSentBodyLetsGoOfThePrompt(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n, _ := io.Copy(io.Discard, r.Body); n != 1<<20 {
			t.Errorf("the upstream read %d bytes, want %d", n, 1<<20)
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-r.Context().Done() // a stream held open
	}))
	defer srv.Close()

	body := make([]byte, 1<<20)
	gone := make(chan struct{})
	runtime.AddCleanup(&body[0], func(c chan struct{}) { close(c) }, gone)
	hr, err := NewJSONRequest(context.Background(), srv.URL, body, true)
	if err != nil {
		t.Fatal(err)
	}
	body = nil
	resp, err := srv.Client().Do(hr)
	ForgetBody(hr)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	for range 20 {
		runtime.GC()
		select {
		case <-gone:
			runtime.KeepAlive(hr)
			runtime.KeepAlive(resp)
			return
		default:
			runtime.Gosched()
		}
	}
	t.Fatal("the request body is still reachable while its answer streams")
}

// A body GetBody rewinds is the whole body, until ForgetBody.
func TestSetBodyRewinds(t *testing.T) {
	body := `{"a":"` + strings.Repeat("x", forgetAt) + `"}`
	hr, err := NewJSONRequest(context.Background(), "http://upstream.invalid/v1", []byte(body), false)
	if err != nil {
		t.Fatal(err)
	}
	if hr.ContentLength != int64(len(body)) {
		t.Fatalf("ContentLength %d, want %d", hr.ContentLength, len(body))
	}
	for range 2 {
		b, err := hr.GetBody()
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := io.ReadAll(b); string(got) != body {
			t.Fatalf("rewound body of %d bytes, want %d", len(got), len(body))
		}
	}
	if got, _ := io.ReadAll(hr.Body); string(got) != body {
		t.Fatalf("body of %d bytes, want %d", len(got), len(body))
	}
	ForgetBody(hr)
	if _, err := hr.GetBody(); err == nil {
		t.Fatal("GetBody rewound a forgotten body")
	}
}
