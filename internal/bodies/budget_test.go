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
