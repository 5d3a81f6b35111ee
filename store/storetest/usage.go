package storetest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/store"
)

func testSettleBatchCharges(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	alice := mustUser(t, s, "alice", 1_000_000)
	bob := mustUser(t, s, "bob", 500)
	a1 := mustToken(t, s, alice.ID, "a1")
	a2 := mustToken(t, s, alice.ID, "a2")
	b1 := mustToken(t, s, bob.ID, "b1")
	base := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

	logs := []*store.UsageLog{
		{UserID: alice.ID, TokenID: a1.ID, Cost: 1_234, Model: "gpt-4o", PromptTokens: 10, CompletionTokens: 20, Status: 200, CreatedAt: base},
		{UserID: alice.ID, TokenID: a2.ID, Cost: 7, Stream: true, Estimated: true, CachedTokens: 3, ReasoningTokens: 4, CreatedAt: base.Add(time.Second)},
		{UserID: alice.ID, TokenID: a1.ID, Cost: 0, Status: 502, Error: "upstream timed out", CreatedAt: base.Add(2 * time.Second)},
		{UserID: bob.ID, TokenID: b1.ID, Cost: 800, Channel: "anthropic", Endpoint: "/v1/messages", LatencyMS: 1500, TTFBMS: 300, CreatedAt: base.Add(3 * time.Second)},
		{UserID: bob.ID, Cost: 1, CreatedAt: base.Add(4 * time.Second)}, // no token: a console request
	}
	if err := s.SettleBatch(ctx, logs); err != nil {
		t.Fatal(err)
	}
	for i, l := range logs {
		if l.ID == 0 {
			t.Fatalf("log %d has no id", i)
		}
	}

	users := []struct {
		id                         int64
		quota, used, requestsCount int64
	}{
		{alice.ID, 1_000_000 - 1_241, 1_241, 3},
		{bob.ID, 500 - 801, 801, 2}, // settling may take a balance below zero
	}
	for _, want := range users {
		got := mustGetUser(t, s, want.id)
		if got.Quota != want.quota || got.UsedQuota != want.used || got.RequestCount != want.requestsCount {
			t.Errorf("user %d: quota %d used %d requests %d; want %d %d %d", want.id,
				got.Quota, got.UsedQuota, got.RequestCount, want.quota, want.used, want.requestsCount)
		}
	}
	tokens := map[int64]int64{a1.ID: 1_234, a2.ID: 7, b1.ID: 800}
	for id, want := range tokens {
		got, err := s.TokenByID(ctx, id)
		if err != nil || got.UsedQuota != want {
			t.Errorf("token %d used = %v, %v; want %d", id, got, err, want)
		}
	}

	if n, err := s.CountUsage(ctx); err != nil || n != int64(len(logs)) {
		t.Fatalf("count = %d, %v; want %d", n, err, len(logs))
	}
	all, err := s.ListUsage(ctx, store.UsageFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != len(logs) {
		t.Fatalf("listed %d rows, want %d", len(all), len(logs))
	}
	for i, got := range all {
		want := logs[len(logs)-1-i] // newest first
		if *got != *want {
			t.Errorf("row %d:\ngot  %+v\nwant %+v", i, *got, *want)
		}
	}
}

func testSettleBatchEdges(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	u := mustUser(t, s, "u", 10)
	if err := s.SettleBatch(ctx, nil); err != nil {
		t.Fatalf("empty batch: %v", err)
	}
	if err := s.SettleBatch(ctx, []*store.UsageLog{{UserID: u.ID}, nil}); err == nil {
		t.Fatal("nil row accepted")
	}
	// A row of a user deleted since its request is still written, and does
	// not sink the rest of its batch.
	l := &store.UsageLog{UserID: u.ID, Cost: 3}
	if err := s.SettleBatch(ctx, []*store.UsageLog{{UserID: 9999, TokenID: 9999, Cost: 5}, l}); err != nil {
		t.Fatal(err)
	}
	if l.CreatedAt.IsZero() || l.CreatedAt.Location() != time.UTC {
		t.Fatalf("zero created at not filled: %v", l.CreatedAt)
	}
	if got := mustGetUser(t, s, u.ID); got.Quota != 7 || got.RequestCount != 1 {
		t.Fatalf("quota %d requests %d", got.Quota, got.RequestCount)
	}
	if n, _ := s.CountUsage(ctx); n != 2 {
		t.Fatalf("count = %d", n)
	}
}

func testListUsageFilterAndLimit(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	a := mustUser(t, s, "a", 0)
	b := mustUser(t, s, "b", 0)
	base := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	var logs []*store.UsageLog
	for i := range 150 {
		u := a
		if i%3 == 0 {
			u = b
		}
		logs = append(logs, &store.UsageLog{UserID: u.ID, Cost: 1, CreatedAt: base.Add(time.Duration(i) * time.Minute)})
	}
	if err := s.SettleBatch(ctx, logs); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		filter store.UsageFilter
		want   int
		user   int64
	}{
		{"default limit", store.UsageFilter{}, 100, 0},
		{"limit", store.UsageFilter{Limit: 7}, 7, 0},
		{"user a", store.UsageFilter{UserID: a.ID, Limit: 1000}, 100, a.ID},
		{"user b", store.UsageFilter{UserID: b.ID}, 50, b.ID},
		{"nobody", store.UsageFilter{UserID: 999}, 0, 999},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.ListUsage(ctx, tt.filter)
			if err != nil {
				t.Fatal(err)
			}
			if got == nil || len(got) != tt.want {
				t.Fatalf("got %d rows, want %d", len(got), tt.want)
			}
			for i, l := range got {
				if tt.user != 0 && l.UserID != tt.user {
					t.Fatalf("row of user %d in %s", l.UserID, tt.name)
				}
				if i > 0 && l.CreatedAt.After(got[i-1].CreatedAt) {
					t.Fatalf("not newest first at %d", i)
				}
			}
		})
	}
}

// testConcurrentWriters runs batch settlement from 8 goroutines while codes
// are redeemed, quota is added and readers read, and checks that nothing
// failed (in particular nothing was "database is locked") and every unit is
// accounted for.
func testConcurrentWriters(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	const (
		writers   = 8
		batches   = 25
		batchSize = 40
		adds      = 200
		codes     = 50
		codeValue = 1_000
		start     = 10_000_000
	)
	users := make([]*store.User, 4)
	toks := make([]*store.Token, len(users))
	for i := range users {
		users[i] = mustUser(t, s, fmt.Sprintf("user%d", i), start)
		toks[i] = mustToken(t, s, users[i].ID, fmt.Sprintf("tok%d", i))
	}
	var rc []*store.RedemptionCode
	for i := range codes {
		rc = append(rc, &store.RedemptionCode{Code: fmt.Sprintf("CODE-%d", i), Quota: codeValue})
	}
	if err := s.CreateRedemptionCodes(ctx, rc); err != nil {
		t.Fatal(err)
	}

	var (
		wg   sync.WaitGroup
		errs = make(chan error, 64)
		done = make(chan struct{})
	)
	report := func(err error) {
		select {
		case errs <- err:
		default:
		}
	}
	for w := range writers {
		wg.Go(func() {
			for b := range batches {
				logs := make([]*store.UsageLog, batchSize)
				for i := range logs {
					u := (w + b + i) % len(users)
					logs[i] = &store.UsageLog{UserID: users[u].ID, TokenID: toks[u].ID, Cost: int64(i + 1)}
				}
				if err := s.SettleBatch(ctx, logs); err != nil {
					report(fmt.Errorf("writer %d batch %d: %w", w, b, err))
					return
				}
			}
		})
	}
	wg.Go(func() {
		for i := range adds {
			if err := s.AddQuota(ctx, users[i%len(users)].ID, 3); err != nil {
				report(fmt.Errorf("add quota: %w", err))
				return
			}
		}
	})
	wg.Go(func() {
		for i := range codes {
			if _, err := s.Redeem(ctx, rc[i].Code, users[i%len(users)].ID); err != nil {
				report(fmt.Errorf("redeem: %w", err))
				return
			}
		}
	})
	var readers sync.WaitGroup
	for range 2 {
		readers.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				if _, err := s.UserByID(ctx, users[0].ID); err != nil {
					report(fmt.Errorf("read user: %w", err))
					return
				}
				if _, err := s.ListUsage(ctx, store.UsageFilter{Limit: 20}); err != nil {
					report(fmt.Errorf("list usage: %w", err))
					return
				}
			}
		})
	}
	wg.Wait()
	close(done)
	readers.Wait()
	close(errs)
	for err := range errs {
		if strings.Contains(err.Error(), "locked") || strings.Contains(err.Error(), "busy") {
			t.Errorf("lock contention surfaced: %v", err)
		} else {
			t.Error(err)
		}
	}
	if t.Failed() {
		return
	}

	// Expected totals, computed the way the writers generated them.
	cost := make([]int64, len(users))
	requests := make([]int64, len(users))
	for w := range writers {
		for b := range batches {
			for i := range batchSize {
				u := (w + b + i) % len(users)
				cost[u] += int64(i + 1)
				requests[u]++
			}
		}
	}
	var sumRequests int64
	for i, u := range users {
		credit := int64(adds/len(users))*3 + int64(codes/len(users))*codeValue
		if i < codes%len(users) {
			credit += codeValue
		}
		want := start - cost[i] + credit
		got := mustGetUser(t, s, u.ID)
		if got.Quota != want || got.UsedQuota != cost[i] || got.RequestCount != requests[i] {
			t.Errorf("user %d: quota %d used %d requests %d; want %d %d %d", i,
				got.Quota, got.UsedQuota, got.RequestCount, want, cost[i], requests[i])
		}
		tok, err := s.TokenByID(ctx, toks[i].ID)
		if err != nil || tok.UsedQuota != cost[i] {
			t.Errorf("token %d used = %v, %v; want %d", i, tok, err, cost[i])
		}
		sumRequests += requests[i]
	}
	if n, err := s.CountUsage(ctx); err != nil || n != sumRequests || n != writers*batches*batchSize {
		t.Errorf("count = %d, %v; want %d", n, err, writers*batches*batchSize)
	}
}

// BenchSettleBatch measures the group-commit writer's target on s, a fresh
// store: batches of 256 rows spread over 64 users and their tokens.
func BenchSettleBatch(b *testing.B, s store.Store) {
	ctx := context.Background()
	const batchSize = 256
	users := make([]*store.User, 64)
	toks := make([]*store.Token, len(users))
	for i := range users {
		users[i] = mustUser(b, s, fmt.Sprintf("user%d", i), 1<<40)
		toks[i] = mustToken(b, s, users[i].ID, fmt.Sprintf("tok%d", i))
	}
	logs := make([]*store.UsageLog, batchSize)
	for i := range logs {
		u := i % len(users)
		logs[i] = &store.UsageLog{
			UserID: users[u].ID, TokenID: toks[u].ID, Model: "gpt-4o-mini", Channel: "openai",
			Endpoint: "/v1/chat/completions", PromptTokens: 812, CompletionTokens: 233,
			Cost: 1_337, Status: 200, Stream: true, LatencyMS: 950, TTFBMS: 210,
		}
	}
	rows := 0
	for b.Loop() {
		if err := s.SettleBatch(ctx, logs); err != nil {
			b.Fatal(err)
		}
		rows += batchSize
	}
	b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
}
