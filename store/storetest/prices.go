package storetest

import (
	"context"
	"testing"

	"github.com/caddy-model-gateway/gateway/store"
)

// testUsagePriceTier: a usage row keeps the price tier it was billed at
// (0 for the base prices), read back as written.
func testUsagePriceTier(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	u := mustUser(t, s, "tiered", 1_000_000)
	tok := mustToken(t, s, u.ID, "hash-tiered")
	logs := []*store.UsageLog{
		{UserID: u.ID, TokenID: tok.ID, Model: "gemini-2.5-pro", Status: 200, PromptTokens: 250_000, Cost: 640_000, PriceTier: 200_000},
		{UserID: u.ID, TokenID: tok.ID, Model: "gemini-2.5-pro", Status: 200, PromptTokens: 1000, Cost: 1250},
	}
	if err := s.SettleBatch(ctx, logs); err != nil {
		t.Fatal(err)
	}
	rows, err := s.ListUsage(ctx, store.UsageFilter{UserID: u.ID})
	if err != nil || len(rows) != 2 {
		t.Fatalf("ListUsage = %d rows, %v", len(rows), err)
	}
	got := map[int64]int64{rows[0].ID: rows[0].PriceTier, rows[1].ID: rows[1].PriceTier}
	if got[logs[0].ID] != 200_000 || got[logs[1].ID] != 0 {
		t.Fatalf("price tiers = %v; want 200000 on row %d and 0 on row %d", got, logs[0].ID, logs[1].ID)
	}
}
