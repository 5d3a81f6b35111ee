package billing

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/store"
	"github.com/caddy-model-gateway/gateway/store/sqlite"
)

// fakeClock is the one clock a test's Spend and admissions read.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func mustHold(t *testing.T, s *Spend, now time.Time, loc *time.Location, b []Budget, amount int64) *WindowHold {
	t.Helper()
	h, err := s.Hold(context.Background(), now, loc, b, amount)
	if err != nil {
		t.Fatalf("hold %d at %s: %v", amount, now, err)
	}
	return h
}

func refusal(t *testing.T, s *Spend, now time.Time, loc *time.Location, b []Budget, amount int64) *WindowRefusal {
	t.Helper()
	_, err := s.Hold(context.Background(), now, loc, b, amount)
	var r *WindowRefusal
	if !errors.As(err, &r) {
		t.Fatalf("hold %d at %s: %v, want a window refusal", amount, now, err)
	}
	return r
}

// The rolling window frees spend five hours after the 5-minute bucket it
// settled in, and says so; nothing sleeps.
func TestRollingWindowRollsOver(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 11, 26, 10, 2, 30, 0, time.UTC)}
	s := &Spend{Clock: clock.Now}
	b := []Budget{{Subject: "key:1", Limits: WindowLimits{Rolling5h: 1000}}}
	mustHold(t, s, clock.Now(), time.UTC, b, 600).settle(600) // in the 10:00 bucket
	clock.Add(time.Hour)
	mustHold(t, s, clock.Now(), time.UTC, b, 300).settle(300) // in the 11:00 bucket

	r := refusal(t, s, clock.Now(), time.UTC, b, 200)
	if r.Window != Rolling5h || r.Used != 900 || r.Limit != 1000 {
		t.Fatalf("refusal %+v", r)
	}
	// 100 more is needed: the 10:00 bucket's 600 frees it, at 15:00
	if want := time.Date(2026, 11, 26, 15, 0, 0, 0, time.UTC); !r.Reset.Equal(want) || r.RetryAfter != want.Sub(clock.Now()) {
		t.Fatalf("reset %s in %s, want %s", r.Reset, r.RetryAfter, want)
	}
	clock.t = r.Reset.Add(-time.Second)
	refusal(t, s, clock.Now(), time.UTC, b, 200)
	clock.t = r.Reset
	h := mustHold(t, s, clock.Now(), time.UTC, b, 200)
	if h.Remaining != 1000-300-200 {
		t.Fatalf("remaining %d after the roll", h.Remaining)
	}
	// asking more than the 11:00 bucket can free waits for it too
	r = refusal(t, s, clock.Now(), time.UTC, b, 800)
	if want := time.Date(2026, 11, 26, 16, 0, 0, 0, time.UTC); !r.Reset.Equal(want) {
		t.Fatalf("reset %s, want %s", r.Reset, want)
	}
	h.settle(0)
}

// Calendar windows reset at midnight, Monday and the 1st in the budgets'
// zone; the lifetime window never does.
func TestCalendarWindowsInTheirZone(t *testing.T) {
	sh, err := time.LoadLocation("Asia/Shanghai")
	if err != nil {
		t.Fatal(err)
	}
	// Thursday 26 November 2026, 23:30 in Shanghai
	clock := &fakeClock{t: time.Date(2026, 11, 26, 15, 30, 0, 0, time.UTC)}
	s := &Spend{Clock: clock.Now}
	cases := []struct {
		kind  WindowKind
		reset time.Time
	}{
		{Daily, time.Date(2026, 11, 27, 0, 0, 0, 0, sh)},
		{Weekly, time.Date(2026, 11, 30, 0, 0, 0, 0, sh)},
		{Monthly, time.Date(2026, 12, 1, 0, 0, 0, 0, sh)},
		{Lifetime, time.Time{}},
	}
	for _, c := range cases {
		t.Run(c.kind.String(), func(t *testing.T) {
			var lim WindowLimits
			lim[c.kind] = 500
			b := []Budget{{Subject: "user:" + c.kind.String(), Limits: lim}}
			now := clock.Now()
			mustHold(t, s, now, sh, b, 500).settle(400)
			r := refusal(t, s, now, sh, b, 101)
			if !r.Reset.Equal(c.reset) {
				t.Fatalf("reset %s, want %s", r.Reset, c.reset)
			}
			if c.kind == Lifetime {
				if r.RetryAfter != 0 {
					t.Fatalf("lifetime retry after %s", r.RetryAfter)
				}
				refusal(t, s, now.AddDate(5, 0, 0), sh, b, 101)
				return
			}
			refusal(t, s, c.reset.Add(-time.Nanosecond), sh, b, 101)
			h := mustHold(t, s, c.reset, sh, b, 500)
			h.settle(0)
		})
	}
}

// Concurrent holds never reserve past a limit, and every hold that fit
// is settled into the window: spend = the costs settled.
func TestWindowHoldsConcurrently(t *testing.T) {
	s := &Spend{}
	now := time.Now()
	b := []Budget{{Subject: "user:1", Limits: WindowLimits{Daily: 10_000}}, {Subject: "group:g", Limits: WindowLimits{Rolling5h: 7_000}}}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var held []*WindowHold
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if h, err := s.Hold(context.Background(), now, time.UTC, b, 250); err == nil {
				mu.Lock()
				held = append(held, h)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(held) != 7000/250 {
		t.Fatalf("%d holds of 250 fit a 7000 window", len(held))
	}
	for _, h := range held {
		h.settle(200)
	}
	st, err := s.Status(context.Background(), now, time.UTC, b)
	if err != nil || len(st) != 2 || st[0].Spent != 200*28 || st[1].Spent != 200*28 {
		t.Fatalf("status %+v, %v", st, err)
	}
}

// A subject first met reads what the store committed, and the usage rows
// that carry a hold's window ids commit its spend: a new process (a new
// Spend) starts where the last one left off.
func TestWindowSpendSurvivesARestart(t *testing.T) {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "gw.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	u := &store.User{Username: "w", Quota: 1_000_000}
	if err := st.CreateUser(ctx, u); err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{t: time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)}
	b := []Budget{{Subject: "user:" + strconv.FormatInt(u.ID, 10), Limits: WindowLimits{Rolling5h: 1000, Daily: 5000}}}
	first := &Spend{Load: st.WindowSpend, Clock: clock.Now}
	h := mustHold(t, first, clock.Now(), time.UTC, b, 700)
	h.settle(700)
	subj := b[0].Subject
	if got, want := h.WindowIDs(), subj+"/5h@1795683600,"+subj+"/daily@2026-11-26"; got != want {
		t.Fatalf("window ids %q, want %q", got, want)
	}
	if got := Period(Weekly, clock.Now(), time.UTC) + " " + Period(Monthly, clock.Now(), time.UTC) + " " + Period(Lifetime, clock.Now(), time.UTC); got != "weekly@2026-11-23 monthly@2026-11 lifetime" {
		t.Fatalf("periods %q", got)
	}
	if err := st.SettleBatch(ctx, []*store.UsageLog{{Key: "r1", UserID: u.ID, Cost: 700, Windows: h.WindowIDs()}}); err != nil {
		t.Fatal(err)
	}
	clock.Add(time.Hour)
	second := &Spend{Load: st.WindowSpend, Clock: clock.Now}
	r := refusal(t, second, clock.Now(), time.UTC, b, 400)
	if r.Window != Rolling5h || r.Used != 700 {
		t.Fatalf("after a restart: %+v", r)
	}
	clock.Add(4 * time.Hour)
	st2, _ := second.Status(ctx, clock.Now(), time.UTC, b)
	if st2[0].Spent != 0 || st2[1].Spent != 700 {
		t.Fatalf("five hours on: %+v", st2)
	}
}

// Two instances on one store see each other's committed spend at their
// next refresh, and never count their own twice.
func TestWindowSpendAcrossInstances(t *testing.T) {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "gw.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	clock := &fakeClock{t: time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)}
	b := []Budget{{Subject: "key:9", Limits: WindowLimits{Daily: 1000}}}
	a := &Spend{Load: st.WindowSpend, Clock: clock.Now, Refresh: 30 * time.Second}
	other := &Spend{Load: st.WindowSpend, Clock: clock.Now, Refresh: 30 * time.Second}
	commit := func(key string, h *WindowHold, cost int64) {
		h.settle(cost)
		if err := st.SettleBatch(ctx, []*store.UsageLog{{Key: key, UserID: 1, Cost: cost, Windows: h.WindowIDs()}}); err != nil {
			t.Fatal(err)
		}
	}
	commit("a1", mustHold(t, a, clock.Now(), time.UTC, b, 300), 300)
	commit("b1", mustHold(t, other, clock.Now(), time.UTC, b, 400), 400) // other read a's 300 when it met key 9
	// a has not refreshed: it sees its own 300 only
	mustHold(t, a, clock.Now(), time.UTC, b, 700).settle(0)
	clock.Add(30 * time.Second)
	r := refusal(t, a, clock.Now(), time.UTC, b, 301)
	if r.Used != 700 {
		t.Fatalf("after a refresh a sees %d used, want 700", r.Used)
	}
	mustHold(t, a, clock.Now(), time.UTC, b, 300).settle(0)
}

// With claims, instances on one store admit in sum no more than a window
// holds, whatever each one's view, and room one does not use goes back for
// the others at its refresh.
func TestWindowClaimsAcrossInstances(t *testing.T) {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "gw.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	clock := &fakeClock{t: time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)}
	b := []Budget{{Subject: "user:5", Limits: WindowLimits{Daily: 1000, Rolling5h: 900}}}
	var spends []*Spend
	for range 3 {
		spends = append(spends, &Spend{Load: st.WindowSpend, Claims: st, Clock: clock.Now, Refresh: time.Minute})
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	settled := int64(0)
	for i := range 30 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h, err := spends[i%3].Hold(context.Background(), clock.Now(), time.UTC, b, 100)
			var r *WindowRefusal
			if errors.As(err, &r) {
				return
			}
			if err != nil {
				t.Error(err)
				return
			}
			h.settle(100)
			mu.Lock()
			settled += 100
			mu.Unlock()
		}()
	}
	wg.Wait()
	if settled > 900 {
		t.Fatalf("three instances settled %d in a 900 window", settled)
	}
	// a refresh gives back what an instance holds unused: another can
	// then take the rest of the window
	clock.Add(time.Minute)
	for _, s := range spends {
		if _, err := s.Status(context.Background(), clock.Now(), time.UTC, b); err != nil {
			t.Fatal(err)
		}
	}
	for settled < 900 {
		h, err := spends[0].Hold(context.Background(), clock.Now(), time.UTC, b, 100)
		if err != nil {
			t.Fatalf("with %d settled of 900: %v", settled, err)
		}
		h.settle(100)
		settled += 100
	}
	if _, err := spends[2].Hold(context.Background(), clock.Now(), time.UTC, b, 100); err == nil {
		t.Fatal("a fourth instance's view admitted past the window")
	}
}

// Claimed room given back in the rolling window goes back to the bucket
// it was claimed in, so that when that bucket rolls out the window does
// not gain room it never had.
func TestRollingClaimsRollOut(t *testing.T) {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "gw.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	clock := &fakeClock{t: time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)}
	b := []Budget{{Subject: "key:8", Limits: WindowLimits{Rolling5h: 1000}}}
	a := &Spend{Load: st.WindowSpend, Claims: st, Clock: clock.Now, Refresh: time.Minute}
	other := &Spend{Load: st.WindowSpend, Claims: st, Clock: clock.Now, Refresh: time.Minute}
	ctx := context.Background()
	mustHold(t, a, clock.Now(), time.UTC, b, 100).settle(100) // claims 250 at 9:00
	clock.Add(time.Hour)
	if _, err := a.Status(ctx, clock.Now(), time.UTC, b); err != nil { // a refresh: 150 back to 9:00
		t.Fatal(err)
	}
	mustHold(t, other, clock.Now(), time.UTC, b, 900).settle(900) // the rest, at 10:00
	refusal(t, a, clock.Now(), time.UTC, b, 1)
	// 9:00 rolls out at 14:00: the window holds other's 900 only
	clock.t = time.Date(2026, 11, 26, 14, 0, 0, 0, time.UTC)
	refusal(t, a, clock.Now(), time.UTC, b, 200)
	mustHold(t, a, clock.Now(), time.UTC, b, 100).settle(100)
}

// A plan pays while its windows have room (the balance untouched), then
// the balance pays when the plan says so; a plan without "then balance"
// refuses instead, and refuses models it does not cover.
func TestPlanFirstThenBalance(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC)}
	for _, then := range []bool{true, false} {
		t.Run("then balance "+strconv.FormatBool(then), func(t *testing.T) {
			b, err := (&BudgetConfig{
				ModelGroups: map[string][]string{"coding": {"claude-*"}},
				Plans:       map[string]*PlanConfig{"pro": {Windows: map[string]string{"5h": "0.001"}, Models: []string{"group:coding"}, ThenBalance: then, RPM: 100}},
				Groups:      map[string]*GroupConfig{"team": {Plan: "pro"}},
			}).Build(&Spend{Clock: clock.Now}, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			g := &Gate{Limiter: NewLimiter(), Ledger: NewLedger(), Usage: &fakeQueue{}, Budgets: b}
			u, tok := &store.User{ID: 1, Quota: 5000}, &store.Token{ID: 2}
			b.users = map[int64]*userBudget{1: {b: store.UserBudget{Group: "team"}, loaded: clock.Now()}}
			b.keys = map[int64]*keyBudget{2: {loaded: clock.Now()}}
			ad, err := g.Admit(clock.Now(), Ask{User: u, Token: tok, Model: "claude-sonnet", Reserve: Reserve(800)})
			if err != nil || !ad.Hold.Windows.PlanPaid() || ad.Hold.Amount != 0 {
				t.Fatalf("within the plan: %+v, %v", ad, err)
			}
			g.Settle(clock.Now(), ad, 10, 800)
			if avail, _ := g.Ledger.Available(1); avail != 5000 {
				t.Fatalf("the plan paid, yet the balance is %d", avail)
			}
			ad, err = g.Admit(clock.Now(), Ask{User: u, Token: tok, Model: "claude-sonnet", Reserve: Reserve(300)})
			if then {
				if err != nil || ad.Hold.Windows.PlanPaid() || ad.Hold.Amount != 300 {
					t.Fatalf("the plan full, the balance pays: %+v, %v", ad, err)
				}
				g.Settle(clock.Now(), ad, 10, 300)
				if avail, _ := g.Ledger.Available(1); avail != 4700 {
					t.Fatalf("balance %d after paying 300", avail)
				}
				return
			}
			var r *WindowRefusal
			if !errors.As(err, &r) || r.Subject != "plan:pro/user:1" {
				t.Fatalf("the plan full, no balance: %v", err)
			}
			_, err = g.Admit(clock.Now(), Ask{User: u, Token: tok, Model: "gpt-4o", Reserve: Reserve(1)})
			var pm *PlanModelError
			if !errors.As(err, &pm) {
				t.Fatalf("a model outside the plan: %v", err)
			}
		})
	}
}

// Model groups match by glob; a list naming an undefined group is an
// error at load.
func TestModelGroups(t *testing.T) {
	g := ModelGroups{"coding": {"claude-*", "gpt-5*"}}
	for model, want := range map[string]bool{"claude-sonnet-4": true, "gpt-5-codex": true, "gpt-4o": false} {
		if got := g.Allows([]string{"group:coding"}, model); got != want {
			t.Errorf("%s in group:coding = %v", model, got)
		}
	}
	if !g.Allows([]string{"gpt-4o", "group:coding"}, "gpt-4o") || !g.Allows(nil, "anything") {
		t.Error("plain names and empty lists")
	}
	if err := g.Check([]string{"group:nope"}); err == nil {
		t.Error("an undefined group passed")
	}
	if _, err := (&BudgetConfig{Plans: map[string]*PlanConfig{"p": {Models: []string{"group:nope"}}}}).Build(&Spend{}, nil, 0); err == nil {
		t.Error("a plan naming an undefined group built")
	}
	if _, err := (&BudgetConfig{Timezone: "Mars/Olympus"}).Build(&Spend{}, nil, 0); err == nil {
		t.Error("an unknown zone built")
	}
}

// BenchmarkWindowHold is the cost the windows add to one admission: a
// hold and its settlement against a key's, a user's and a group's windows
// (a profile from cache, every window set).
func BenchmarkWindowHold(b *testing.B) {
	all := WindowLimits{1 << 50, 1 << 50, 1 << 50, 1 << 50, 1 << 50}
	budgets := &Budgets{Spend: &Spend{}, Models: ModelGroups{}, Groups: map[string]*UserGroup{"g": {Windows: all}},
		users: map[int64]*userBudget{1: {own: all, b: store.UserBudget{Group: "g"}, loaded: time.Now()}},
		keys:  map[int64]*keyBudget{2: {own: all, loaded: time.Now()}}, TTL: time.Hour}
	u, tok := &store.User{ID: 1}, &store.Token{ID: 2}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		now := time.Now()
		p, err := budgets.Profile(ctx, now, u, tok)
		if err != nil {
			b.Fatal(err)
		}
		h, err := budgets.Hold(ctx, now, p, "m", 100, false)
		if err != nil {
			b.Fatal(err)
		}
		h.settle(1)
	}
}

// roomyClaims grants every claim in full: the benchmark's store.
type roomyClaims struct{}

func (roomyClaims) ClaimWindow(_ context.Context, _ string, _ []string, _, want, _ int64) (int64, error) {
	return want, nil
}
func (roomyClaims) ReturnWindow(context.Context, string, int64) error { return nil }

// BenchmarkWindowHoldClaimed is BenchmarkWindowHold with claims (the
// cross-instance mode every gateway runs), within claimed room.
func BenchmarkWindowHoldClaimed(b *testing.B) {
	all := WindowLimits{1 << 50, 1 << 50, 1 << 50, 1 << 50, 1 << 50}
	budgets := &Budgets{Spend: &Spend{Claims: roomyClaims{}}, Models: ModelGroups{}, Groups: map[string]*UserGroup{"g": {Windows: all}},
		users: map[int64]*userBudget{1: {own: all, b: store.UserBudget{Group: "g"}, loaded: time.Now()}},
		keys:  map[int64]*keyBudget{2: {own: all, loaded: time.Now()}}, TTL: time.Hour}
	u, tok := &store.User{ID: 1}, &store.Token{ID: 2}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		now := time.Now()
		p, err := budgets.Profile(ctx, now, u, tok)
		if err != nil {
			b.Fatal(err)
		}
		h, err := budgets.Hold(ctx, now, p, "m", 100, false)
		if err != nil {
			b.Fatal(err)
		}
		h.settle(1)
	}
}

// A task's reservation counts in its windows at the time it is stored,
// under the ids the store keeps with it; when it settles for less, the
// difference comes out of those windows again, the balance untouched when
// a plan paid, and what the period no longer holds is left alone.
func TestTaskReservationInWindows(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 11, 26, 9, 2, 0, 0, time.UTC)}
	b, err := (&BudgetConfig{
		Plans:  map[string]*PlanConfig{"pro": {Windows: map[string]string{"weekly": "0.001", "5h": "0.001"}}},
		Groups: map[string]*GroupConfig{"team": {Plan: "pro"}},
	}).Build(&Spend{Clock: clock.Now}, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	g := &Gate{Limiter: NewLimiter(), Ledger: NewLedger(), Usage: &fakeQueue{}, Budgets: b}
	u, tok := &store.User{ID: 1, Quota: 5000}, &store.Token{ID: 2}
	b.users = map[int64]*userBudget{1: {own: WindowLimits{Daily: 2000}, b: store.UserBudget{Group: "team"}, loaded: clock.Now()}}
	b.keys = map[int64]*keyBudget{2: {loaded: clock.Now()}}
	ad, err := g.Admit(clock.Now(), Ask{User: u, Token: tok, Model: "sora-2", Reserve: Reserve(800)})
	if err != nil || ad.Hold.Windows.PaidBy() != "pro" {
		t.Fatalf("admit: %+v, %v", ad, err)
	}
	stored := clock.Now()
	ids := ad.Hold.Windows.IDsAt(stored)
	want := "user:1/daily@2026-11-26,plan:pro/user:1/5h@1795683600,plan:pro/user:1/weekly@2026-11-23"
	if ids != want {
		t.Fatalf("ids %q, want %q", ids, want)
	}
	clock.Add(time.Minute) // the ids are stored's, whenever the debit runs
	g.Ledger.Debited(ad.Hold, stored)
	if got := ad.Hold.Windows.WindowIDs(); got != ids {
		t.Fatalf("settled ids %q, want %q", got, ids)
	}
	used := func() map[string]int64 {
		st, err := b.Status(context.Background(), clock.Now(), mustProfile(t, b, clock.Now(), u, tok))
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]int64{}
		for _, w := range st {
			m[w.Subject+"/"+w.Window] = w.Spent
		}
		return m
	}
	if got := used(); got["plan:pro/user:1/weekly"] != 800 || got["plan:pro/user:1/5h"] != 800 || got["user:1/daily"] != 800 {
		t.Fatalf("while the task runs: %v", got)
	}
	g.TaskSettled(u.ID, tok.ID, "pro", ids, 800-300)
	if got := used(); got["plan:pro/user:1/weekly"] != 300 || got["plan:pro/user:1/5h"] != 300 || got["user:1/daily"] != 300 {
		t.Fatalf("settled at 300: %v", got)
	}
	if avail, _ := g.Ledger.Available(1); avail != 5000 {
		t.Fatalf("the plan paid, yet the balance is %d", avail)
	}
	// a refund for a day gone by leaves today's spend alone
	g.TaskSettled(u.ID, tok.ID, "pro", "user:1/daily@2026-11-25,user:9/daily@2026-11-26,nonsense", 100)
	if got := used(); got["user:1/daily"] != 300 {
		t.Fatalf("a refund of another period: %v", got)
	}
	for _, id := range []string{"5h@1795683600", "daily@2026-11-26", "weekly@2026-11-23", "monthly@2026-11", "lifetime"} {
		if p, ok := parsePeriod(id); !ok || p.String() != id {
			t.Fatalf("parsePeriod(%q) = %v %v", id, p, ok)
		}
	}
	for _, id := range []string{"", "5h", "daily@2026-13-01", "hourly@1", "lifetime@0", "5h@x"} {
		if _, ok := parsePeriod(id); ok {
			t.Fatalf("parsePeriod(%q) accepted", id)
		}
	}
}

func mustProfile(t *testing.T, b *Budgets, now time.Time, u *store.User, tok *store.Token) *Profile {
	t.Helper()
	p, err := b.Profile(context.Background(), now, u, tok)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
