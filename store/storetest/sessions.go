package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/store"
)

func testSessions(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	u := mustUser(t, s, "s", 0)
	live := &store.Session{IDHash: "live", UserID: u.ID, ExpiresAt: time.Now().Add(time.Hour)}
	if err := s.CreateSession(ctx, live); err != nil {
		t.Fatal(err)
	}
	if live.CreatedAt.IsZero() {
		t.Fatal("created at not set")
	}
	got, err := s.SessionByHash(ctx, "live")
	if err != nil {
		t.Fatal(err)
	}
	if got.IDHash != "live" || got.UserID != u.ID || !got.ExpiresAt.Equal(ms(live.ExpiresAt)) ||
		!got.CreatedAt.Equal(live.CreatedAt) || got.ExpiresAt.Location() != time.UTC {
		t.Fatalf("got %+v, want %+v", *got, *live)
	}

	expired := &store.Session{IDHash: "old", UserID: u.ID, ExpiresAt: time.Now().Add(-time.Minute)}
	if err := s.CreateSession(ctx, expired); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SessionByHash(ctx, "old"); !isNotFound(err) {
		t.Fatalf("expired session: %v, want ErrNotFound", err)
	}

	if err := s.DeleteSession(ctx, "live"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SessionByHash(ctx, "live"); !isNotFound(err) {
		t.Fatalf("deleted session: %v, want ErrNotFound", err)
	}
	if err := s.DeleteSession(ctx, "live"); err != nil {
		t.Fatalf("second delete: %v", err)
	}
	if _, err := s.SessionByHash(ctx, "never"); !isNotFound(err) {
		t.Fatalf("missing session: %v", err)
	}
}

func testCreateSessionRejects(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	u := mustUser(t, s, "s", 0)
	soon := time.Now().Add(time.Hour)
	if err := s.CreateSession(ctx, &store.Session{IDHash: "dup", UserID: u.ID, ExpiresAt: soon}); err != nil {
		t.Fatal(err)
	}
	tests := map[string]*store.Session{
		"no hash":      {UserID: u.ID, ExpiresAt: soon},
		"no expiry":    {IDHash: "x", UserID: u.ID},
		"no such user": {IDHash: "y", UserID: u.ID + 1, ExpiresAt: soon},
		"same hash":    {IDHash: "dup", UserID: u.ID, ExpiresAt: soon},
	}
	for name, sess := range tests {
		t.Run(name, func(t *testing.T) {
			if err := s.CreateSession(ctx, sess); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}
