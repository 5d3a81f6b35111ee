package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/store"
)

// The audit log and the filters the operators' pages list by: usage by
// key, channel, status and request id; users by a part of their name;
// codes by batch and by a part of a name or code.

func testAuditLog(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	if got, err := s.ListAudit(ctx, store.AuditFilter{}); err != nil || got == nil || len(got) != 0 {
		t.Fatalf("empty log = %#v, %v; want [] and no error", got, err)
	}
	if err := s.AddAudit(ctx, &store.AuditEntry{Action: "user.create"}); err == nil {
		t.Fatal("an entry without an actor was written")
	}
	t0 := time.Now().Add(-time.Hour).UTC().Truncate(time.Millisecond)
	entries := []*store.AuditEntry{
		{CreatedAt: t0, ActorID: 1, Actor: "root", Action: "user.create", Target: "user:2",
			After: json.RawMessage(`{"role":"user","username":"ann"}`)},
		{CreatedAt: t0.Add(time.Minute), ActorID: 1, Actor: "root", Action: "user.update", Target: "user:2",
			Before: json.RawMessage(`{"quota":0}`), After: json.RawMessage(`{"quota":5}`)},
		{CreatedAt: t0.Add(2 * time.Minute), Actor: "cli", Action: "code.create", Target: "batch:spring"},
		{Actor: "admin", ActorID: 3, Action: "userx.other", Target: "user:9"}, // now
	}
	for _, e := range entries {
		if err := s.AddAudit(ctx, e); err != nil {
			t.Fatal(err)
		}
		if e.ID == 0 || e.CreatedAt.IsZero() {
			t.Fatalf("entry not filled in: %+v", e)
		}
	}
	all, err := s.ListAudit(ctx, store.AuditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if ids := auditIDs(all); !slices.Equal(ids, []int64{entries[3].ID, entries[2].ID, entries[1].ID, entries[0].ID}) {
		t.Fatalf("order = %v, want newest first", ids)
	}
	got := all[2]
	if got.Actor != "root" || got.ActorID != 1 || got.Action != "user.update" || got.Target != "user:2" ||
		!got.CreatedAt.Equal(t0.Add(time.Minute)) || string(got.Before) != `{"quota":0}` || string(got.After) != `{"quota":5}` {
		t.Fatalf("entry read back as %+v (before %s after %s)", got, got.Before, got.After)
	}
	if all[1].Before != nil || all[1].After != nil {
		t.Fatalf("empty before/after read back as %q %q, want nil", all[1].Before, all[1].After)
	}
	for _, c := range []struct {
		name string
		f    store.AuditFilter
		want []int64
	}{
		{"actor", store.AuditFilter{Actor: "root"}, []int64{entries[1].ID, entries[0].ID}},
		{"action exactly", store.AuditFilter{Action: "user.update"}, []int64{entries[1].ID}},
		{"action prefix", store.AuditFilter{Action: "user."}, []int64{entries[1].ID, entries[0].ID}},
		{"target", store.AuditFilter{Target: "user:2"}, []int64{entries[1].ID, entries[0].ID}},
		{"since", store.AuditFilter{Since: t0.Add(time.Minute)}, []int64{entries[3].ID, entries[2].ID, entries[1].ID}},
		{"until", store.AuditFilter{Until: t0.Add(time.Minute)}, []int64{entries[0].ID}},
		{"page", store.AuditFilter{BeforeID: entries[2].ID, Limit: 1}, []int64{entries[1].ID}},
		{"nothing", store.AuditFilter{Actor: "nobody"}, []int64{}},
	} {
		got, err := s.ListAudit(ctx, c.f)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if ids := auditIDs(got); !slices.Equal(ids, c.want) {
			t.Fatalf("%s: ids %v, want %v", c.name, ids, c.want)
		}
	}
}

func auditIDs(es []*store.AuditEntry) []int64 {
	out := []int64{}
	for _, e := range es {
		out = append(out, e.ID)
	}
	return out
}

func testListUsageOperatorFilters(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	u := mustUser(t, s, "u", 1_000_000)
	k1, k2 := mustToken(t, s, u.ID, "key-one"), mustToken(t, s, u.ID, "key-two")
	base := time.Now().UTC().Truncate(24 * time.Hour).Add(-12 * time.Hour) // yesterday noon: one day
	rows := []*store.UsageLog{
		{UserID: u.ID, TokenID: k1.ID, Model: "m", Channel: "a", Status: 200, RequestID: "req-1", UpstreamRequestID: "up-1",
			PromptTokens: 1000, CompletionTokens: 10, CachedTokens: 800},
		{UserID: u.ID, TokenID: k2.ID, Model: "m", Channel: "b", Status: 429, RequestID: "req-2"},
		{UserID: u.ID, TokenID: k1.ID, Model: "m", Channel: "a", Status: 502, RequestID: "req-3"},
		{UserID: u.ID, TokenID: k2.ID, Model: "m", Channel: "", Status: 499, RequestID: "req-4"},
		{UserID: u.ID, TokenID: k1.ID, Model: "m", Channel: "b", Status: 201, RequestID: "req-5"},
	}
	for i, r := range rows {
		r.CreatedAt = base.Add(time.Duration(i) * time.Second)
	}
	if err := s.SettleBatch(ctx, rows); err != nil {
		t.Fatal(err)
	}
	id := func(i int) int64 { return rows[i].ID }
	for _, c := range []struct {
		name string
		f    store.UsageFilter
		want []int64
	}{
		{"key", store.UsageFilter{TokenID: k1.ID}, []int64{id(4), id(2), id(0)}},
		{"channel", store.UsageFilter{Channel: "b"}, []int64{id(4), id(1)}},
		{"ok", store.UsageFilter{Status: store.UsageStatusOK}, []int64{id(4), id(0)}},
		{"error", store.UsageFilter{Status: store.UsageStatusError}, []int64{id(3), id(2), id(1)}},
		{"one status", store.UsageFilter{Status: "429"}, []int64{id(1)}},
		{"request id", store.UsageFilter{RequestID: "req-3"}, []int64{id(2)}},
		{"upstream request id", store.UsageFilter{RequestID: "up-1"}, []int64{id(0)}},
		{"key and error", store.UsageFilter{TokenID: k1.ID, Status: store.UsageStatusError}, []int64{id(2)}},
		{"key, paged", store.UsageFilter{TokenID: k1.ID, Limit: 1,
			After: &store.UsageCursor{CreatedAt: rows[4].CreatedAt, ID: id(4)}}, []int64{id(2)}},
		{"channel, user and time", store.UsageFilter{UserID: u.ID, Channel: "a", Since: rows[1].CreatedAt}, []int64{id(2)}},
		{"nothing", store.UsageFilter{Channel: "none"}, []int64{}},
	} {
		got, err := s.ListUsage(ctx, c.f)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		ids := []int64{}
		for _, l := range got {
			ids = append(ids, l.ID)
		}
		if !slices.Equal(ids, c.want) {
			t.Fatalf("%s: ids %v, want %v", c.name, ids, c.want)
		}
	}
	if _, err := s.ListUsage(ctx, store.UsageFilter{Status: "bad"}); err == nil {
		t.Fatal("status \"bad\" was accepted")
	}
	testUsageTotals(t, s, rows, k1.ID)
}

// testUsageTotals sums rows (all of one day) per channel and per key.
func testUsageTotals(t *testing.T, s store.Store, rows []*store.UsageLog, k1 int64) {
	ctx := context.Background()
	day := rows[0].CreatedAt.UTC().Truncate(24 * time.Hour)
	byChannel, err := s.UsageTotals(ctx, store.UsageFilter{}, store.ByChannel)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]store.UsageTotal{}
	for _, tot := range byChannel {
		if !tot.Day.Equal(day) {
			t.Fatalf("day %v, want %v", tot.Day, day)
		}
		got[tot.Key] = tot
	}
	if len(got) != 3 || got["a"].Requests != 2 || got["a"].Errors != 1 || got["b"].Requests != 2 || got["b"].Errors != 1 ||
		got[""].Requests != 1 || got[""].Errors != 1 {
		t.Fatalf("by channel: %+v", byChannel)
	}
	if a := got["a"]; a.PromptTokens != 1000 || a.CachedTokens != 800 || a.Tokens != 1010 {
		t.Fatalf("channel a's tokens (the prompt cache's share): %+v", a)
	}
	byKey, err := s.UsageTotals(ctx, store.UsageFilter{Status: store.UsageStatusError}, store.ByToken)
	if err != nil {
		t.Fatal(err)
	}
	for _, tot := range byKey {
		if want := fmt.Sprint(k1); tot.Key == want && (tot.Requests != 1 || tot.Errors != 1) {
			t.Fatalf("key %s's errors: %+v", want, tot)
		}
	}
	if len(byKey) != 2 {
		t.Fatalf("errors by key: %+v", byKey)
	}
	if _, err := s.UsageTotals(ctx, store.UsageFilter{}, "password"); err == nil {
		t.Fatal("an unknown group was accepted")
	}
}

func testListUsersSearch(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	for _, n := range []string{"Alice", "bob", "malice_x", "carol", "a%b"} {
		mustUser(t, s, n, 0)
	}
	for _, c := range []struct {
		search string
		want   []string
	}{
		{"ali", []string{"Alice", "malice_x"}},
		{"ALICE", []string{"Alice", "malice_x"}},
		{"_", []string{"malice_x"}},
		{"%", []string{"a%b"}},
		{"zzz", nil},
	} {
		got, err := s.ListUsers(ctx, store.UserFilter{Search: c.search})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, u := range got {
			names = append(names, u.Username)
		}
		if !slices.Equal(names, c.want) {
			t.Fatalf("search %q = %v, want %v", c.search, names, c.want)
		}
	}
	// pages continue within the search
	first, err := s.ListUsers(ctx, store.UserFilter{Search: "ali", Limit: 1})
	if err != nil || len(first) != 1 {
		t.Fatalf("first page: %v %v", first, err)
	}
	next, err := s.ListUsers(ctx, store.UserFilter{Search: "ali", AfterID: first[0].ID})
	if err != nil || len(next) != 1 || next[0].Username != "malice_x" {
		t.Fatalf("second page: %v %v", next, err)
	}
}

func testRedemptionCodeBatches(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	var codes []*store.RedemptionCode
	for i := range 3 {
		codes = append(codes, &store.RedemptionCode{Code: fmt.Sprintf("SPRING%d", i), Quota: 5, Name: "spring-promo"})
	}
	codes = append(codes, &store.RedemptionCode{Code: "LONE", Quota: 5},
		&store.RedemptionCode{Code: "AUTUMNX", Quota: 5, Name: "Autumn"})
	if err := s.CreateRedemptionCodes(ctx, codes); err != nil {
		t.Fatal(err)
	}
	got, err := s.ListRedemptionCodes(ctx, store.CodeFilter{Name: "spring-promo"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].Name != "spring-promo" || got[0].Code != "SPRING2" {
		t.Fatalf("batch = %+v", got)
	}
	for _, c := range []struct {
		search string
		want   []string
	}{
		{"SPRING-", []string{"SPRING2", "SPRING1", "SPRING0"}},
		{"autumn", []string{"AUTUMNX"}},
		{"lone", []string{"LONE"}},
		{"1", []string{"SPRING1"}},
	} {
		got, err := s.ListRedemptionCodes(ctx, store.CodeFilter{Search: c.search})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, code := range got {
			names = append(names, code.Code)
		}
		if !slices.Equal(names, c.want) {
			t.Fatalf("search %q = %v, want %v", c.search, names, c.want)
		}
	}
	if got, err := s.ListRedemptionCodes(ctx, store.CodeFilter{Name: "spring"}); err != nil || len(got) != 0 {
		t.Fatalf("a part of a batch's name matched by Name: %v %v", got, err)
	}
}
