package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/store"
)

// testRegisterUserRewardsInviterOnFirstPayment: a signup with an
// invitation owes the inviter a reward that the invitee's first payment
// (a redeemed code, an administrator's credit) pays, once.
func testRegisterUserRewardsInviterOnFirstPayment(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	inviter := mustUser(t, s, "inviter", 0)
	u := &store.User{Username: "new", InvitedBy: inviter.ID, InviteCode: "NEWCODE"}
	if err := s.RegisterUser(ctx, u, store.InvitationReward{Amount: 250}); err != nil {
		t.Fatal(err)
	}
	if got := mustGetUser(t, s, inviter.ID); got.InvitationQuota != 0 {
		t.Fatalf("a signup alone paid the inviter %d", got.InvitationQuota)
	}
	if got := mustGetUser(t, s, u.ID); got.InvitedBy != inviter.ID || got.Role != store.RoleUser {
		t.Fatalf("registered user = %+v", got)
	}
	// a taken name records nothing
	err := s.RegisterUser(ctx, &store.User{Username: "new", InvitedBy: inviter.ID}, store.InvitationReward{Amount: 250})
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("duplicate name: %v", err)
	}
	if err := s.RegisterUser(ctx, &store.User{Username: "orphan", InvitedBy: 999}, store.InvitationReward{Amount: 1}); !isNotFound(err) {
		t.Fatalf("missing inviter: %v", err)
	}
	if _, err := s.UserByName(ctx, "orphan"); !isNotFound(err) {
		t.Fatalf("user created despite a missing inviter: %v", err)
	}

	// the first payment pays the reward; later ones do not
	if err := s.CreateRedemptionCodes(ctx, []*store.RedemptionCode{{Code: "C1", Quota: 1000}, {Code: "C2", Quota: 1000}}); err != nil {
		t.Fatal(err)
	}
	for _, code := range []string{"C1", "C2"} {
		if _, err := s.Redeem(ctx, code, u.ID); err != nil {
			t.Fatal(err)
		}
		if got := mustGetUser(t, s, inviter.ID); got.InvitationQuota != 250 {
			t.Fatalf("after redeeming %s the inviter has %d, want 250", code, got.InvitationQuota)
		}
	}
	if err := s.CreditQuota(ctx, u.ID, 5); err != nil {
		t.Fatal(err)
	}
	if got := mustGetUser(t, s, inviter.ID); got.InvitationQuota != 250 {
		t.Fatalf("a later credit paid again: %d", got.InvitationQuota)
	}
	if got := mustGetUser(t, s, u.ID); got.Quota != 2005 || got.InvitationQuota != 0 {
		t.Fatalf("invitee = %+v", got)
	}

	// an administrator's credit is a first payment too; a refused code is not
	credited := &store.User{Username: "credited", InvitedBy: inviter.ID, InviteCode: "CREDITED"}
	if err := s.RegisterUser(ctx, credited, store.InvitationReward{Amount: 100}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Redeem(ctx, "C1", credited.ID); !isNotFound(err) {
		t.Fatalf("a used code: %v", err)
	}
	if got := mustGetUser(t, s, inviter.ID); got.InvitationQuota != 250 {
		t.Fatalf("a refused redemption paid the reward: %d", got.InvitationQuota)
	}
	if err := s.CreditQuota(ctx, credited.ID, 100); err != nil {
		t.Fatal(err)
	}
	if got := mustGetUser(t, s, inviter.ID); got.InvitationQuota != 350 {
		t.Fatalf("after the credit the inviter has %d, want 350", got.InvitationQuota)
	}
	if err := s.CreditQuota(ctx, 999, 1); !isNotFound(err) {
		t.Fatalf("credit to a missing user: %v", err)
	}
	if err := s.CreditQuota(ctx, u.ID, -1); err == nil {
		t.Fatal("a negative credit was accepted")
	}
}

// testInvitationRewardNeedsAPayment: a reward is paid by a payment of at
// least its minimum (the reward itself unless set), never by a smaller one
// nor by a plan code unless the reward says so; a smaller payment leaves
// it owed to the next that qualifies.
func testInvitationRewardNeedsAPayment(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	inviter := mustUser(t, s, "inviter", 0)
	invitee := func(name string, r store.InvitationReward) *store.User {
		t.Helper()
		u := &store.User{Username: name, InvitedBy: inviter.ID, InviteCode: "INV-" + name}
		if err := s.RegisterUser(ctx, u, r); err != nil {
			t.Fatal(err)
		}
		return u
	}
	paid := func(want int64, after string) {
		t.Helper()
		if got := mustGetUser(t, s, inviter.ID).InvitationQuota; got != want {
			t.Fatalf("after %s the inviter has %d, want %d", after, got, want)
		}
	}
	if err := s.CreateRedemptionCodes(ctx, []*store.RedemptionCode{
		{Code: "ONE", Quota: 1}, {Code: "PLAN", Plan: "pro", PlanDays: 30}, {Code: "FULL", Quota: 500000},
		{Code: "PLAN2", Plan: "pro", PlanDays: 30}, {Code: "SMALL", Quota: 99}}); err != nil {
		t.Fatal(err)
	}

	// the default minimum is the reward
	a := invitee("a", store.InvitationReward{Amount: 500000})
	for _, code := range []string{"ONE", "PLAN"} {
		if _, err := s.Redeem(ctx, code, a.ID); err != nil {
			t.Fatal(err)
		}
		paid(0, "a code of 1 unit and a plan code")
	}
	if err := s.CreditQuota(ctx, a.ID, 499999); err != nil {
		t.Fatal(err)
	}
	paid(0, "a credit a unit short")
	if _, err := s.Redeem(ctx, "FULL", a.ID); err != nil {
		t.Fatal(err)
	}
	paid(500000, "a code worth the reward")

	// a minimum of its own, and plan codes counted when configured
	b := invitee("b", store.InvitationReward{Amount: 250, MinPayment: 100, PlanCodes: true})
	if _, err := s.Redeem(ctx, "SMALL", b.ID); err != nil {
		t.Fatal(err)
	}
	paid(500000, "99 units against a minimum of 100")
	if _, err := s.Redeem(ctx, "PLAN2", b.ID); err != nil {
		t.Fatal(err)
	}
	paid(500250, "a plan code the reward counts")
	if err := s.CreditQuota(ctx, b.ID, 1000); err != nil {
		t.Fatal(err)
	}
	paid(500250, "a second payment")

	// an administrator's credit through UpdateUser follows the same rule
	c := invitee("c", store.InvitationReward{Amount: 300})
	if _, err := s.UpdateUser(ctx, c.ID, store.UserChange{QuotaDelta: 299}); err != nil {
		t.Fatal(err)
	}
	paid(500250, "an administrator's credit below the reward")
	if _, err := s.UpdateUser(ctx, c.ID, store.UserChange{QuotaDelta: 300}); err != nil {
		t.Fatal(err)
	}
	paid(500550, "an administrator's credit of the reward")

	if err := s.RegisterUser(ctx, &store.User{Username: "d", InvitedBy: inviter.ID}, store.InvitationReward{Amount: 1, MinPayment: -1}); err == nil {
		t.Fatal("a negative minimum payment was accepted")
	}
}

func testListUsersPagesAndAdminChanges(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	for i := range 5 {
		mustUser(t, s, fmt.Sprintf("u%d", i), 0)
	}
	page1, err := s.ListUsers(ctx, store.UserFilter{Limit: 3})
	if err != nil || len(page1) != 3 {
		t.Fatalf("page 1: %d, %v", len(page1), err)
	}
	page2, err := s.ListUsers(ctx, store.UserFilter{AfterID: page1[2].ID, Limit: 3})
	if err != nil || len(page2) != 2 || page2[0].ID <= page1[2].ID {
		t.Fatalf("page 2: %+v, %v", page2, err)
	}
	id := page1[0].ID
	if err := s.SetUserStatus(ctx, id, store.UserDisabled); err != nil {
		t.Fatal(err)
	}
	if err := s.SetUserRole(ctx, id, store.RoleAdmin); err != nil {
		t.Fatal(err)
	}
	if got := mustGetUser(t, s, id); got.Status != store.UserDisabled || got.Role != store.RoleAdmin {
		t.Fatalf("after changes: %+v", got)
	}
	if err := s.SetUserRole(ctx, id, "emperor"); err == nil {
		t.Fatal("unknown role accepted")
	}
	if err := s.SetUserStatus(ctx, 999, store.UserEnabled); !isNotFound(err) {
		t.Fatalf("missing user: %v", err)
	}
}

func testUpdateAndDeleteTokenOnlyByOwner(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	a := mustUser(t, s, "a", 0)
	b := mustUser(t, s, "b", 0)
	tok := mustToken(t, s, a.ID, "hash-a")
	stolen := *tok
	stolen.UserID = b.ID
	stolen.Name = "mine now"
	if err := s.UpdateToken(ctx, &stolen); !isNotFound(err) {
		t.Fatalf("update by another user: %v", err)
	}
	if err := s.DeleteToken(ctx, b.ID, tok.ID); !isNotFound(err) {
		t.Fatalf("delete by another user: %v", err)
	}
	upd := *tok
	upd.Name, upd.Status, upd.QuotaLimit, upd.Models = "renamed", store.TokenDisabled, 42, []string{"m1"}
	upd.ExpiresAt = ms(time.Now().Add(time.Hour))
	if err := s.UpdateToken(ctx, &upd); err != nil {
		t.Fatal(err)
	}
	got, err := s.TokenByID(ctx, tok.ID)
	if err != nil || got.Name != "renamed" || got.Status != store.TokenDisabled || got.QuotaLimit != 42 ||
		len(got.Models) != 1 || !got.ExpiresAt.Equal(upd.ExpiresAt) {
		t.Fatalf("after update: %+v, %v", got, err)
	}
	if err := s.DeleteToken(ctx, a.ID, tok.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TokenByID(ctx, tok.ID); !isNotFound(err) {
		t.Fatalf("deleted token still there: %v", err)
	}
}

func testRedeemRefusesDisabledAndExpiredCodes(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	u := mustUser(t, s, "r", 0)
	codes := []*store.RedemptionCode{
		{Code: "OFF", Quota: 1},
		{Code: "OLD", Quota: 2, ExpiresAt: time.Now().Add(-time.Minute)},
		{Code: "NEW", Quota: 3, ExpiresAt: time.Now().Add(time.Hour)},
	}
	if err := s.CreateRedemptionCodes(ctx, codes); err != nil {
		t.Fatal(err)
	}
	if err := s.SetRedemptionCodeStatus(ctx, codes[0].ID, store.CodeDisabled); err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"OFF", "OLD"} {
		if _, err := s.Redeem(ctx, c, u.ID); !isNotFound(err) {
			t.Fatalf("redeem %s: %v", c, err)
		}
	}
	if got, err := s.Redeem(ctx, "NEW", u.ID); err != nil || got != 3 {
		t.Fatalf("redeem NEW = %d, %v", got, err)
	}
	list, err := s.ListRedemptionCodes(ctx, store.CodeFilter{Limit: 2})
	if err != nil || len(list) != 2 || list[0].Code != "NEW" || list[0].UsedBy != u.ID || list[1].Status != store.CodeEnabled {
		t.Fatalf("list: %+v, %v", list, err)
	}
	rest, err := s.ListRedemptionCodes(ctx, store.CodeFilter{BeforeID: list[1].ID})
	if err != nil || len(rest) != 1 || rest[0].Code != "OFF" || rest[0].Status != store.CodeDisabled {
		t.Fatalf("second page: %+v, %v", rest, err)
	}
}

func testListUsageKeysetPagesAndFilters(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	u := mustUser(t, s, "u", 1_000_000)
	other := mustUser(t, s, "o", 1_000_000)
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var logs []*store.UsageLog
	for i := range 25 {
		model := "a"
		if i%5 == 0 {
			model = "b"
		}
		// pairs of rows share a timestamp, so the id tie-break matters
		logs = append(logs, &store.UsageLog{UserID: u.ID, Model: model, Cost: int64(i + 1),
			CreatedAt: base.Add(time.Duration(i/2) * time.Hour)})
	}
	logs = append(logs, &store.UsageLog{UserID: other.ID, Model: "a", Cost: 1000, CreatedAt: base})
	if err := s.SettleBatch(ctx, logs); err != nil {
		t.Fatal(err)
	}
	var seen []int64
	f := store.UsageFilter{UserID: u.ID, Limit: 7}
	for {
		page, err := s.ListUsage(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range page {
			if l.UserID != u.ID {
				t.Fatalf("another user's row: %+v", l)
			}
			seen = append(seen, l.Cost)
		}
		if len(page) < f.Limit {
			break
		}
		last := page[len(page)-1]
		f.After = &store.UsageCursor{CreatedAt: last.CreatedAt, ID: last.ID}
	}
	if len(seen) != 25 {
		t.Fatalf("paged through %d rows, want 25: %v", len(seen), seen)
	}
	for i, c := range seen {
		if c != int64(25-i) {
			t.Fatalf("order: %v", seen)
		}
	}
	onlyB, err := s.ListUsage(ctx, store.UsageFilter{UserID: u.ID, Model: "b"})
	if err != nil || len(onlyB) != 5 {
		t.Fatalf("model filter: %d, %v", len(onlyB), err)
	}
	window, err := s.ListUsage(ctx, store.UsageFilter{UserID: u.ID, Since: base.Add(2 * time.Hour), Until: base.Add(4 * time.Hour)})
	if err != nil || len(window) != 4 {
		t.Fatalf("time filter: %d rows, %v", len(window), err)
	}
}

func testDailySpend(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	u := mustUser(t, s, "u", 1_000_000)
	day := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	batch := func(logs ...*store.UsageLog) {
		t.Helper()
		if err := s.SettleBatch(ctx, logs); err != nil {
			t.Fatal(err)
		}
	}
	batch(&store.UsageLog{UserID: u.ID, Cost: 10, CreatedAt: day.Add(time.Hour)},
		&store.UsageLog{UserID: u.ID, Cost: 5, CreatedAt: day.Add(23 * time.Hour)})
	batch(&store.UsageLog{UserID: u.ID, Cost: 7, CreatedAt: day.Add(25 * time.Hour)},
		&store.UsageLog{UserID: u.ID, Cost: 1, CreatedAt: day.Add(2 * time.Hour)})
	got, err := s.DailySpend(ctx, u.ID, day)
	if err != nil {
		t.Fatal(err)
	}
	want := []store.DailySpend{{Day: day, Cost: 16, Requests: 3}, {Day: day.AddDate(0, 0, 1), Cost: 7, Requests: 1}}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("daily spend = %+v, want %+v", got, want)
	}
	later, err := s.DailySpend(ctx, u.ID, day.AddDate(0, 0, 1))
	if err != nil || len(later) != 1 {
		t.Fatalf("since the second day: %+v, %v", later, err)
	}
}

func testTouchAndDeleteUserSessions(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	u := mustUser(t, s, "u", 0)
	for _, h := range []string{"h1", "h2"} {
		if err := s.CreateSession(ctx, &store.Session{IDHash: h, UserID: u.ID, ExpiresAt: time.Now().Add(time.Minute)}); err != nil {
			t.Fatal(err)
		}
	}
	later := ms(time.Now().Add(time.Hour))
	if err := s.TouchSession(ctx, "h1", later); err != nil {
		t.Fatal(err)
	}
	if got, err := s.SessionByHash(ctx, "h1"); err != nil || !got.ExpiresAt.Equal(later) {
		t.Fatalf("touched session: %+v, %v", got, err)
	}
	if err := s.TouchSession(ctx, "nope", later); !isNotFound(err) {
		t.Fatalf("touch missing: %v", err)
	}
	if err := s.DeleteUserSessions(ctx, u.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SessionByHash(ctx, "h2"); !isNotFound(err) {
		t.Fatalf("session survived: %v", err)
	}
}
