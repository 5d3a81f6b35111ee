package bodies

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestReadRequest(t *testing.T) {
	body := strings.Repeat("x", 1000)
	for _, tt := range []struct {
		name     string
		declared int64 // Content-Length; -1: chunked
		limit    int64
		budget   int64
		want     error
	}{
		{"declared", 1000, 2000, 4000, nil},
		{"chunked", -1, 2000, 1 << 20, nil},
		{"declared over the limit", 1000, 999, 4000, ErrTooLarge},
		{"chunked over the limit", -1, 999, 1 << 20, ErrTooLarge},
		{"over the budget", 1000, 2000, 999, ErrBusy},
	} {
		b := NewBudget(tt.budget)
		r, _ := http.NewRequest(http.MethodPost, "/", io.NopCloser(strings.NewReader(body)))
		r.ContentLength = tt.declared
		got, held, err := b.ReadRequest(r, tt.limit)
		switch {
		case !errors.Is(err, tt.want):
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		case err == nil && string(got) != body:
			t.Errorf("%s: read %d bytes", tt.name, len(got))
		}
		b.Give(held)
		if !b.Take(tt.budget) {
			t.Errorf("%s: the budget is not whole after Give", tt.name)
		}
	}
}

func TestReadRequestLongerThanDeclared(t *testing.T) {
	r, _ := http.NewRequest(http.MethodPost, "/", io.NopCloser(strings.NewReader("abcdef")))
	r.ContentLength = 3
	if _, _, err := NewBudget(100).ReadRequest(r, 100); err == nil {
		t.Fatal("a body longer than its Content-Length was read")
	}
}

func TestReadBounded(t *testing.T) {
	resp := &http.Response{Body: io.NopCloser(bytes.NewReader(make([]byte, 5000))), ContentLength: -1}
	if _, err := ReadBounded(resp, 4999); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("an answer over the limit: %v", err)
	}
	resp = &http.Response{Body: io.NopCloser(bytes.NewReader(make([]byte, 5000))), ContentLength: 5000}
	if b, err := ReadBounded(resp, 5000); err != nil || len(b) != 5000 {
		t.Fatalf("an answer at the limit: %d bytes, %v", len(b), err)
	}
}

// Answers read into recycled buffers come out whole whatever the buffer
// held before: longer or shorter, with or without a Content-Length, and
// the limit still holds.
func TestReadBoundedPooledReusesSafely(t *testing.T) {
	answer := func(body string, withLength bool) *http.Response {
		r := &http.Response{Body: io.NopCloser(strings.NewReader(body)), ContentLength: -1}
		if withLength {
			r.ContentLength = int64(len(body))
		}
		return r
	}
	for i, c := range []struct {
		body       string
		withLength bool
	}{
		{strings.Repeat("a", 5000), true},
		{"short", true},
		{strings.Repeat("b", 9000), false},
		{"tiny", false},
		{strings.Repeat("c", 70<<10), true}, // past what the pool keeps
		{"after", true},
	} {
		got, err := ReadBoundedPooled(answer(c.body, c.withLength), 1<<20)
		if err != nil || string(got) != c.body {
			t.Fatalf("answer %d: %d bytes, %v; want %d bytes", i, len(got), err, len(c.body))
		}
		Recycle(got)
	}
	if _, err := ReadBoundedPooled(answer(strings.Repeat("d", 100), false), 50); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("an answer past the limit: %v", err)
	}
	if _, err := ReadBoundedPooled(answer(strings.Repeat("d", 100), true), 50); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("an answer whose length is past the limit: %v", err)
	}
}
