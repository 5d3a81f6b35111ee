package bodies

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
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
		b := NewBudget(Limits{Total: tt.budget})
		r, _ := http.NewRequest(http.MethodPost, "/", io.NopCloser(strings.NewReader(body)))
		r.ContentLength = tt.declared
		got, held, err := b.ReadRequest(r, tt.limit, Owner{Key: 1, Address: "192.0.2.1"})
		switch {
		case !errors.Is(err, tt.want):
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		case err == nil && string(got) != body:
			t.Errorf("%s: read %d bytes", tt.name, len(got))
		}
		b.Give(held)
		if b.used != 0 || len(b.keys)+len(b.addrs) != 0 {
			t.Errorf("%s: %d bytes, %d keys, %d addresses still held after Give", tt.name, b.used, len(b.keys), len(b.addrs))
		}
	}
}

func TestReadRequestLongerThanDeclared(t *testing.T) {
	r, _ := http.NewRequest(http.MethodPost, "/", io.NopCloser(strings.NewReader("abcdef")))
	r.ContentLength = 3
	if _, _, err := NewBudget(Limits{Total: 100}).ReadRequest(r, 100, Owner{}); err == nil {
		t.Fatal("a body longer than its Content-Length was read")
	}
}

// stalled is a body that sends sent bytes and then nothing until the
// test lets it end with an error.
func stalled(t *testing.T, declared int64, sent int) (*http.Request, func()) {
	pr, pw := io.Pipe()
	go func() { pw.Write(bytes.Repeat([]byte("x"), sent)) }()
	r, _ := http.NewRequest(http.MethodPost, "/", pr)
	r.ContentLength = declared
	return r, func() { pw.CloseWithError(errors.New("the client went")) }
}

// held is what b holds in all, for key and for addr, once the readers
// have taken what they will.
func (b *Budget) holding() (all int64, keys, addrs map[string]int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	keys, addrs = map[string]int64{}, map[string]int64{}
	for k, n := range b.keys {
		keys[fmt.Sprint(k)] = n
	}
	for a, n := range b.addrs {
		addrs[a] = n
	}
	return b.used, keys, addrs
}

// A body that declares 32 MiB and stalls after a byte holds its first
// buffer (64 KiB), not its Content-Length; one that stalls after a
// megabyte holds at most twice that. Ten such bodies leave the budget's
// room to the others.
func TestReadRequestHoldsWhatArrived(t *testing.T) {
	b := NewBudget(Limits{Total: 256 << 20, PerKey: 32 << 20})
	type result struct {
		held Held
		err  error
	}
	done := make(chan result, 11)
	var ends []func()
	for i := range 10 {
		r, end := stalled(t, 32<<20, 1)
		ends = append(ends, end)
		go func() {
			_, held, err := b.ReadRequest(r, 32<<20, Owner{Key: int64(i + 1)})
			done <- result{held, err}
		}()
	}
	r, end := stalled(t, 32<<20, 1<<20)
	ends = append(ends, end)
	go func() {
		_, held, err := b.ReadRequest(r, 32<<20, Owner{Key: 99})
		done <- result{held, err}
	}()
	for {
		all, keys, _ := b.holding()
		if len(keys) == 11 && keys["99"] >= 1<<20 {
			if all > 10*firstChunk+2<<20 {
				t.Fatalf("eleven stalled bodies hold %d bytes", all)
			}
			for k, n := range keys {
				if k != "99" && n != firstChunk {
					t.Fatalf("key %s's body, stalled after a byte, holds %d bytes", k, n)
				}
			}
			if keys["99"] > 2<<20 {
				t.Fatalf("a body stalled after 1 MiB holds %d bytes", keys["99"])
			}
			break
		}
		runtime.Gosched()
	}
	for _, end := range ends {
		end()
	}
	for range 11 {
		res := <-done
		if res.err == nil {
			t.Fatal("a body the client left was read")
		}
		b.Give(res.held)
	}
	if all, keys, addrs := b.holding(); all != 0 || len(keys)+len(addrs) != 0 {
		t.Fatalf("after Give: %d bytes, %v, %v", all, keys, addrs)
	}
}

// One key's bodies, or one address's, take at most their share of the
// budget: past it, theirs are refused and others' are read.
func TestBudgetShares(t *testing.T) {
	b := NewBudget(Limits{Total: 10 << 20, PerKey: 3 << 20, PerAddress: 4 << 20})
	alice := Owner{Key: 1, Address: "192.0.2.1"}
	var h1, h2, h3, h4 Held
	h1.owner, h2.owner = alice, alice
	if err := b.Take(&h1, 3<<20); err != nil {
		t.Fatal(err)
	}
	if err := b.Take(&h2, 1); !errors.Is(err, ErrKeyBusy) {
		t.Fatalf("a key past its share: %v", err)
	}
	// another key from alice's address: the address's share is 4 MiB
	h3.owner = Owner{Key: 2, Address: "192.0.2.1"}
	if err := b.Take(&h3, 1<<20); err != nil {
		t.Fatal(err)
	}
	if err := b.Take(&h3, 1); !errors.Is(err, ErrAddressBusy) {
		t.Fatalf("an address past its share: %v", err)
	}
	// others are read, up to the whole budget
	h4.owner = Owner{Key: 3, Address: "192.0.2.2"}
	if err := b.Take(&h4, 3<<20); err != nil {
		t.Fatal(err)
	}
	h6 := Held{owner: Owner{Key: 5, Address: "192.0.2.4"}}
	if err := b.Take(&h6, 1); err != nil {
		t.Fatal(err)
	}
	h5 := Held{owner: Owner{Key: 4, Address: "192.0.2.3"}}
	if err := b.Take(&h5, 3<<20); !errors.Is(err, ErrBusy) || !Busy(err) {
		t.Fatalf("past the whole budget: %v", err)
	}
	for _, h := range []Held{h1, h2, h3, h4, h5, h6} {
		b.Give(h)
	}
	if all, keys, addrs := b.holding(); all != 0 || len(keys)+len(addrs) != 0 {
		t.Fatalf("after Give: %d bytes, %v, %v", all, keys, addrs)
	}
	// without shares, one owner may take the whole budget
	b = NewBudget(Limits{Total: 10 << 20})
	h := Held{owner: alice}
	if err := b.Take(&h, 10<<20); err != nil {
		t.Fatal(err)
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
