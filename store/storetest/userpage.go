package storetest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/store"
)

// What the console's user page reads: a user's live sessions, the people
// they invited with the rewards still owed, users by plan and group, and
// the codes a user redeemed.

func testListUserSessions(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	u, other := mustUser(t, s, "u", 0), mustUser(t, s, "other", 0)
	soon := time.Now().Add(time.Hour)
	for _, sess := range []*store.Session{
		{IDHash: "a", UserID: u.ID, ExpiresAt: soon, CreatedAt: time.Now().Add(-2 * time.Minute)},
		{IDHash: "b", UserID: u.ID, ExpiresAt: soon, CreatedAt: time.Now().Add(-time.Minute)},
		{IDHash: "gone", UserID: u.ID, ExpiresAt: time.Now().Add(-time.Second)},
		{IDHash: "theirs", UserID: other.ID, ExpiresAt: soon},
	} {
		if err := s.CreateSession(ctx, sess); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.ListUserSessions(ctx, u.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].IDHash != "b" || got[1].IDHash != "a" || got[0].UserID != u.ID {
		t.Fatalf("u's live sessions, newest first: %+v", got)
	}
	if none, err := s.ListUserSessions(ctx, 999); err != nil || len(none) != 0 {
		t.Fatalf("nobody's sessions: %v, %v", none, err)
	}
}

func testListInvitees(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	inviter, stranger := mustUser(t, s, "inviter", 0), mustUser(t, s, "stranger", 0)
	reward := store.InvitationReward{Amount: 250, MinPayment: 1000}
	paid := &store.User{Username: "paid", InvitedBy: inviter.ID, InviteCode: "PAID"}
	owing := &store.User{Username: "owing", InvitedBy: inviter.ID, InviteCode: "OWING"}
	for _, u := range []*store.User{paid, owing} {
		if err := s.RegisterUser(ctx, u, reward); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.RegisterUser(ctx, &store.User{Username: "elsewhere", InvitedBy: stranger.ID, InviteCode: "ELSE"}, reward); err != nil {
		t.Fatal(err)
	}
	if err := s.CreditQuota(ctx, paid.ID, 1000); err != nil {
		t.Fatal(err)
	}
	got, err := s.ListInvitees(ctx, inviter.ID, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Username != "owing" || got[1].Username != "paid" {
		t.Fatalf("the inviter's invitees, newest first: %+v", got)
	}
	if got[0].RewardOwed != 250 || got[0].RewardMin != 1000 || got[1].RewardOwed != 0 || got[0].CreatedAt.IsZero() {
		t.Fatalf("owed and paid: %+v, %+v", *got[0], *got[1])
	}
	if one, err := s.ListInvitees(ctx, inviter.ID, 1); err != nil || len(one) != 1 || one[0].Username != "owing" {
		t.Fatalf("a limit of 1: %v, %v", one, err)
	}
}

func testListUsersByPlanAndGroup(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	a, b, c := mustUser(t, s, "a", 0), mustUser(t, s, "b", 0), mustUser(t, s, "c", 0)
	for _, err := range []error{
		s.SetUserPlan(ctx, a.ID, "pro", time.Time{}), s.SetUserGroup(ctx, a.ID, "team"),
		s.SetUserPlan(ctx, b.ID, "pro", time.Now().Add(time.Hour)), s.SetUserGroup(ctx, c.ID, "team"),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	names := func(f store.UserFilter) []string {
		t.Helper()
		us, err := s.ListUsers(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, u := range us {
			out = append(out, u.Username)
		}
		return out
	}
	for _, tc := range []struct {
		f    store.UserFilter
		want string
	}{
		{store.UserFilter{Plan: "pro"}, "a b"},
		{store.UserFilter{Group: "team"}, "a c"},
		{store.UserFilter{Plan: "pro", Group: "team"}, "a"},
		{store.UserFilter{Plan: "none-such"}, ""},
		{store.UserFilter{Plan: "pro", AfterID: a.ID}, "b"},
	} {
		if got := strings.Join(names(tc.f), " "); got != tc.want {
			t.Errorf("ListUsers(%+v) = %q, want %q", tc.f, got, tc.want)
		}
	}
	// the groups and plans of a page of users, read at once
	got, err := s.UserBudgetsOf(ctx, []int64{a.ID, b.ID, c.ID, 999})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[a.ID].Plan != "pro" || got[a.ID].Group != "team" || got[b.ID].PlanUntil.IsZero() ||
		got[c.ID].Plan != "" || got[c.ID].Group != "team" {
		t.Fatalf("UserBudgetsOf: %+v", got)
	}
	if none, err := s.UserBudgetsOf(ctx, nil); err != nil || len(none) != 0 {
		t.Fatalf("UserBudgetsOf(nil): %v, %v", none, err)
	}
}

func testListCodesUsedBy(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	u, other := mustUser(t, s, "u", 0), mustUser(t, s, "other", 0)
	if err := s.CreateRedemptionCodes(ctx, []*store.RedemptionCode{{Code: "U1", Quota: 1}, {Code: "U2", Plan: "pro", PlanDays: 30}, {Code: "O1", Quota: 1}, {Code: "FREE", Quota: 1}}); err != nil {
		t.Fatal(err)
	}
	for code, id := range map[string]int64{"U1": u.ID, "U2": u.ID, "O1": other.ID} {
		if _, err := s.Redeem(ctx, code, id); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.ListRedemptionCodes(ctx, store.CodeFilter{UsedBy: u.ID})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Code != "U2" || got[0].Plan != "pro" || got[1].Code != "U1" || got[1].RedeemedAt.IsZero() {
		t.Fatalf("the codes u redeemed: %+v", got)
	}
}
