package storetest

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/store"
)

// testCacheHits: a usage row answered by the response cache keeps its
// mark and what it saved, and UsageTotals sums both per model and per key.
func testCacheHits(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	u := mustUser(t, s, "hitty", 1_000_000)
	k1 := mustToken(t, s, u.ID, "hash-hitty-1")
	k2 := mustToken(t, s, u.ID, "hash-hitty-2")
	at := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	logs := []*store.UsageLog{
		{CreatedAt: at, UserID: u.ID, TokenID: k1.ID, Model: "gpt-4o", Status: 200, Cost: 500},
		{CreatedAt: at, UserID: u.ID, TokenID: k1.ID, Model: "gpt-4o", Status: 200, CacheHit: true, CacheSaved: 500},
		{CreatedAt: at, UserID: u.ID, TokenID: k2.ID, Model: "gpt-4o", Status: 200, Cost: 125, CacheHit: true, CacheSaved: 375},
		{CreatedAt: at, UserID: u.ID, TokenID: k2.ID, Model: "claude", Status: 200, Cost: 90},
	}
	if err := s.SettleBatch(ctx, logs); err != nil {
		t.Fatal(err)
	}
	rows, err := s.ListUsage(ctx, store.UsageFilter{UserID: u.ID})
	if err != nil || len(rows) != 4 {
		t.Fatalf("ListUsage = %d rows, %v", len(rows), err)
	}
	for _, r := range rows {
		for _, l := range logs {
			if l.ID == r.ID && (r.CacheHit != l.CacheHit || r.CacheSaved != l.CacheSaved) {
				t.Errorf("row %d: cache_hit %v saved %d; want %v, %d", r.ID, r.CacheHit, r.CacheSaved, l.CacheHit, l.CacheSaved)
			}
		}
	}
	if u2, err := s.UserByID(ctx, u.ID); err != nil || u2.Quota != 1_000_000-715 {
		t.Fatalf("balance after hits = %+v, %v; want charged 715", u2, err)
	}
	type sums struct{ requests, hits, saved int64 }
	total := func(by store.UsageGroup) map[string]sums {
		ts, err := s.UsageTotals(ctx, store.UsageFilter{UserID: u.ID, Since: at.Add(-time.Hour)}, by)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]sums{}
		for _, x := range ts {
			m[x.Key] = sums{x.Requests, x.CacheHits, x.CacheSaved}
		}
		return m
	}
	if got := total(store.ByModel); got["gpt-4o"] != (sums{3, 2, 875}) || got["claude"] != (sums{1, 0, 0}) {
		t.Errorf("totals by model = %v", got)
	}
	byKey := total(store.ByToken)
	if byKey[strconv.FormatInt(k1.ID, 10)] != (sums{2, 1, 500}) || byKey[strconv.FormatInt(k2.ID, 10)] != (sums{2, 1, 375}) {
		t.Errorf("totals by key = %v", byKey)
	}
}

// testCachedResponses: the response cache's shared entries are served
// until they expire, marked used when read, and bounded in bytes with the
// least recently used evicted first.
func testCachedResponses(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	now := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	get := func(key string, at time.Time) string {
		t.Helper()
		b, err := s.GetCachedResponse(ctx, key, at)
		if errors.Is(err, store.ErrNotFound) {
			return ""
		}
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	put := func(key, entry string, at time.Time, maxBytes int64) {
		t.Helper()
		if err := s.PutCachedResponse(ctx, key, []byte(entry), at.Add(time.Minute), at, maxBytes); err != nil {
			t.Fatal(err)
		}
	}
	const max = 30 // three entries of 10 bytes
	put("a", "aaaaaaaaaa", now, max)
	put("b", "bbbbbbbbbb", now.Add(time.Second), max)
	put("c", "cccccccccc", now.Add(2*time.Second), max)
	if get("a", now.Add(3*time.Second)) != "aaaaaaaaaa" { // a is now the most recently used
		t.Fatal("entry a not served")
	}
	put("d", "dddddddddd", now.Add(4*time.Second), max) // b, the least recently used, goes
	if got := get("b", now.Add(5*time.Second)); got != "" {
		t.Errorf("b served past max_bytes: %q", got)
	}
	for _, k := range []string{"a", "c", "d"} {
		if get(k, now.Add(5*time.Second)) == "" {
			t.Errorf("entry %s evicted", k)
		}
	}
	put("d", "DDDDDDDDDD", now.Add(6*time.Second), max)
	if got := get("d", now.Add(6*time.Second)); got != "DDDDDDDDDD" {
		t.Errorf("a replaced entry reads %q", got)
	}
	put("huge", strings.Repeat("h", max+1), now.Add(7*time.Second), max)
	if get("huge", now.Add(7*time.Second)) != "" || get("a", now.Add(7*time.Second)) == "" {
		t.Error("an entry larger than max_bytes was kept, or evicted others")
	}
	// expiry: d was kept at 6s for a minute
	if get("d", now.Add(66*time.Second)) != "" {
		t.Error("an expired entry was served")
	}
	if get("d", now.Add(65*time.Second)) == "" {
		t.Error("an entry was not served before it expired")
	}
}
