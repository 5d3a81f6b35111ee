package storetest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/store"
)

func newAlert(id, subject, period string, threshold int, userID int64) *store.Alert {
	return &store.Alert{ID: id, Subject: subject, Window: "daily", Period: period, Threshold: threshold,
		UserID: userID, TokenID: 7, Spent: 800, Limit: 1000}
}

// testAlertClaimOnce: a crossing is claimed once; another threshold or
// period of the same subject is a crossing of its own.
func testAlertClaimOnce(t *testing.T, open Opener) {
	s := open(t)
	ctx := context.Background()
	now := time.Now()
	a := newAlert("a1", "user:3", "daily@2026-11-26", 80, 3)
	a.LeaseUntil = now.Add(time.Minute)
	won, err := s.ClaimAlert(ctx, a)
	if err != nil || !won {
		t.Fatalf("first claim = %v, %v; want true", won, err)
	}
	won, err = s.ClaimAlert(ctx, newAlert("a2", "user:3", "daily@2026-11-26", 80, 3))
	if err != nil || won {
		t.Fatalf("second claim of the same crossing = %v, %v; want false", won, err)
	}
	for i, other := range []*store.Alert{
		newAlert("a3", "user:3", "daily@2026-11-26", 100, 3),
		newAlert("a4", "user:3", "daily@2026-11-27", 80, 3),
		newAlert("a5", "key:7", "daily@2026-11-26", 80, 3),
	} {
		if won, err := s.ClaimAlert(ctx, other); err != nil || !won {
			t.Fatalf("claim %d (%s %s %d) = %v, %v; want true", i, other.Subject, other.Period, other.Threshold, won, err)
		}
	}
	if _, err := s.ClaimAlert(ctx, &store.Alert{ID: "x", Subject: "user:3"}); err == nil {
		t.Fatal("a claim with no period was accepted")
	}
	list, err := s.ListAlerts(ctx, store.AlertFilter{UserID: 3})
	if err != nil || len(list) != 4 {
		t.Fatalf("ListAlerts = %d alerts, %v; want 4", len(list), err)
	}
	var got *store.Alert
	for _, l := range list {
		if l.ID == "a1" {
			got = l
		}
	}
	if got == nil || got.Status != store.AlertPending || got.Spent != 800 || got.Limit != 1000 || got.TokenID != 7 ||
		got.Window != "daily" || got.Threshold != 80 || got.CreatedAt.IsZero() {
		t.Fatalf("alert a1 read back as %+v", got)
	}
	if l, _ := s.ListAlerts(ctx, store.AlertFilter{UserID: 4}); len(l) != 0 {
		t.Fatalf("another user's list has %d alerts", len(l))
	}
	if l, _ := s.ListAlerts(ctx, store.AlertFilter{Limit: 2}); len(l) != 2 {
		t.Fatalf("limit 2 listed %d", len(l))
	}
}

// testAlertOutbox: a claimed alert is leased by its claimer until its lease
// ends, then by one caller at a time; a failed attempt comes back when
// due, a sent or failed one never.
func testAlertOutbox(t *testing.T, open Opener) {
	s := open(t)
	ctx := context.Background()
	now := time.Now().Truncate(time.Millisecond)
	a := newAlert("o1", "user:1", "monthly@2026-11", 50, 1)
	a.CreatedAt = now
	a.LeaseUntil = now.Add(time.Minute) // the claimer sends it
	if won, err := s.ClaimAlert(ctx, a); err != nil || !won {
		t.Fatalf("claim: %v %v", won, err)
	}
	if l, err := s.LeaseAlerts(ctx, now, now.Add(time.Minute), 10); err != nil || len(l) != 0 {
		t.Fatalf("an alert its claimer holds was leased again: %d, %v", len(l), err)
	}
	// the claimer died: after its lease the alert is due to the next caller
	later := now.Add(2 * time.Minute)
	l, err := s.LeaseAlerts(ctx, later, later.Add(time.Minute), 10)
	if err != nil || len(l) != 1 || l[0].ID != "o1" {
		t.Fatalf("lease after the claimer's lease = %v, %v; want o1", l, err)
	}
	if l, _ := s.LeaseAlerts(ctx, later, later.Add(time.Minute), 10); len(l) != 0 {
		t.Fatalf("a leased alert was leased twice")
	}
	// failed once: due again at nextAt, not before
	next := later.Add(5 * time.Second)
	if err := s.AlertAttempted(ctx, "o1", store.AlertPending, 1, next, "receiver answered 500"); err != nil {
		t.Fatal(err)
	}
	if l, _ := s.LeaseAlerts(ctx, next.Add(-time.Millisecond), next.Add(time.Minute), 10); len(l) != 0 {
		t.Fatalf("an alert was leased before its retry was due")
	}
	l, err = s.LeaseAlerts(ctx, next, next.Add(time.Minute), 10)
	if err != nil || len(l) != 1 || l[0].Attempts != 1 || l[0].LastError != "receiver answered 500" {
		t.Fatalf("lease when due = %+v, %v", l, err)
	}
	if err := s.AlertAttempted(ctx, "o1", store.AlertSent, 2, time.Time{}, ""); err != nil {
		t.Fatal(err)
	}
	far := next.Add(time.Hour)
	if l, _ := s.LeaseAlerts(ctx, far, far.Add(time.Minute), 10); len(l) != 0 {
		t.Fatalf("a sent alert was leased again")
	}
	got, _ := s.ListAlerts(ctx, store.AlertFilter{UserID: 1})
	if len(got) != 1 || got[0].Status != store.AlertSent || got[0].Attempts != 2 || got[0].SentAt.IsZero() {
		t.Fatalf("sent alert reads %+v", got)
	}
}

// testKeyAlertThresholds: a key's thresholds round-trip, are replaced,
// removed, and refused out of range.
func testKeyAlertThresholds(t *testing.T, open Opener) {
	s := open(t)
	ctx := context.Background()
	if ts, err := s.KeyAlertThresholds(ctx, 9); err != nil || len(ts) != 0 {
		t.Fatalf("unset = %v, %v", ts, err)
	}
	for _, want := range [][]int{{50, 80}, {90}} {
		if err := s.SetKeyAlertThresholds(ctx, 9, want); err != nil {
			t.Fatal(err)
		}
		if ts, err := s.KeyAlertThresholds(ctx, 9); err != nil || !slices.Equal(ts, want) {
			t.Fatalf("thresholds = %v, %v; want %v", ts, err, want)
		}
	}
	for _, bad := range [][]int{{0}, {101}, {50, 50}, make([]int, store.MaxThresholds+1)} {
		if err := s.SetKeyAlertThresholds(ctx, 9, bad); err == nil {
			t.Fatalf("thresholds %v accepted", bad)
		}
	}
	if err := s.SetKeyAlertThresholds(ctx, 9, nil); err != nil {
		t.Fatal(err)
	}
	if ts, _ := s.KeyAlertThresholds(ctx, 9); len(ts) != 0 {
		t.Fatalf("removed thresholds read %v", ts)
	}
}

// testInstancesClaimAlertOnce: instances racing to claim one crossing,
// and to lease the outbox, win it exactly once between them.
func testInstancesClaimAlertOnce(t *testing.T, open InstancesOpener) {
	stores := open(t, 3)
	ctx := context.Background()
	var mu sync.Mutex
	wins := map[string]int{}
	var wg sync.WaitGroup
	for i, s := range stores {
		for n := range 10 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				a := newAlert(fmt.Sprintf("i%d-%d", i, n), "user:1", "daily@2026-11-26", 50+n%3*25, 1)
				won, err := s.ClaimAlert(ctx, a)
				if err != nil {
					t.Error(err)
				}
				if won {
					mu.Lock()
					wins[fmt.Sprint(a.Threshold)]++
					mu.Unlock()
				}
			}()
		}
	}
	wg.Wait()
	if len(wins) != 3 || wins["50"] != 1 || wins["75"] != 1 || wins["100"] != 1 {
		t.Fatalf("claims won by threshold = %v; want one each of 50, 75, 100", wins)
	}
	// every claim's lease is 0 (unset): all three are due; leased once
	far := time.Now().Add(time.Hour)
	leased := map[string]int{}
	for _, s := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := s.LeaseAlerts(ctx, far, far.Add(time.Minute), 10)
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			for _, a := range l {
				leased[a.ID]++
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	if len(leased) != 3 {
		t.Fatalf("leased %v; want the three alerts", leased)
	}
	for id, n := range leased {
		if n != 1 {
			t.Fatalf("alert %s leased %d times", id, n)
		}
	}
}

// testDeleteOldAlerts: old delivered alerts of calendar windows go; the
// pending, the recent and those of lifetime, balance and key limits stay
// (their crossings could otherwise be claimed again).
func testDeleteOldAlerts(t *testing.T, open Opener) {
	s := open(t)
	ctx := context.Background()
	old := time.Now().Add(-100 * 24 * time.Hour)
	mk := func(id, window string, created time.Time, sent bool) {
		a := newAlert(id, "user:1", window+"@x", 50, 1)
		a.Window, a.CreatedAt = window, created
		if won, err := s.ClaimAlert(ctx, a); err != nil || !won {
			t.Fatal(won, err)
		}
		if sent {
			if err := s.AlertAttempted(ctx, id, store.AlertSent, 1, time.Time{}, ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	mk("old-daily", "daily", old, true)
	mk("old-5h", "5h", old, true)
	mk("old-pending", "monthly", old, false)
	mk("old-lifetime", "lifetime", old, true)
	mk("old-balance", "balance", old, true)
	mk("new-daily", "weekly", time.Now(), true)
	n, err := s.DeleteAlertsBefore(ctx, time.Now().Add(-90*24*time.Hour))
	if err != nil || n != 2 {
		t.Fatalf("deleted %d, %v; want the two old delivered window alerts", n, err)
	}
	var left []string
	for _, a := range mustAlerts(t, s) {
		left = append(left, a.ID)
	}
	slices.Sort(left)
	if want := []string{"new-daily", "old-balance", "old-lifetime", "old-pending"}; !slices.Equal(left, want) {
		t.Fatalf("left %v; want %v", left, want)
	}
}

func mustAlerts(t *testing.T, s store.Store) []*store.Alert {
	t.Helper()
	l, err := s.ListAlerts(context.Background(), store.AlertFilter{})
	if err != nil {
		t.Fatal(err)
	}
	return l
}
