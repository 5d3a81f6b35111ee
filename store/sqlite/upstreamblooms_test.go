package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/store"
)

// A filter says yes to every id it holds, and to about 0.05 % of the
// others.
func TestBloomFilter(t *testing.T) {
	bits := make([]byte, bloomParts*bloomPartBytes)
	for i := range bloomChunkIDs {
		bloomAdd(bits, fmt.Sprintf("chatcmpl-%d", i))
	}
	partOf := func(id string) []byte {
		p := bloomPartOf(id)
		return bits[p*bloomPartBytes : (p+1)*bloomPartBytes]
	}
	perPart := make([]int, bloomParts)
	for i := range bloomChunkIDs {
		id := fmt.Sprintf("chatcmpl-%d", i)
		perPart[bloomPartOf(id)]++
		if !bloomMayHold(partOf(id), id) {
			t.Fatalf("%s added, not held", id)
		}
	}
	if lo, hi := slices.Min(perPart), slices.Max(perPart); lo < 32 || hi > 96 {
		t.Errorf("ids per part %v: the hash does not spread them", perPart)
	}
	fp := 0
	const others = 100_000
	for i := range others {
		id := fmt.Sprintf("msg_%d", i)
		if bloomMayHold(partOf(id), id) {
			fp++
		}
	}
	if rate := float64(fp) / others; rate > 0.002 {
		t.Errorf("%.3f %% false positives, want about 0.05 %%", rate*100)
	}
	if !bloomMayHold(nil, "x") {
		t.Error("no filter must mean: search the range")
	}
}

func TestIDRanges(t *testing.T) {
	r := func(a, b int64) idRange { return idRange{a, b} }
	if got := uncovered(r(1, 100), []idRange{r(1, 10), r(21, 30), r(25, 40), r(90, 120)}); !slices.Equal(got, []idRange{r(11, 20), r(41, 89)}) {
		t.Errorf("uncovered: %v", got)
	}
	if got := uncovered(r(5, 8), nil); !slices.Equal(got, []idRange{r(5, 8)}) {
		t.Errorf("uncovered by nothing: %v", got)
	}
	if got := uncovered(r(5, 8), []idRange{r(1, 20)}); len(got) != 0 {
		t.Errorf("covered whole: %v", got)
	}
	// touching and overlapping ranges join; then the smallest gaps go
	got := mergeIDRanges([]idRange{r(50, 60), r(1, 10), r(11, 12), r(5, 8), r(100, 100), r(63, 70)}, 2)
	if !slices.Equal(got, []idRange{r(1, 12), r(50, 100)}) {
		t.Errorf("merged to 2: %v", got)
	}
	many := make([]idRange, 500)
	for i := range many {
		many[i] = r(int64(i)*10, int64(i)*10+3)
	}
	got = mergeIDRanges(slices.Clone(many), maxIDRanges)
	if len(got) != maxIDRanges || got[0].first != 0 || got[len(got)-1].last != many[len(many)-1].last {
		t.Fatalf("500 ranges merged to %d: %v ... %v", len(got), got[0], got[len(got)-1])
	}
	for _, m := range many { // a superset of what was asked
		if !slices.ContainsFunc(got, func(g idRange) bool { return g.first <= m.first && m.last <= g.last }) {
			t.Fatalf("%v lost in merging", m)
		}
	}
}

// The lookup by an upstream id with no time range reads only the id
// ranges the filters leave, and misses no row: rows of batches of a few
// (one filter for many batches), of a store restarted, of a task's
// settlement, and rows no filter covers (written by an earlier build);
// retention takes a day's filters with it, and a day made again does not
// meet the filters of the one dropped.
func TestUpstreamIDFilters(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "blooms.db")
	open := func() *Store {
		st, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		return st.(*Store)
	}
	s := open()
	now := time.Now().UTC()
	today := now.UnixMilli() / store.MsPerDay
	n := 0
	row := func(at time.Time, up string) *store.UsageLog {
		n++
		return &store.UsageLog{CreatedAt: at, UserID: 1, TokenID: 2, Model: "gpt-4o-mini", Channel: "c", Status: 200,
			RequestID: fmt.Sprintf("%032x", n), UpstreamRequestID: up, Key: fmt.Sprintf("blooms-%d", n)}
	}
	var ups []string
	// a light load: 40 batches of 3 rows in today and 2 days ago
	for b := range 40 {
		var rows []*store.UsageLog
		for i := range 3 {
			up := fmt.Sprintf("chatcmpl-%d-%d", b, i)
			ups = append(ups, up)
			rows = append(rows, row(now.Add(-time.Duration(b%2)*48*time.Hour), up))
		}
		rows = append(rows, row(now, "")) // a refused request: no upstream id
		if err := s.SettleBatch(ctx, rows); err != nil {
			t.Fatal(err)
		}
	}
	filters := func(d int64) int {
		lo, hi := dayIDs(d)
		var c int
		if err := s.r.QueryRow(`SELECT COUNT(DISTINCT first_id) FROM usage_upstream_blooms WHERE first_id BETWEEN ? AND ?`, lo, hi).Scan(&c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	find := func(up string) []*store.UsageLog {
		t.Helper()
		got, err := s.ListUsage(ctx, store.UsageFilter{RequestID: up})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	findAll := func() {
		t.Helper()
		for _, up := range ups {
			if got := find(up); len(got) != 1 || got[0].UpstreamRequestID != up {
				t.Fatalf("%s: found %d rows", up, len(got))
			}
		}
	}
	// today's run is open: its filter is in memory, its rows a range no
	// filter covers; two days ago takes late rows only, each batch's run
	// written at once
	if f := filters(today); f != 0 {
		t.Errorf("%d filters of today's open run written", f)
	}
	if f := filters(today - 2); f != 20 {
		t.Errorf("%d filters of the late rows' 20 batches, want 20", f)
	}
	findAll()

	// rows written by a build before the filters: a range no filter covers
	old := "chatcmpl-written-before"
	if _, err := s.w.Exec(`INSERT INTO `+usageDayTable(today)+` (id, created_at, user_id, upstream_request_id, row_key)
		VALUES ((SELECT MAX(id) + 1 FROM `+usageDayTable(today)+`), ?, 1, ?, 'before-1')`, now.UnixMilli(), old); err != nil {
		t.Fatal(err)
	}
	ups = append(ups, old)
	var beforeID int64
	s.r.QueryRow(`SELECT id FROM ` + usageDayTable(today) + ` WHERE row_key = 'before-1'`).Scan(&beforeID)
	s.Close() // writes the open run's filter
	s = open()
	defer func() { s.Close() }()
	var first, last int64
	lo, hi := dayIDs(today)
	if err := s.r.QueryRow(`SELECT first_id, last_id FROM usage_upstream_blooms WHERE part = 0 AND first_id BETWEEN ? AND ?`, lo, hi).Scan(&first, &last); err != nil ||
		first != today<<32+1 || last != beforeID-1 {
		t.Errorf("today's run written at close: %d..%d (%v), want %d..%d", first, last, err, today<<32+1, beforeID-1)
	}
	// after the restart: a new run, open, after the row no filter covers
	after := "chatcmpl-after-restart"
	ups = append(ups, after)
	if err := s.SettleBatch(ctx, []*store.UsageLog{row(now, after)}); err != nil {
		t.Fatal(err)
	}
	findAll()
	if got, err := s.ListUsage(ctx, store.UsageFilter{RequestID: ups[7], UserID: 1, Since: now.Add(-72 * time.Hour)}); err != nil || len(got) != 1 {
		t.Fatalf("%s with a user and a time: %d rows, %v", ups[7], len(got), err)
	}
	// what the filters leave of today for an id of no row: the row no
	// filter covers and the open run, nothing of the written run's range
	ranges, filtered, err := s.upstreamIDRanges(ctx, today, "chatcmpl-of-no-row")
	if err != nil || !filtered {
		t.Fatal(filtered, err)
	}
	if !slices.Equal(ranges, []idRange{{beforeID, beforeID + 1}}) {
		t.Errorf("ranges for an id of no row: %v, want only %d..%d, which no filter covers", ranges, beforeID, beforeID+1)
	}
	ranges, _, _ = s.upstreamIDRanges(ctx, today, ups[0])
	if !slices.Equal(ranges, []idRange{{today<<32 + 1, beforeID + 1}}) {
		t.Errorf("ranges for %s: %v, want its run's joined to those after it", ups[0], ranges)
	}
	// a run is written once its 1,024 ids are in, the next one open
	for b := range 11 {
		var rows []*store.UsageLog
		for i := range 100 {
			up := fmt.Sprintf("chatcmpl-full-%d-%d", b, i)
			ups = append(ups, up)
			rows = append(rows, row(now, up))
		}
		if err := s.SettleBatch(ctx, rows); err != nil {
			t.Fatal(err)
		}
	}
	if f := filters(today); f != 2 {
		t.Errorf("%d filters today after 1,100 ids more, want 2 (the run closed, the full one)", f)
	}
	findAll()
	// rows with no upstream id fill a run too: a lookup that reads a run
	// reads at most bloomChunkRows rows
	for range 50 {
		rows := make([]*store.UsageLog, 100)
		for i := range rows {
			rows[i] = row(now, "")
		}
		if err := s.SettleBatch(ctx, rows); err != nil {
			t.Fatal(err)
		}
	}
	var longest int64
	if err := s.r.QueryRow(`SELECT MAX(last_id - first_id + 1) FROM usage_upstream_blooms WHERE part = 0 AND first_id BETWEEN ? AND ?`, lo, hi).Scan(&longest); err != nil || longest != bloomChunkRows {
		t.Errorf("the longest run today: %d rows (%v), want %d", longest, err, bloomChunkRows)
	}
	findAll()

	// retention drops a day with its filters; a late row makes the day
	// again, and a filter left behind (by an earlier build's retention)
	// is dropped with it rather than hiding the new rows
	two := today - 2
	if _, err := s.DropUsageDays(ctx, time.UnixMilli((today-1)*store.MsPerDay)); err != nil {
		t.Fatal(err)
	}
	if f := filters(two); f != 0 {
		t.Errorf("%d filters of a dropped day", f)
	}
	lo, _ = dayIDs(two)
	for part := range bloomParts {
		if _, err := s.w.Exec(`INSERT INTO usage_upstream_blooms (part, first_id, last_id, bits) VALUES (?, ?, ?, ?)`, part, lo+50, lo+100, make([]byte, bloomPartBytes)); err != nil {
			t.Fatal(err)
		}
	}
	var lateRows []*store.UsageLog
	for i := range 60 {
		lateRows = append(lateRows, row(now.Add(-48*time.Hour), fmt.Sprintf("chatcmpl-late-%d", i)))
	}
	if err := s.SettleBatch(ctx, lateRows); err != nil {
		t.Fatal(err)
	}
	// a row after them by a writer that leaves no filter, in the range of
	// the one left behind
	late := "chatcmpl-late-unfiltered"
	if _, err := s.w.Exec(`INSERT INTO `+usageDayTable(two)+` (id, created_at, user_id, upstream_request_id, row_key)
		VALUES (?, ?, 1, ?, 'late-1')`, lo+61, now.Add(-48*time.Hour).UnixMilli(), late); err != nil {
		t.Fatal(err)
	}
	for _, up := range []string{"chatcmpl-late-0", "chatcmpl-late-59", late} {
		if got := find(up); len(got) != 1 {
			t.Errorf("%s, of a day made again: found %d", up, len(got))
		}
	}
	if got := find(ups[3]); len(got) != 0 { // batch 1's: two days ago
		t.Errorf("%s, of the dropped day: found %d", ups[3], len(got))
	}
}
