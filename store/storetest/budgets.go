package storetest

import (
	"context"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/store"
)

// Budgets returns what SetBudget set, a limit of 0 removes it, and each
// subject keeps its own.
func testBudgetsRoundTrip(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	for _, b := range []struct {
		subject, window string
		limit           int64
	}{{"user:1", "daily", 5_000_000}, {"user:1", "5h", 1_000_000}, {"key:1", "lifetime", 9}, {"user:1", "daily", 7_000_000}} {
		if err := s.SetBudget(ctx, b.subject, b.window, b.limit); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.Budgets(ctx, []string{"user:1", "key:1", "user:2"})
	want := map[string]map[string]int64{"user:1": {"daily": 7_000_000, "5h": 1_000_000}, "key:1": {"lifetime": 9}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("budgets = %v, %v; want %v", got, err, want)
	}
	if err := s.SetBudget(ctx, "user:1", "5h", 0); err != nil {
		t.Fatal(err)
	}
	got, _ = s.Budgets(ctx, []string{"user:1"})
	if !reflect.DeepEqual(got, map[string]map[string]int64{"user:1": {"daily": 7_000_000}}) {
		t.Fatalf("after removing 5h: %v", got)
	}
}

// A user's group and plan are set apart and read together; a plan's end
// round-trips to the millisecond.
func testUserBudget(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	u := mustUser(t, s, "planned", 0)
	if b, err := s.UserBudget(ctx, u.ID); err != nil || b != (store.UserBudget{}) {
		t.Fatalf("unset = %+v, %v", b, err)
	}
	until := time.Date(2030, 1, 2, 3, 4, 5, 6_000_000, time.UTC)
	if err := s.SetUserPlan(ctx, u.ID, "pro", until); err != nil {
		t.Fatal(err)
	}
	if err := s.SetUserGroup(ctx, u.ID, "coding"); err != nil {
		t.Fatal(err)
	}
	b, err := s.UserBudget(ctx, u.ID)
	if err != nil || b.Group != "coding" || b.Plan != "pro" || !b.PlanUntil.Equal(until) {
		t.Fatalf("user budget = %+v, %v", b, err)
	}
	if err := s.SetUserPlan(ctx, u.ID, "", time.Time{}); err != nil {
		t.Fatal(err)
	}
	if b, _ := s.UserBudget(ctx, u.ID); b != (store.UserBudget{Group: "coding"}) {
		t.Fatalf("plan removed: %+v", b)
	}
}

// SettleBatch adds each new row's cost to every window id it carries, in
// the row's transaction, and a keyed row replayed adds nothing again.
func testSettleBatchWindowSpend(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	u := mustUser(t, s, "windowed", 10_000_000)
	rows := func() []*store.UsageLog {
		return []*store.UsageLog{
			{Key: "w1", UserID: u.ID, Cost: 300, Windows: "user:1/daily@2026-11-26,key:2/5h@1764115200"},
			{Key: "w2", UserID: u.ID, Cost: 200, Windows: "user:1/daily@2026-11-26"},
			{Key: "w3", UserID: u.ID, Cost: 0, Windows: "user:1/daily@2026-11-26"},
		}
	}
	for range 2 { // the second batch replays the first
		if err := s.SettleBatch(ctx, rows()); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.WindowSpend(ctx, []string{"user:1/daily@2026-11-26", "key:2/5h@1764115200", "user:1/lifetime"})
	want := map[string]int64{"user:1/daily@2026-11-26": 500, "key:2/5h@1764115200": 300}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("window spend = %v, %v; want %v", got, err, want)
	}
	logs, err := s.ListUsage(ctx, store.UsageFilter{UserID: u.ID})
	if err != nil || len(logs) != 3 {
		t.Fatalf("usage = %d rows, %v", len(logs), err)
	}
	for _, l := range logs {
		if l.Key == "w1" && l.Windows != "user:1/daily@2026-11-26,key:2/5h@1764115200" {
			t.Fatalf("row w1 windows = %q", l.Windows)
		}
	}
}

// A plan code grants its plan for its days instead of quota; a second
// code of the same plan, redeemed while it runs, adds its days on.
func testRedeemPlanCode(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	u := mustUser(t, s, "subscriber", 100)
	codes := []*store.RedemptionCode{{Code: "PLAN-30", Plan: "pro", PlanDays: 30}, {Code: "PLAN-10", Plan: "pro", PlanDays: 10}}
	if err := s.CreateRedemptionCodes(ctx, codes); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateRedemptionCodes(ctx, []*store.RedemptionCode{{Code: "BAD", Plan: "pro", Quota: 5, PlanDays: 1}}); err == nil {
		t.Fatal("a plan code with quota was stored")
	}
	before := time.Now()
	if got, err := s.Redeem(ctx, "PLAN-30", u.ID); err != nil || got != 0 {
		t.Fatalf("redeem = %d, %v", got, err)
	}
	b, err := s.UserBudget(ctx, u.ID)
	if err != nil || b.Plan != "pro" || b.PlanUntil.Before(before.AddDate(0, 0, 30).Add(-time.Second)) || b.PlanUntil.After(time.Now().AddDate(0, 0, 30)) {
		t.Fatalf("after 30 days' code: %+v, %v", b, err)
	}
	first := b.PlanUntil
	if _, err := s.Redeem(ctx, "PLAN-10", u.ID); err != nil {
		t.Fatal(err)
	}
	if b, _ = s.UserBudget(ctx, u.ID); !b.PlanUntil.Equal(first.AddDate(0, 0, 10)) {
		t.Fatalf("renewed until %s, want %s", b.PlanUntil, first.AddDate(0, 0, 10))
	}
	if got := mustGetUser(t, s, u.ID); got.Quota != 100 {
		t.Fatalf("a plan code credited quota: %d", got.Quota)
	}
	listed, err := s.ListRedemptionCodes(ctx, store.CodeFilter{})
	if err != nil || len(listed) != 2 || listed[0].Plan != "pro" || listed[0].PlanDays != 10 {
		t.Fatalf("listed %+v, %v", listed, err)
	}
}

// Concurrent claims on one window never grant more than its limit in sum,
// a claim smaller than least is none, and a return gives room back.
func testClaimWindow(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	ids := []string{"user:1/5h@100", "user:1/5h@400"}
	var mu sync.Mutex
	var sum int64
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			g, err := s.ClaimWindow(ctx, "user:1/5h", ids, 1000, 150, 100)
			if err != nil {
				t.Error(err)
				return
			}
			if g != 0 && g < 100 {
				t.Errorf("granted %d, under least 100", g)
			}
			mu.Lock()
			sum += g
			mu.Unlock()
		}()
	}
	wg.Wait()
	// six claims of 150, then one of the 100 left (least 100)
	if sum != 1000 {
		t.Fatalf("granted %d in sum of a 1000 window", sum)
	}
	if g, err := s.ClaimWindow(ctx, "user:1/5h", ids, 1000, 150, 1); err != nil || g != 1000-sum {
		t.Fatalf("the rest: %d, %v", g, err)
	}
	if err := s.ReturnWindow(ctx, ids[1], -300); err != nil {
		t.Fatal(err)
	}
	if g, err := s.ClaimWindow(ctx, "user:1/5h", ids, 1000, 500, 1); err != nil || g != 300 {
		t.Fatalf("after returning 300: %d, %v", g, err)
	}
	// once the claimed periods roll out of the window, theirs no longer count
	if g, err := s.ClaimWindow(ctx, "user:1/5h", []string{"user:1/5h@700"}, 1000, 2000, 1); err != nil || g != 1000 {
		t.Fatalf("in a window of new periods: %d, %v", g, err)
	}
}

// A task's reservation counts in its windows from CreateTask, and the
// part it did not cost comes back at FinishTask, whose row carries the
// windows and the plan. A plan-paid task takes nothing from the balances;
// a balance-paid one takes its cost, as before windows.
func testTaskWindowsAndPlan(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	u := mustUser(t, s, "subscriber", 1_000_000)
	tok := mustToken(t, s, u.ID, "hash-subscriber")
	planIDs := "plan:pro/user:1/weekly@2026-11-23,user:1/daily@2026-11-26"
	balanceIDs := "user:1/daily@2026-11-26"
	spend := func(want map[string]int64) {
		t.Helper()
		got, err := s.WindowSpend(ctx, []string{"plan:pro/user:1/weekly@2026-11-23", "user:1/daily@2026-11-26"})
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("window spend = %v, %v; want %v", got, err, want)
		}
	}
	balances := func(quota, tokenUsed int64) {
		t.Helper()
		if got := mustGetUser(t, s, u.ID); got.Quota != quota {
			t.Fatalf("user quota %d, want %d", got.Quota, quota)
		}
		if got, _ := s.TokenByID(ctx, tok.ID); got.UsedQuota != tokenUsed {
			t.Fatalf("token used %d, want %d", got.UsedQuota, tokenUsed)
		}
	}
	paid := &store.Task{ID: "task_plan", UserID: u.ID, TokenID: tok.ID, Model: "sora-2", Reserved: 400_000,
		Windows: planIDs, Plan: "pro"}
	if err := s.CreateTask(ctx, paid); err != nil {
		t.Fatal(err)
	}
	byBalance := &store.Task{ID: "task_balance", UserID: u.ID, TokenID: tok.ID, Model: "sora-2", Reserved: 300_000,
		Windows: balanceIDs}
	if err := s.CreateTask(ctx, byBalance); err != nil {
		t.Fatal(err)
	}
	spend(map[string]int64{"plan:pro/user:1/weekly@2026-11-23": 400_000, "user:1/daily@2026-11-26": 700_000})
	balances(700_000, 300_000) // the plan's task reserved nothing from them
	if got, _ := s.TaskByID(ctx, "task_plan"); got.Windows != planIDs || got.Plan != "pro" {
		t.Fatalf("stored task: windows %q plan %q", got.Windows, got.Plan)
	}

	fin := *paid
	fin.Status, fin.Cost = "finished", 250_000
	row := &store.UsageLog{Model: "sora-2", Endpoint: "/api/generate/submit", Status: 200}
	if ok, err := s.FinishTask(ctx, &fin, row); err != nil || !ok {
		t.Fatalf("finish: %v %v", ok, err)
	}
	if fin.Plan != "pro" || fin.Windows != planIDs || row.Plan != "pro" || row.Windows != planIDs {
		t.Fatalf("finished: task %q %q, row %q %q", fin.Plan, fin.Windows, row.Plan, row.Windows)
	}
	spend(map[string]int64{"plan:pro/user:1/weekly@2026-11-23": 250_000, "user:1/daily@2026-11-26": 550_000})
	balances(700_000, 300_000)

	fin = *byBalance
	fin.Status, fin.Cost = "failed", 0
	if ok, err := s.FinishTask(ctx, &fin, &store.UsageLog{Model: "sora-2", Endpoint: "/api/generate/submit", Status: 502}); err != nil || !ok {
		t.Fatalf("finish: %v %v", ok, err)
	}
	spend(map[string]int64{"plan:pro/user:1/weekly@2026-11-23": 250_000, "user:1/daily@2026-11-26": 250_000})
	balances(1_000_000, 0)
	if got := mustGetUser(t, s, u.ID); got.UsedQuota != 0 || got.RequestCount != 2 {
		t.Fatalf("user used %d requests %d", got.UsedQuota, got.RequestCount)
	}
	logs, err := s.ListUsage(ctx, store.UsageFilter{UserID: u.ID})
	if err != nil || len(logs) != 2 {
		t.Fatalf("usage = %+v, %v", logs, err)
	}
	for _, l := range logs {
		if l.Key == "task:task_plan" && (l.Plan != "pro" || l.Windows != planIDs || l.Cost != 250_000) {
			t.Fatalf("plan task's row %+v", l)
		}
	}
}
