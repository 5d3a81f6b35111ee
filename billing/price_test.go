package billing

import (
	"math"
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters"
)

func TestParseUSD(t *testing.T) {
	tests := []struct {
		in      string
		want    int64
		wantErr bool
	}{
		{"0.15", 150000, false},
		{"2", 2000000, false},
		{"0.000001", 1, false},
		{"0.0000001", 0, true},
		{"-1", 0, true},
		{"abc", 0, true},
		{"1e-3", 1000, false},
	}
	for _, tt := range tests {
		got, err := ParseUSD(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseUSD(%q) = %d, %v; want %d, err %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestCost(t *testing.T) {
	cached := int64(75000)
	p := &Price{Input: 150000, Output: 600000, CachedInput: &cached}
	tests := []struct {
		name string
		u    adapters.Usage
		want int64
	}{
		// 10*0.15 + 20*0.6 = 1.5 + 12 = 13.5 -> 14
		{"rounds up", adapters.Usage{PromptTokens: 10, CompletionTokens: 20}, 14},
		// 1M prompt = 150000 units exactly
		{"exact", adapters.Usage{PromptTokens: 1_000_000}, 150000},
		// 1000 prompt of which 400 cached: 600*0.15 + 400*0.075 = 90 + 30 = 120
		{"cached", adapters.Usage{PromptTokens: 1000, CachedTokens: 400}, 120},
		{"zero", adapters.Usage{}, 0},
		// one token of input: 0.15 -> 1
		{"tiny", adapters.Usage{PromptTokens: 1}, 1},
	}
	for _, tt := range tests {
		if got := p.Cost(tt.u); got != tt.want {
			t.Errorf("%s: Cost = %d, want %d", tt.name, got, tt.want)
		}
	}
	// 10^12 tokens at USD 1,000,000 per million: beyond int64 before division
	huge := &Price{Output: 1_000_000_000_000}
	if got := huge.Cost(adapters.Usage{CompletionTokens: 1_000_000_000_000}); got != 1_000_000_000_000_000_000 {
		t.Errorf("large cost = %d", got)
	}
	if got := (&Price{Free: true, Input: 5}).Cost(adapters.Usage{PromptTokens: 100}); got != 0 {
		t.Errorf("free price charged %d", got)
	}
	if got := (&Price{Request: 7}).Cost(adapters.Usage{}); got != 7 {
		t.Errorf("per-request price charged %d, want 7", got)
	}
}

// Affordable is the largest allowance whose reservation fits, exactly.
func TestAffordable(t *testing.T) {
	p := &Price{Input: 1_000_000, Output: 2_000_000, Request: 5} // 1 and 2 units a token
	for _, c := range []struct{ prompt, want, choices, avail, out int64 }{
		{10, 16384, 1, 1_000_000, 16384},          // plenty
		{10, 16384, 1, 10_005, (10_000 - 10) / 2}, // lowered
		{10, 16384, 3, 10_005, (10_000 - 10) / 6}, // three choices
		{10, 16384, 1, 15, 0},                     // not even the prompt and flat fee
		{0, 100, 1, -5, 0},
	} {
		got := p.Affordable(c.prompt, c.want, c.choices, c.avail)
		if got != c.out {
			t.Errorf("%+v: %d", c, got)
		}
		if got > 0 && p.Reservation(c.prompt, got*c.choices) > c.avail {
			t.Errorf("%+v: reservation %d exceeds %d", c, p.Reservation(c.prompt, got*c.choices), c.avail)
		}
		if got > 0 && got < c.want && p.Reservation(c.prompt, (got+1)*c.choices) <= c.avail {
			t.Errorf("%+v: %d is not the largest", c, got)
		}
	}
	if got := (&Price{Free: true}).Affordable(10, 500, 1, 0); got != 500 {
		t.Errorf("free: %d", got)
	}
}

func TestClamp(t *testing.T) {
	u := Clamp(adapters.Usage{PromptTokens: -3, CompletionTokens: 1 << 60, ReasoningTokens: 7})
	if u.PromptTokens != 0 || u.CompletionTokens != MaxTokens || u.ReasoningTokens != 7 {
		t.Fatalf("%+v", u)
	}
}

func TestTaskPrices(t *testing.T) {
	p := &Price{Task: 10_000, VideoSecond: 100_000, MaxSeconds: 12}
	tests := []struct {
		name string
		got  int64
		want int64
	}{
		{"requested duration", p.TaskReservation(8), 810_000},
		{"no duration reserves the longest", p.TaskReservation(0), 1_210_000},
		{"whole seconds", TaskCost(p.Task, p.VideoSecond, 4), 410_000},
		{"fractional seconds round up", TaskCost(0, 3, 1.0001), 4},
		{"no seconds: the flat price", TaskCost(p.Task, p.VideoSecond, 0), 10_000},
		{"saturates", TaskCost(1, 1<<62, 1e9), math.MaxInt64},
		{"free", (&Price{Free: true, VideoSecond: 5}).TaskReservation(4), 0},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: %d, want %d", tt.name, tt.got, tt.want)
		}
	}
}
