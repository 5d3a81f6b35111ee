package storetest

import (
	"context"
	"errors"
	"math"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/caddy-model-gateway/gateway/store"
)

func testRedeemOnce(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	u := mustUser(t, s, "r", 100)
	other := mustUser(t, s, "o", 0)
	codes := []*store.RedemptionCode{{Code: "ONE", Quota: 5_000}, {Code: "TWO", Quota: 7}}
	if err := s.CreateRedemptionCodes(ctx, codes); err != nil {
		t.Fatal(err)
	}
	if codes[0].ID == 0 || codes[1].ID == 0 || codes[0].CreatedAt.IsZero() {
		t.Fatalf("codes not filled in: %+v %+v", *codes[0], *codes[1])
	}

	got, err := s.Redeem(ctx, "ONE", u.ID)
	if err != nil || got != 5_000 {
		t.Fatalf("first redeem = %d, %v", got, err)
	}
	for name, userID := range map[string]int64{"same user": u.ID, "another user": other.ID} {
		if _, err := s.Redeem(ctx, "ONE", userID); !isNotFound(err) {
			t.Fatalf("second redeem by %s: %v, want ErrNotFound", name, err)
		}
	}
	if _, err := s.Redeem(ctx, "NOPE", u.ID); !isNotFound(err) {
		t.Fatalf("unknown code: %v", err)
	}
	if got := mustGetUser(t, s, u.ID); got.Quota != 5_100 {
		t.Fatalf("quota = %d, want 5100", got.Quota)
	}
	if got := mustGetUser(t, s, other.ID); got.Quota != 0 {
		t.Fatalf("other's quota = %d", got.Quota)
	}
}

func testRedeemForMissingUserKeepsCode(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	u := mustUser(t, s, "r", 0)
	if err := s.CreateRedemptionCodes(ctx, []*store.RedemptionCode{{Code: "KEEP", Quota: 9}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Redeem(ctx, "KEEP", u.ID+50); !isNotFound(err) {
		t.Fatalf("redeem for missing user: %v", err)
	}
	if _, err := s.Redeem(ctx, "KEEP", 0); err == nil {
		t.Fatal("user 0 redeemed")
	}
	// a balance the code would take past the int64 range refuses the
	// redemption (SQLite would store the sum as a REAL)
	rich := mustUser(t, s, "rich", math.MaxInt64-5)
	if _, err := s.Redeem(ctx, "KEEP", rich.ID); err == nil {
		t.Fatal("a redemption overflowed the balance")
	}
	if got := mustGetUser(t, s, rich.ID); got.Quota != math.MaxInt64-5 {
		t.Fatalf("rich's quota = %d after a refused redemption", got.Quota)
	}
	// Every failure rolled back, so the code is still good.
	if got, err := s.Redeem(ctx, "KEEP", u.ID); err != nil || got != 9 {
		t.Fatalf("redeem after failures = %d, %v", got, err)
	}
}

func testCreateRedemptionCodesAllOrNothing(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	u := mustUser(t, s, "r", 0)
	if err := s.CreateRedemptionCodes(ctx, []*store.RedemptionCode{{Code: "A", Quota: 1}}); err != nil {
		t.Fatal(err)
	}
	tests := map[string][]*store.RedemptionCode{
		"existing code":   {{Code: "B", Quota: 1}, {Code: "A", Quota: 1}},
		"repeated code":   {{Code: "C", Quota: 1}, {Code: "C", Quota: 1}},
		"empty code":      {{Code: "D", Quota: 1}, {Quota: 1}},
		"no quota":        {{Code: "E", Quota: 0}},
		"negative quota":  {{Code: "F", Quota: -1}},
		"nil code in set": {{Code: "G", Quota: 1}, nil},
	}
	for name, codes := range tests {
		t.Run(name, func(t *testing.T) {
			err := s.CreateRedemptionCodes(ctx, codes)
			if err == nil {
				t.Fatal("accepted")
			}
			if name == "existing code" || name == "repeated code" {
				if !errors.Is(err, store.ErrConflict) {
					t.Fatalf("err = %v, want ErrConflict", err)
				}
			}
			for _, c := range codes {
				if c == nil || c.Code == "" {
					continue
				}
				if c.Code != "A" {
					if _, err := s.Redeem(ctx, c.Code, u.ID); !isNotFound(err) {
						t.Fatalf("code %s of a failed batch was kept: %v", c.Code, err)
					}
				}
			}
		})
	}
}

func testRedeemRace(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	u := mustUser(t, s, "r", 0)
	if err := s.CreateRedemptionCodes(ctx, []*store.RedemptionCode{{Code: "HOT", Quota: 1_000}}); err != nil {
		t.Fatal(err)
	}
	var (
		wg        sync.WaitGroup
		won, lost atomic.Int32
	)
	for range 16 {
		wg.Go(func() {
			_, err := s.Redeem(ctx, "HOT", u.ID)
			switch {
			case err == nil:
				won.Add(1)
			case isNotFound(err):
				lost.Add(1)
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if won.Load() != 1 || lost.Load() != 15 {
		t.Fatalf("won %d lost %d, want 1 and 15", won.Load(), lost.Load())
	}
	if got := mustGetUser(t, s, u.ID); got.Quota != 1_000 {
		t.Fatalf("quota = %d", got.Quota)
	}
}
