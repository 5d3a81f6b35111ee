package store

import (
	"math"
	"slices"
	"testing"
	"time"
)

func TestSaturatingArithmetic(t *testing.T) {
	check := func(what string, got, want int64) {
		t.Helper()
		if got != want {
			t.Errorf("%s: got %d, want %d", what, got, want)
		}
	}
	check("add", AddSat(2, 3), 5)
	check("add at the top", AddSat(math.MaxInt64-1, 5), math.MaxInt64)
	check("sub", SubSat(2, 3), -1)
	check("sub below the bottom", SubSat(math.MinInt64+1, 5), math.MinInt64)
	check("sub of a negative past the top", SubSat(math.MaxInt64-1, -5), math.MaxInt64)
	check("sub of the most negative", SubSat(0, math.MinInt64), math.MaxInt64)
}

func TestBatchCharges(t *testing.T) {
	day := time.Date(2026, 3, 1, 23, 59, 0, 0, time.UTC)
	next := day.Add(2 * time.Minute)
	b := NewBatchCharges(map[string]int64{"w1": -10})
	b.Add(&UsageLog{UserID: 2, TokenID: 7, Model: "m", Cost: 100, PromptTokens: 3, Windows: "w1,w2"}, day)
	b.Add(&UsageLog{UserID: 2, TokenID: 7, Model: "m", Cost: 40, Plan: "pro", Windows: "w2"}, day)
	b.Add(&UsageLog{UserID: 1, TokenID: 9, Model: "m", Cost: math.MaxInt64}, next)
	b.Add(&UsageLog{UserID: 1, TokenID: 9, Model: "m", Cost: 1}, next)

	if c := b.Users[2]; *c != (Charge{Cost: 100, Requests: 2}) {
		t.Errorf("user 2: %+v, want the plan's row counted but not charged", *c)
	}
	if c := b.Users[1]; c.Cost != math.MaxInt64 {
		t.Errorf("user 1: cost %d, want it saturated", c.Cost)
	}
	d := day.UnixMilli() / MsPerDay
	if c := b.Days[UserDay{2, d}]; *c != (Charge{Cost: 140, Requests: 2}) {
		t.Errorf("user 2's day: %+v, want every row's cost", *c)
	}
	if b.Tokens[7] != 100 || b.Tokens[9] != math.MaxInt64 {
		t.Errorf("tokens: %v", b.Tokens)
	}
	if got := b.Windows; got["w1"] != 90 || got["w2"] != 140 {
		t.Errorf("windows: %v, want the given spend plus each row's cost", got)
	}
	if got := b.UserIDs(); !slices.Equal(got, []int64{1, 2}) {
		t.Errorf("user ids %v", got)
	}
	if got := b.DayKeys(); !slices.Equal(got, []UserDay{{1, d + 1}, {2, d}}) {
		t.Errorf("day keys %v", got)
	}
	if got := b.ModelKeys(); !slices.Equal(got, []ModelDay{{d, 2, "m"}, {d + 1, 1, "m"}}) {
		t.Errorf("model keys %v", got)
	}
	if m := b.Models[ModelDay{d, 2, "m"}]; m.Requests != 2 || m.Cost != 140 || m.PromptTokens != 3 {
		t.Errorf("model day: %+v", *m)
	}
}

func TestTaskWindows(t *testing.T) {
	ids := "a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q,r"
	got := TaskWindows(ids, -5)
	if len(got) != MaxWindowIDs || got["a"] != -5 {
		t.Errorf("got %v, want the first %d windows at -5", got, MaxWindowIDs)
	}
	if got := TaskWindows("a", 0); len(got) != 0 {
		t.Errorf("nothing to count: %v", got)
	}
}

func TestLeaseOrder(t *testing.T) {
	reqs := []LeaseRequest{
		{Account: LeaseAccount{ID: 3, Token: true}},
		{Account: LeaseAccount{ID: 5}},
		{Account: LeaseAccount{ID: 1, Token: true}},
		{Account: LeaseAccount{ID: 2}},
	}
	if got := LeaseOrder(reqs); !slices.Equal(got, []int{3, 1, 2, 0}) {
		t.Errorf("got %v, want users by id then tokens by id", got)
	}
}

func TestWindowGrant(t *testing.T) {
	for _, c := range []struct{ limit, claimed, want, least, grant int64 }{
		{100, 0, 30, 1, 30},
		{100, 90, 30, 1, 10},
		{100, 90, 30, 20, 0},
		{100, 120, 30, 0, 0},
	} {
		if got := WindowGrant(c.limit, c.claimed, c.want, c.least); got != c.grant {
			t.Errorf("%+v: granted %d", c, got)
		}
	}
}
