package storetest

import (
	"context"
	"math"
	"testing"

	"github.com/caddy-model-gateway/gateway/store"
)

// A batch replayed (a journal applied twice) writes and charges each keyed
// row once, even inside one batch.
func testSettleBatchKeyedRowsOnce(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	u := mustUser(t, s, "kay", 1000)
	tok := mustToken(t, s, u.ID, "k1")
	row := func(key string) *store.UsageLog {
		return &store.UsageLog{Key: key, UserID: u.ID, TokenID: tok.ID, Cost: 10, Status: 200}
	}
	if err := s.SettleBatch(ctx, []*store.UsageLog{row("a"), row("b")}); err != nil {
		t.Fatal(err)
	}
	again := []*store.UsageLog{row("a"), row("b"), row("c"), row("c"), row("")}
	if err := s.SettleBatch(ctx, again); err != nil {
		t.Fatal(err)
	}
	if again[0].ID != 0 || again[1].ID != 0 || again[2].ID == 0 || again[3].ID != 0 || again[4].ID == 0 {
		t.Fatalf("ids %d %d %d %d %d: only new rows get one", again[0].ID, again[1].ID, again[2].ID, again[3].ID, again[4].ID)
	}
	if n, _ := s.CountUsage(ctx); n != 4 {
		t.Fatalf("%d rows, want 4", n)
	}
	got := mustGetUser(t, s, u.ID)
	if got.Quota != 1000-40 || got.UsedQuota != 40 || got.RequestCount != 4 {
		t.Fatalf("user = %+v", got)
	}
	// all keyed and distinct, one of them stored already
	third := []*store.UsageLog{row("d"), row("a"), row("e")}
	if err := s.SettleBatch(ctx, third); err != nil {
		t.Fatal(err)
	}
	if third[0].ID == 0 || third[1].ID != 0 || third[2].ID == 0 || third[2].ID == third[0].ID {
		t.Fatalf("ids %d %d %d: the stored key gets none, the new ones their own", third[0].ID, third[1].ID, third[2].ID)
	}
	if n, _ := s.CountUsage(ctx); n != 6 {
		t.Fatalf("%d rows, want 6", n)
	}
	got = mustGetUser(t, s, u.ID)
	if got.Quota != 1000-60 || got.UsedQuota != 60 || got.RequestCount != 6 {
		t.Fatalf("user = %+v", got)
	}
	logs, _ := s.ListUsage(ctx, store.UsageFilter{UserID: u.ID})
	if logs[len(logs)-1].Key != "a" {
		t.Fatalf("keys are not read back: %+v", logs[len(logs)-1])
	}
}

// No charge or credit turns a balance into a REAL or wraps it around: the
// user stays readable into an int64.
func testQuotaArithmeticNeverOverflows(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	u := mustUser(t, s, "max", math.MaxInt64-5)
	if err := s.AddQuota(ctx, u.ID, 10); err == nil {
		t.Fatal("a credit past the int64 maximum was taken")
	}
	if got := mustGetUser(t, s, u.ID); got.Quota != math.MaxInt64-5 {
		t.Fatalf("quota = %d", got.Quota)
	}
	poor := mustUser(t, s, "min", 0)
	big := int64(math.MaxInt64 / 2)
	rows := []*store.UsageLog{{UserID: poor.ID, Cost: big}, {UserID: poor.ID, Cost: big}, {UserID: poor.ID, Cost: big}}
	if err := s.SettleBatch(ctx, rows); err != nil {
		t.Fatal(err)
	}
	if err := s.SettleBatch(ctx, []*store.UsageLog{{UserID: poor.ID, Cost: math.MaxInt64}}); err != nil {
		t.Fatal(err)
	}
	got := mustGetUser(t, s, poor.ID)
	if got.Quota != math.MinInt64 || got.UsedQuota != math.MaxInt64 {
		t.Fatalf("saturated user = %+v", got)
	}
}

func testLimitsRoundTrip(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	u := mustUser(t, s, "lim", 0)
	tok := mustToken(t, s, u.ID, "l1")
	if err := s.SetUserLimits(ctx, u.ID, store.Limits{RPM: 1, TPM: 2, MaxParallel: 3}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetTokenLimits(ctx, tok.ID, store.Limits{RPM: 4}); err != nil {
		t.Fatal(err)
	}
	if got := mustGetUser(t, s, u.ID); got.Limits != (store.Limits{RPM: 1, TPM: 2, MaxParallel: 3}) {
		t.Fatalf("user limits %+v", got.Limits)
	}
	gt, _ := s.TokenByID(ctx, tok.ID)
	if gt.Limits != (store.Limits{RPM: 4}) {
		t.Fatalf("token limits %+v", gt.Limits)
	}
}
