package storetest

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/caddy-model-gateway/gateway/store"
)

// Runtime configuration: an item is created once per kind and name,
// listed by kind, replaced (keeping its creation time and last test),
// tested without being replaced, and deleted; its secret comes back byte
// for byte.
func testRuntimeItems(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	ch := &store.RuntimeItem{Kind: store.RuntimeChannel, Name: "east", Config: `{"type":"openai"}`, Secret: []byte{0, 1, 2, 255}, KeyPrefix: "sk-a…"}
	if err := s.PutRuntime(ctx, ch, false); err != nil {
		t.Fatal(err)
	}
	if ch.CreatedAt.IsZero() || ch.UpdatedAt.IsZero() {
		t.Fatal("times not set")
	}
	if err := s.PutRuntime(ctx, &store.RuntimeItem{Kind: store.RuntimeChannel, Name: "east", Config: `{}`}, false); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a name taken: %v, want ErrConflict", err)
	}
	// the same name is free in another kind
	if err := s.PutRuntime(ctx, &store.RuntimeItem{Kind: store.RuntimePrice, Name: "east", Config: `{"input":1}`}, false); err != nil {
		t.Fatal(err)
	}
	if err := s.PutRuntime(ctx, &store.RuntimeItem{Kind: store.RuntimeChannel, Name: "missing", Config: `{}`}, true); !isNotFound(err) {
		t.Fatalf("replacing what is not there: %v, want ErrNotFound", err)
	}
	if err := s.PutRuntime(ctx, &store.RuntimeItem{Kind: "widget", Name: "w", Config: `{}`}, false); err == nil {
		t.Fatal("an unknown kind was stored")
	}
	if err := s.SetRuntimeTest(ctx, store.RuntimeChannel, "east", `{"ok":true}`); err != nil {
		t.Fatal(err)
	}
	if err := s.SetRuntimeTest(ctx, store.RuntimeChannel, "west", `{}`); !isNotFound(err) {
		t.Fatalf("testing what is not there: %v, want ErrNotFound", err)
	}
	got, err := s.ListRuntime(ctx, store.RuntimeChannel)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Name != "east" || got[0].Config != ch.Config || !bytes.Equal(got[0].Secret, ch.Secret) ||
		got[0].KeyPrefix != "sk-a…" || got[0].Disabled || got[0].Test != `{"ok":true}` || !got[0].CreatedAt.Equal(ms(ch.CreatedAt)) {
		t.Fatalf("listed %+v", got)
	}
	repl := &store.RuntimeItem{Kind: store.RuntimeChannel, Name: "east", Config: `{"type":"anthropic"}`, Secret: []byte("new"), Disabled: true}
	if err := s.PutRuntime(ctx, repl, true); err != nil {
		t.Fatal(err)
	}
	all, err := s.ListRuntime(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 2 || all[0].Kind != store.RuntimeChannel || all[1].Kind != store.RuntimePrice {
		t.Fatalf("every kind: %+v", all)
	}
	if e := all[0]; e.Config != repl.Config || string(e.Secret) != "new" || !e.Disabled || e.Test != `{"ok":true}` || !e.CreatedAt.Equal(ms(ch.CreatedAt)) || !repl.CreatedAt.Equal(ms(ch.CreatedAt)) {
		t.Fatalf("replaced: %+v", e)
	}
	if err := s.DeleteRuntime(ctx, store.RuntimeChannel, "east"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRuntime(ctx, store.RuntimeChannel, "east"); !isNotFound(err) {
		t.Fatalf("deleting twice: %v, want ErrNotFound", err)
	}
	if left, _ := s.ListRuntime(ctx, store.RuntimeChannel); len(left) != 0 {
		t.Fatalf("left %+v", left)
	}
}

// Resealing passes every secret through the function in one transaction:
// one failure leaves every secret as it was.
func testRuntimeReseal(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	for _, n := range []string{"a", "b", "c"} {
		it := &store.RuntimeItem{Kind: store.RuntimeChannel, Name: n, Config: `{}`, Secret: []byte("old-" + n)}
		if n == "c" {
			it.Secret = nil // a channel without keys has nothing to reseal
		}
		if err := s.PutRuntime(ctx, it, false); err != nil {
			t.Fatal(err)
		}
	}
	boom := errors.New("wrong key")
	if _, err := s.ResealSecrets(ctx, store.Resealers{Runtime: func(it *store.RuntimeItem) ([]byte, error) {
		if it.Name == "b" {
			return nil, boom
		}
		return []byte("new-" + it.Name), nil
	}}); !errors.Is(err, boom) {
		t.Fatalf("reseal: %v, want the function's error", err)
	}
	secrets := func() map[string]string {
		items, err := s.ListRuntime(ctx, store.RuntimeChannel)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, it := range items {
			out[it.Name] = string(it.Secret)
		}
		return out
	}
	if got := secrets(); got["a"] != "old-a" || got["b"] != "old-b" {
		t.Fatalf("after a failed reseal: %v", got)
	}
	n, err := s.ResealSecrets(ctx, store.Resealers{Runtime: func(it *store.RuntimeItem) ([]byte, error) { return []byte("new-" + string(it.Secret)), nil }})
	if err != nil || n != (store.ResealCounts{Runtime: 2}) {
		t.Fatalf("reseal: %+v, %v; want 2", n, err)
	}
	if got := secrets(); got["a"] != "new-old-a" || got["b"] != "new-old-b" || got["c"] != "" {
		t.Fatalf("after reseal: %v", got)
	}
}
