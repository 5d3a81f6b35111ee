package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/store"
)

func testCreateUserDefaultsAndLookups(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	inviter := mustUser(t, s, "inviter", 0)
	u := &store.User{
		Username:        "bob",
		PasswordHash:    "h",
		Quota:           1_000_000,
		InviteCode:      "BOB123",
		InvitedBy:       inviter.ID,
		InvitationQuota: 500,
	}
	before := time.Now()
	if err := s.CreateUser(ctx, u); err != nil {
		t.Fatal(err)
	}
	if u.ID == 0 || u.ID == inviter.ID {
		t.Fatalf("id = %d", u.ID)
	}
	if u.Role != store.RoleUser || u.Status != "enabled" {
		t.Fatalf("defaults: role %q status %q", u.Role, u.Status)
	}
	if u.CreatedAt.Before(before.Add(-time.Second)) || u.CreatedAt.Location() != time.UTC {
		t.Fatalf("created at %v", u.CreatedAt)
	}

	lookups := map[string]func() (*store.User, error){
		"by id":          func() (*store.User, error) { return s.UserByID(ctx, u.ID) },
		"by name":        func() (*store.User, error) { return s.UserByName(ctx, "bob") },
		"by invite code": func() (*store.User, error) { return s.UserByInviteCode(ctx, "BOB123") },
	}
	for name, lookup := range lookups {
		t.Run(name, func(t *testing.T) {
			got, err := lookup()
			if err != nil {
				t.Fatal(err)
			}
			if !got.CreatedAt.Equal(u.CreatedAt) {
				t.Fatalf("created at %v, want %v", got.CreatedAt, u.CreatedAt)
			}
			got.CreatedAt = u.CreatedAt
			if *got != *u {
				t.Fatalf("got  %+v\nwant %+v", *got, *u)
			}
		})
	}
}

func testCreateUserKeepsGivenFields(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	created := time.Date(2024, 5, 6, 7, 8, 9, 123_000_000, time.FixedZone("X", 3600))
	u := &store.User{Username: "root", Role: store.RoleRoot, Status: "disabled", CreatedAt: created}
	if err := s.CreateUser(ctx, u); err != nil {
		t.Fatal(err)
	}
	got := mustGetUser(t, s, u.ID)
	if got.Role != store.RoleRoot || got.Status != "disabled" || !got.CreatedAt.Equal(created) ||
		got.CreatedAt.Location() != time.UTC || got.InviteCode != "" {
		t.Fatalf("got %+v", got)
	}
}

func testCreateUserConflicts(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	if err := s.CreateUser(ctx, &store.User{Username: "a", InviteCode: "CODE"}); err != nil {
		t.Fatal(err)
	}
	// Users without an invite code do not collide with each other.
	for _, name := range []string{"b", "c"} {
		if err := s.CreateUser(ctx, &store.User{Username: name}); err != nil {
			t.Fatalf("user %s without invite code: %v", name, err)
		}
	}
	tests := map[string]*store.User{
		"same username":    {Username: "a"},
		"same invite code": {Username: "d", InviteCode: "CODE"},
		// names a person reads as a taken one (usernames.Key)
		"other case":    {Username: "A"},
		"look-alike":    {Username: "а"}, // Cyrillic а
		"compatibility": {Username: "ａ"}, // fullwidth a
	}
	for name, u := range tests {
		t.Run(name, func(t *testing.T) {
			err := s.CreateUser(ctx, u)
			if !errors.Is(err, store.ErrConflict) {
				t.Fatalf("err = %v, want ErrConflict", err)
			}
		})
	}
	if err := s.CreateUser(ctx, &store.User{}); err == nil {
		t.Fatal("empty username accepted")
	}
	if n, err := s.CountUsers(ctx); err != nil || n != 3 {
		t.Fatalf("count = %d, %v; want 3", n, err)
	}
}

func testUserNotFound(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	mustUser(t, s, "someone", 0) // has no invite code: "" must not find it
	tests := map[string]func() error{
		"by id":             func() error { _, err := s.UserByID(ctx, 999); return err },
		"by name":           func() error { _, err := s.UserByName(ctx, "nobody"); return err },
		"by invite code":    func() error { _, err := s.UserByInviteCode(ctx, "NOPE"); return err },
		"by empty code":     func() error { _, err := s.UserByInviteCode(ctx, ""); return err },
		"update password":   func() error { return s.UpdatePassword(ctx, 999, "h", "") },
		"add quota":         func() error { return s.AddQuota(ctx, 999, 1) },
		"transfer invites":  func() error { return s.TransferInvitationQuota(ctx, 999, 1) },
		"redeem for nobody": func() error { _, err := s.Redeem(ctx, "nothing", 999); return err },
	}
	for name, call := range tests {
		t.Run(name, func(t *testing.T) {
			if err := call(); !isNotFound(err) {
				t.Fatalf("err = %v, want ErrNotFound", err)
			}
		})
	}
}

func testUpdatePassword(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	u := mustUser(t, s, "p", 0)
	other := mustUser(t, s, "q", 0)
	expires := time.Now().Add(time.Hour)
	for _, sess := range []*store.Session{{IDHash: "kept", UserID: u.ID}, {IDHash: "ended", UserID: u.ID}, {IDHash: "others", UserID: other.ID}} {
		sess.ExpiresAt = expires
		if err := s.CreateSession(ctx, sess); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.UpdatePassword(ctx, u.ID, "new-hash", "kept"); err != nil {
		t.Fatal(err)
	}
	if got := mustGetUser(t, s, u.ID); got.PasswordHash != "new-hash" {
		t.Fatalf("hash = %q", got.PasswordHash)
	}
	for hash, live := range map[string]bool{"kept": true, "ended": false, "others": true} {
		if _, err := s.SessionByHash(ctx, hash); (err == nil) != live {
			t.Fatalf("session %s: %v, want live %v", hash, err, live)
		}
	}
	if err := s.UpdatePassword(ctx, u.ID, "newer-hash", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SessionByHash(ctx, "kept"); !isNotFound(err) {
		t.Fatalf("a change from the CLI left a session: %v", err)
	}
}

func testAddQuota(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	u := mustUser(t, s, "q", 100)
	for _, delta := range []int64{50, -30, -200} {
		if err := s.AddQuota(ctx, u.ID, delta); err != nil {
			t.Fatalf("add %d: %v", delta, err)
		}
	}
	// A negative balance is allowed: the store records, the ledger decides.
	if got := mustGetUser(t, s, u.ID); got.Quota != -80 {
		t.Fatalf("quota = %d, want -80", got.Quota)
	}
}

func testTransferInvitationQuota(t *testing.T, open Opener) {
	ctx := context.Background()
	tests := []struct {
		name                string
		amount              int64
		wantErr             error // nil: success
		wantQuota, wantLeft int64
	}{
		{name: "part", amount: 300, wantQuota: 1300, wantLeft: 700},
		{name: "all", amount: 1000, wantQuota: 2000, wantLeft: 0},
		{name: "too much", amount: 1001, wantErr: store.ErrInsufficientQuota, wantQuota: 1000, wantLeft: 1000},
		{name: "zero", amount: 0, wantErr: errAny, wantQuota: 1000, wantLeft: 1000},
		{name: "negative", amount: -5, wantErr: errAny, wantQuota: 1000, wantLeft: 1000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := open(t)
			u := &store.User{Username: "inv", Quota: 1000, InvitationQuota: 1000}
			if err := s.CreateUser(ctx, u); err != nil {
				t.Fatal(err)
			}
			err := s.TransferInvitationQuota(ctx, u.ID, tt.amount)
			switch {
			case tt.wantErr == nil && err != nil:
				t.Fatalf("err = %v", err)
			case tt.wantErr == errAny && err == nil:
				t.Fatal("no error")
			case tt.wantErr != nil && tt.wantErr != errAny && !errors.Is(err, tt.wantErr):
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			got := mustGetUser(t, s, u.ID)
			if got.Quota != tt.wantQuota || got.InvitationQuota != tt.wantLeft {
				t.Fatalf("quota %d invitation %d, want %d and %d",
					got.Quota, got.InvitationQuota, tt.wantQuota, tt.wantLeft)
			}
		})
	}
}
