package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/store"
)

// testUpdateUserAppliesEveryFieldAtOnce: status, role, quota, limits and
// the ending of sessions land together, and a credit pays the invitation
// reward the user's signup owes.
func testUpdateUserAppliesEveryFieldAtOnce(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	inviter := mustUser(t, s, "inviter", 0)
	u := &store.User{Username: "new", InvitedBy: inviter.ID, InviteCode: "NEWCODE"}
	if err := s.RegisterUser(ctx, u, store.InvitationReward{Amount: 250}); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateSession(ctx, &store.Session{IDHash: "s1", UserID: u.ID, ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	disabled, admin := store.UserDisabled, store.RoleAdmin
	limits := store.Limits{RPM: 5, TPM: 6, MaxParallel: 7}
	got, err := s.UpdateUser(ctx, u.ID, store.UserChange{Status: &disabled, Role: &admin, QuotaDelta: 1000, Limits: &limits, EndSessions: true})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != disabled || got.Role != admin || got.Quota != 1000 || got.Limits != limits {
		t.Fatalf("updated user = %+v", got)
	}
	if _, err := s.SessionByHash(ctx, "s1"); !isNotFound(err) {
		t.Fatalf("session after EndSessions: %v", err)
	}
	if got := mustGetUser(t, s, inviter.ID); got.InvitationQuota != 250 {
		t.Fatalf("the credit paid the inviter %d, want 250", got.InvitationQuota)
	}
	// a debit owes nobody anything, and an empty change changes nothing
	if got, err = s.UpdateUser(ctx, u.ID, store.UserChange{QuotaDelta: -400}); err != nil || got.Quota != 600 || got.Role != admin {
		t.Fatalf("after a debit: %+v, %v", got, err)
	}
}

// testUpdateUserIsAllOrNothing: a debit beyond the balance refuses the
// whole change; nothing else in it is made.
func testUpdateUserIsAllOrNothing(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	u := mustUser(t, s, "u", 100)
	if err := s.CreateSession(ctx, &store.Session{IDHash: "s1", UserID: u.ID, ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	disabled := store.UserDisabled
	_, err := s.UpdateUser(ctx, u.ID, store.UserChange{Status: &disabled, QuotaDelta: -101, Limits: &store.Limits{RPM: 1}, EndSessions: true})
	if !errors.Is(err, store.ErrInsufficientQuota) {
		t.Fatalf("debit beyond the balance: %v, want ErrInsufficientQuota", err)
	}
	got := mustGetUser(t, s, u.ID)
	if got.Status != store.UserEnabled || got.Quota != 100 || got.Limits != (store.Limits{}) {
		t.Fatalf("a refused change was partly made: %+v", got)
	}
	if _, err := s.SessionByHash(ctx, "s1"); err != nil {
		t.Fatalf("a refused change ended sessions: %v", err)
	}
	if _, err := s.UpdateUser(ctx, 9999, store.UserChange{QuotaDelta: 1}); !isNotFound(err) {
		t.Fatalf("missing user: %v", err)
	}
	bad := "sleeping"
	if _, err := s.UpdateUser(ctx, u.ID, store.UserChange{Status: &bad}); err == nil {
		t.Fatal("an unknown status was stored")
	}
}
