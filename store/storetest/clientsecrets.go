package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/store"
)

// Realtime client secrets: stored by hash with their token, model and
// expiry; an expired one is not found (and is deleted when the next is
// minted); a hash is stored once; a secret without an expiry or a token is
// refused.
func testClientSecrets(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	u := mustUser(t, s, "cs", 0)
	tok := mustToken(t, s, u.ID, "cs-key")
	live := &store.ClientSecret{IDHash: "live", TokenID: tok.ID, Model: "gpt-realtime", Session: `{"instructions":"Be brief."}`, ExpiresAt: time.Now().Add(10 * time.Minute)}
	if err := s.CreateClientSecret(ctx, live); err != nil {
		t.Fatal(err)
	}
	if live.CreatedAt.IsZero() {
		t.Fatal("created at not set")
	}
	got, err := s.ClientSecretByHash(ctx, "live")
	if err != nil {
		t.Fatal(err)
	}
	if got.IDHash != "live" || got.TokenID != tok.ID || got.Model != "gpt-realtime" || got.Session != live.Session || !got.ExpiresAt.Equal(ms(live.ExpiresAt)) ||
		!got.CreatedAt.Equal(ms(live.CreatedAt)) || got.ExpiresAt.Location() != time.UTC {
		t.Fatalf("got %+v, want %+v", *got, *live)
	}
	if err := s.CreateClientSecret(ctx, &store.ClientSecret{IDHash: "live", TokenID: tok.ID, ExpiresAt: time.Now().Add(time.Minute)}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a hash stored twice: %v, want ErrConflict", err)
	}
	old := &store.ClientSecret{IDHash: "old", TokenID: tok.ID, ExpiresAt: time.Now().Add(-time.Second)}
	if err := s.CreateClientSecret(ctx, old); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ClientSecretByHash(ctx, "old"); !isNotFound(err) {
		t.Fatalf("expired secret: %v, want ErrNotFound", err)
	}
	if _, err := s.ClientSecretByHash(ctx, "never"); !isNotFound(err) {
		t.Fatalf("missing secret: %v, want ErrNotFound", err)
	}
	// the expired one is gone once another is minted: its hash is free
	if err := s.CreateClientSecret(ctx, &store.ClientSecret{IDHash: "next", TokenID: tok.ID, ExpiresAt: time.Now().Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateClientSecret(ctx, &store.ClientSecret{IDHash: "old", TokenID: tok.ID, ExpiresAt: time.Now().Add(time.Minute)}); err != nil {
		t.Fatalf("the expired secret's hash again: %v", err)
	}
	for _, bad := range []*store.ClientSecret{
		{TokenID: tok.ID, ExpiresAt: time.Now().Add(time.Minute)},
		{IDHash: "no-token", ExpiresAt: time.Now().Add(time.Minute)},
		{IDHash: "no-expiry", TokenID: tok.ID},
	} {
		if err := s.CreateClientSecret(ctx, bad); err == nil {
			t.Errorf("stored %+v", *bad)
		}
	}
}
