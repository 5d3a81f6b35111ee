package billing

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/store"
)

func ptr(v int64) *int64 { return &v }

// gemini25Pro is Gemini 2.5 Pro's price: USD 1.25 / 10 per million up to
// 200k prompt tokens, 2.50 / 15 above, cached reads at a tenth.
func gemini25Pro() *Price {
	return &Price{Input: 1_250_000, Output: 10_000_000, CachedInput: ptr(125_000),
		Tiers: []PriceTier{{Above: 200_000, Input: 2_500_000, Output: 15_000_000, CachedInput: ptr(250_000)}}}
}

// A prompt of exactly the threshold is billed at the base prices, one
// token more at the tier's, the whole request (not only the tokens past
// the threshold).
func TestTierAtTheBoundary(t *testing.T) {
	p := gemini25Pro()
	tests := []struct {
		name      string
		u         adapters.Usage
		want, tie int64
	}{
		// 200000*1.25 + 1000*10 = 250000 + 10000
		{"at the threshold", adapters.Usage{PromptTokens: 200_000, CompletionTokens: 1000}, 260_000, 0},
		// 200001*2.5 + 1000*15 = 500002.5 + 15000 -> 515003
		{"one past", adapters.Usage{PromptTokens: 200_001, CompletionTokens: 1000}, 515_003, 200_000},
		// 250000: 50000 cached at 0.25, 200000 at 2.5, 2000 out at 15
		{"cached in the tier", adapters.Usage{PromptTokens: 250_000, CachedTokens: 50_000, CompletionTokens: 2000}, 12_500 + 500_000 + 30_000, 200_000},
		{"short prompt", adapters.Usage{PromptTokens: 10, CompletionTokens: 10}, 113, 0},
	}
	for _, tt := range tests {
		if got := p.Cost(tt.u); got != tt.want {
			t.Errorf("%s: cost %d, want %d", tt.name, got, tt.want)
		}
		if got := p.TierAbove(tt.u.PromptTokens); got != tt.tie {
			t.Errorf("%s: tier %d, want %d", tt.name, got, tt.tie)
		}
	}
	// several tiers: the highest one the prompt passed
	p.Tiers = append(p.Tiers, PriceTier{Above: 1_000_000, Input: 5_000_000, Output: 20_000_000})
	if got := p.TierAbove(1_000_001); got != 1_000_000 {
		t.Errorf("third tier: %d", got)
	}
	if got := p.Cost(adapters.Usage{PromptTokens: 1_000_001}); got != 5_000_005 {
		t.Errorf("third tier's cost %d", got)
	}
	// a tier without cache prices reads cached tokens at its input price
	q := &Price{Input: 1_000_000, Output: 1_000_000, CachedInput: ptr(100_000), Tiers: []PriceTier{{Above: 10, Input: 2_000_000, Output: 2_000_000}}}
	if got := q.Cost(adapters.Usage{PromptTokens: 20, CachedTokens: 20}); got != 40 {
		t.Errorf("tier without a cache price: %d, want 40", got)
	}
}

// The reservation takes the tier the request could reach: a prompt
// estimated below the threshold whose body could hold more is reserved
// at the tier's prices, and its allowance is what those prices afford.
func TestTierReservation(t *testing.T) {
	p := gemini25Pro()
	// an estimate of 150k prompt tokens, 1000 out
	base := p.Reservation(150_000, 1000)
	if base != 150_000*125/100+10_000 {
		t.Fatalf("base reservation %d", base)
	}
	at := p.At(600_000) // what a 600 kB body could hold
	if got := at.Reservation(150_000, 1000); got != 375_000+15_000 {
		t.Errorf("reservation at the reachable tier %d, want %d", got, 375_000+15_000)
	}
	if at.Tiers != nil || p.Tiers == nil {
		t.Error("At must copy, without tiers")
	}
	// the allowance: (budget - prompt cost) / output price, at the tier
	avail := int64(375_000 + 15_000)
	if got := at.Affordable(150_000, 100_000, 1, avail); got != 1000 {
		t.Errorf("affordable at the tier %d, want 1000", got)
	}
	// Affordable on the tiered price itself takes the prompt's own tier
	if got := p.Affordable(250_000, 100_000, 1, 625_000+15_000); got != 1000 {
		t.Errorf("affordable of a 250k prompt %d, want 1000", got)
	}
}

// Cache writes that live an hour cost cache_write_1h; five-minute ones
// cache_write; without cache_write_1h they cost cache_write too.
func TestOneHourCacheWrites(t *testing.T) {
	// Claude Sonnet: 3 in, 15 out, 3.75 a 5m write, 6 a 1h write, 0.30 a read
	p := &Price{Input: 3_000_000, Output: 15_000_000, CachedInput: ptr(300_000), CacheWrite: ptr(3_750_000), CacheWrite1h: ptr(6_000_000)}
	u := adapters.Usage{PromptTokens: 10_000, CacheWriteTokens: 6000, CacheWrite1hTokens: 4000, CachedTokens: 1000, CompletionTokens: 100}
	// 3000*3 + 2000*3.75 + 4000*6 + 1000*0.3 + 100*15 = 9000+7500+24000+300+1500
	if got := p.Cost(u); got != 42_300 {
		t.Errorf("cost %d, want 42300", got)
	}
	p.CacheWrite1h = nil
	// the 4000 at 3.75: 9000+22500+300+1500
	if got := p.Cost(u); got != 33_300 {
		t.Errorf("without cache_write_1h: %d, want 33300", got)
	}
	// more 1-hour writes than writes (a confused upstream): no more than the writes
	c := Clamp(adapters.Usage{CacheWriteTokens: 5, CacheWrite1hTokens: 50})
	if c.CacheWrite1hTokens != 5 {
		t.Errorf("clamped %+v", c)
	}
	// tiers price 1-hour writes too
	tp := &Price{Input: 3_000_000, Output: 15_000_000, CacheWrite1h: ptr(6_000_000),
		Tiers: []PriceTier{{Above: 200_000, Input: 6_000_000, Output: 22_500_000, CacheWrite1h: ptr(12_000_000)}}}
	if got := tp.Cost(adapters.Usage{PromptTokens: 250_000, CacheWriteTokens: 250_000, CacheWrite1hTokens: 250_000}); got != 3_000_000 {
		t.Errorf("1h writes in the tier: %d, want 3000000", got)
	}
}

func TestCheckTiers(t *testing.T) {
	for _, tiers := range [][]PriceTier{{{Above: 0}}, {{Above: 10}, {Above: 10}}, {{Above: 20}, {Above: 10}}} {
		if err := (&Price{Tiers: tiers}).CheckTiers(); err == nil {
			t.Errorf("%+v accepted", tiers)
		}
	}
	if err := (&Price{Tiers: []PriceTier{{Above: 10}, {Above: 20}}}).CheckTiers(); err != nil {
		t.Error(err)
	}
}

// Multipliers are exact: millionths, the product rounded up to a unit.
func TestMultiplier(t *testing.T) {
	for _, c := range []struct {
		in      string
		want    Multiplier
		wantErr bool
	}{{"0.5", 500_000, false}, {"2", 2_000_000, false}, {"1.333333", 1_333_333, false},
		{"0", 0, true}, {"-1", 0, true}, {"0.0000001", 0, true}, {"1001", 0, true}, {"x", 0, true}} {
		got, err := ParseMultiplier(c.in)
		if got != c.want || (err != nil) != c.wantErr {
			t.Errorf("ParseMultiplier(%q) = %d, %v", c.in, got, err)
		}
	}
	half, double, third := Multiplier(500_000), Multiplier(2_000_000), Multiplier(333_333)
	for _, c := range []struct {
		m          Multiplier
		cost, want int64
	}{
		{half, 10, 5}, {half, 11, 6}, // 5.5 rounds up
		{double, 7, 14},
		{third, 3, 1},               // 0.999999 -> 1
		{third, 1_000_000, 333_333}, // exact
		{0, 9, 9}, {MultiplierOne, 9, 9},
		{double, math.MaxInt64, math.MaxInt64}, // saturates
		{half, 0, 0},
	} {
		if got := c.m.Apply(c.cost); got != c.want {
			t.Errorf("%s x %d = %d, want %d", c.m, c.cost, got, c.want)
		}
	}
	// Room is the largest cost whose product fits
	for _, m := range []Multiplier{half, double, third, 1_250_000} {
		for _, left := range []int64{0, 1, 2, 7, 100, 999_999} {
			r := m.Room(left)
			if m.Apply(r) > left || (left > 0 && m.Apply(r+1) <= left) {
				t.Errorf("%s: room of %d is %d", m, left, r)
			}
		}
	}
	if half.String() != "0.500000" {
		t.Errorf("String %q", half.String())
	}
}

// A plan's multiplier for a model scales what the plan holds and is
// charged; the first entry naming the model applies; the balance, when
// it pays instead, is charged the price.
func TestPlanMultiplier(t *testing.T) {
	clock := &fakeClock{t: time.Date(2026, 11, 26, 9, 2, 0, 0, time.UTC)}
	cfg := &BudgetConfig{ModelGroups: map[string][]string{"opus": {"claude-opus-*"}}}
	if _, err := cfg.Set("plan", []string{"pro"}); err != nil {
		t.Fatal(err)
	}
	line, _ := cfg.Set("plan", []string{"pro"})
	for _, l := range [][]string{{"daily", "1"}, {"multiplier", "group:opus", "2"}, {"multiplier", "claude-haiku", "claude-opus-x", "0.5"}} {
		if err := line(l[0], l[1:]); err != nil {
			t.Fatal(l, err)
		}
	}
	if err := line("multiplier", []string{"claude-haiku", "zero"}); err == nil ||
		!strings.Contains(err.Error(), `multiplier claude-haiku: multiplier "zero" is not a positive decimal number`) {
		t.Errorf("a factor that is not a number: %v", err)
	}
	if err := line("multiplier", []string{"2"}); err == nil {
		t.Error("a multiplier of no model accepted")
	}
	b, err := cfg.Build(&Spend{Clock: clock.Now}, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	pl := b.Plans["pro"]
	for model, want := range map[string]Multiplier{"claude-opus-x": 2_000_000, "claude-haiku": 500_000, "gpt-4o": MultiplierOne} {
		if got := pl.Multiplier(b.Models, model); got != want {
			t.Errorf("%s: %s, want %s", model, got, want)
		}
	}
	prof := &Profile{Plan: pl, PlanBudget: Budget{Subject: "plan:pro/user:1", Limits: pl.Windows}}
	ctx := context.Background()
	h, err := b.Hold(ctx, clock.Now(), prof, "claude-haiku", 1001, true)
	if err != nil {
		t.Fatal(err)
	}
	if h.Amount() != 501 || h.Charge(999) != 500 || !h.PlanPaid() {
		t.Errorf("held %d, charged %d", h.Amount(), h.Charge(999))
	}
	h.settle(h.Charge(999))
	// unscaled (a task): the amount as asked
	h, err = b.Hold(ctx, clock.Now(), prof, "claude-opus-x", 100, false)
	if err != nil || h.Amount() != 100 || h.Charge(100) != 100 {
		t.Fatalf("unscaled hold %v %d", err, h.Amount())
	}
	h.settle(100)
	// a plan full at 2x: 1 USD less 600 already spent has room for 499_700 before the factor
	st, _ := b.Status(ctx, clock.Now(), prof)
	if len(st) != 1 || st[0].Spent != 600 {
		t.Fatalf("status %+v", st)
	}
	if _, err := b.Hold(ctx, clock.Now(), prof, "claude-opus-x", 499_701, true); err == nil {
		t.Error("a hold beyond the plan's room at 2x accepted")
	}
	// Build refuses an unknown group and a bad factor
	for _, pc := range []*PlanConfig{
		{Multipliers: []MultiplierConfig{{Models: []string{"group:nope"}, Factor: "2"}}},
		{Multipliers: []MultiplierConfig{{Models: []string{"m"}, Factor: "-2"}}},
		{Multipliers: []MultiplierConfig{{Factor: "2"}}},
	} {
		if _, err := (&BudgetConfig{Plans: map[string]*PlanConfig{"p": pc}}).Build(&Spend{}, nil, 0); err == nil ||
			!strings.Contains(err.Error(), "plan p") {
			t.Errorf("%+v: %v", pc.Multipliers, err)
		}
	}
}

// What a caller may still hold, for the allowance of a request without a
// limit, is the plan's room before its multiplier for the model: held
// at the factor, it fits exactly.
func TestRoomBeforeTheMultiplier(t *testing.T) {
	now := time.Now()
	b, err := (&BudgetConfig{Plans: map[string]*PlanConfig{"pro": {Windows: map[string]string{"daily": "1"},
		Multipliers: []MultiplierConfig{{Models: []string{"m2"}, Factor: "2"}, {Models: []string{"mh"}, Factor: "0.5"}}}}}).
		Build(&Spend{Clock: func() time.Time { return now }}, nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	g := &Gate{Limiter: NewLimiter(), Ledger: NewLedger(), Usage: &fakeQueue{}, Budgets: b}
	u, tok := &store.User{ID: 1}, &store.Token{ID: 2}
	b.users = map[int64]*userBudget{1: {b: store.UserBudget{Plan: "pro"}, loaded: now}}
	b.keys = map[int64]*keyBudget{2: {loaded: now}}
	for model, want := range map[string]int64{"m2": 500_000, "mh": 2_000_000, "m1": 1_000_000} {
		if got := g.Room(u, tok, model); got != want {
			t.Errorf("room for %s: %d, want %d", model, got, want)
		}
	}
	room := g.Room(u, tok, "m2")
	ad, err := g.Admit(now, Ask{User: u, Token: tok, Model: "m2", Scaled: true, Reserve: Reserve(room)})
	if err != nil {
		t.Fatalf("the room's worth at 2x: %v", err)
	}
	if ad.Hold.Windows.Amount() != 1_000_000 {
		t.Errorf("held %d, want the whole plan", ad.Hold.Windows.Amount())
	}
	if got := g.Room(u, tok, "m2"); got != 0 {
		t.Errorf("room after: %d", got)
	}
	g.Settle(now, ad, 0, ad.Hold.Windows.Charge(room))
}
