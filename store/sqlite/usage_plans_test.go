package sqlite

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/store"
)

// planStore is an empty store with the day table of at, 2026-11-20.
func planStore(t *testing.T) (s *Store, at time.Time, day int64) {
	t.Helper()
	st, err := Open(filepath.Join(t.TempDir(), "plans.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	s = st.(*Store)
	at = time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	day = at.UnixMilli() / store.MsPerDay
	if _, err := s.ensureDay(context.Background(), s.w, day); err != nil {
		t.Fatal(err)
	}
	return s, at, day
}

// TestUsageFilterPlans checks the query plan of each usage filter the
// console and the API send (issue 34: p95 under 200 ms at 50 million rows):
// each walks an index whose leading columns are the filter's, newest
// first, with no sort of the rows it finds (no temporary b-tree), so a page
// costs about its 20 rows however big the table is. The gateway runs no
// ANALYZE, so these are the plans a large file gets too. Both kinds of
// usage table are checked: a day's (usagedays.go) and usage_logs, which
// keeps the rows of before the day tables.
func TestUsageFilterPlans(t *testing.T) {
	s, at, day := planStore(t)
	after := &store.UsageCursor{CreatedAt: at, ID: 99}
	for _, c := range []struct {
		name  string
		f     store.UsageFilter
		idCol string
		index string // the index's name after its table's; "" for any index
	}{
		{"newest", store.UsageFilter{}, "", "_created_at"},
		{"newest, next page", store.UsageFilter{After: after}, "", "_created_at"},
		{"time range", store.UsageFilter{Since: at, Until: at.AddDate(0, 0, 1)}, "", "_created_at"},
		{"user", store.UsageFilter{UserID: 3}, "", "_user_id_created_at"},
		{"user, next page", store.UsageFilter{UserID: 3, After: after}, "", "_user_id_created_at"},
		{"user and time", store.UsageFilter{UserID: 3, Since: at, Until: at.AddDate(0, 0, 1)}, "", "_user_id_created_at"},
		{"user and model", store.UsageFilter{UserID: 3, Model: "m"}, "", "_user_id_model_created_at"},
		{"user and model, next page", store.UsageFilter{UserID: 3, Model: "m", After: after}, "", "_user_id_model_created_at"},
		{"model", store.UsageFilter{Model: "m"}, "", "_model_created_at"},
		{"model and time", store.UsageFilter{Model: "m", Since: at}, "", "_model_created_at"},
		{"key", store.UsageFilter{TokenID: 5}, "", "_token_id_created_at"},
		{"key and time", store.UsageFilter{TokenID: 5, Since: at}, "", "_token_id_created_at"},
		{"channel", store.UsageFilter{Channel: "c"}, "", "_channel_created_at"},
		{"channel, failed, 7 days", store.UsageFilter{Channel: "c", Status: store.UsageStatusError, Since: at}, "", ""},
		{"failed", store.UsageFilter{Status: store.UsageStatusError}, "", "_failed_created_at"},
		{"one status", store.UsageFilter{Status: "429"}, "", "_failed_created_at"},
		{"one status and time", store.UsageFilter{Status: "429", Since: at}, "", "_failed_created_at"},
		{"succeeded", store.UsageFilter{Status: store.UsageStatusOK}, "", "_created_at"},
		{"user and failed", store.UsageFilter{UserID: 3, Status: store.UsageStatusError}, "", ""},
		{"request id", store.UsageFilter{RequestID: "r"}, "request_id", "_request_id"},
		{"request id and user", store.UsageFilter{RequestID: "r", UserID: 3}, "request_id", "_request_id"},
	} {
		for _, table := range []string{usageDayTable(day), legacyUsageTable} {
			q, args, err := listUsageQuery(table, c.f, c.idCol, nil)
			if err != nil {
				t.Fatal(err)
			}
			plan := explain(t, s, q, args)
			t.Logf("%s, %s: %s", c.name, table, plan)
			// a request id's row or two are sorted, nothing else is
			sorts := strings.Contains(plan, "TEMP B-TREE") && c.idCol == ""
			if sorts || !strings.Contains(plan, "USING INDEX") && !strings.Contains(plan, "USING COVERING INDEX") {
				t.Errorf("%s, %s: the plan sorts or scans: %s", c.name, table, plan)
			}
			if c.index != "" && !strings.Contains(plan+" ", "INDEX "+table+c.index+" ") {
				t.Errorf("%s, %s: the plan does not use %s%s: %s", c.name, table, table, c.index, plan)
			}
		}
	}
}

// TestUpstreamIDRangePlans: a lookup by an upstream request id reads the
// day's rows by the id ranges its filters leave (upstreamblooms.go), with
// any other filter, never a walk of an index through the whole day.
func TestUpstreamIDRangePlans(t *testing.T) {
	s, at, day := planStore(t)
	table := usageDayTable(day)
	ranges := []idRange{{day<<32 + 1, day<<32 + 900}, {day<<32 + 5000, day<<32 + 5100}}
	for _, f := range []store.UsageFilter{
		{RequestID: "chatcmpl-x"},
		{RequestID: "chatcmpl-x", UserID: 3},
		{RequestID: "chatcmpl-x", Model: "m", Since: at},
		{RequestID: "chatcmpl-x", After: &store.UsageCursor{CreatedAt: at, ID: 99}},
	} {
		q, args, err := listUsageQuery(table, f, "upstream_request_id", ranges)
		if err != nil {
			t.Fatal(err)
		}
		plan := explain(t, s, q, args)
		t.Logf("%+v: %s", f, plan)
		if strings.Count(plan, "INTEGER PRIMARY KEY (rowid>? AND rowid<?)") != len(ranges) || strings.Contains(plan, "USING INDEX") {
			t.Errorf("%+v: the plan does not read the rows by their id ranges: %s", f, plan)
		}
	}
	// a day's part of the filters, and a day's filters to drop, by the
	// filters' key: a few pages, not the table
	lo, hi := dayIDs(day)
	for _, c := range []struct {
		q    string
		args []any
	}{
		{`SELECT first_id, last_id, bits FROM usage_upstream_blooms WHERE part = ? AND first_id BETWEEN ? AND ? ORDER BY first_id`, []any{3, lo, hi}},
		{`SELECT 1 FROM usage_upstream_blooms WHERE ` + bloomDayWhere, []any{lo, hi}},
	} {
		plan := explain(t, s, c.q, c.args)
		if !strings.Contains(plan, "SEARCH usage_upstream_blooms USING PRIMARY KEY (part=? AND first_id>? AND first_id<?)") || strings.Contains(plan, "TEMP B-TREE") {
			t.Errorf("%s: %s", c.q, plan)
		}
	}
}

// TestUsageDayPlans: the rollups a page reads are read by their key's
// range, never by walking every user's days.
func TestUsageDayPlans(t *testing.T) {
	st, err := Open(filepath.Join(t.TempDir(), "plans.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s := st.(*Store)
	for _, c := range []struct{ name, q, index string }{
		{"a user's models (model_contains)", `SELECT ` + store.UsageDayColumns + ` FROM usage_daily_models
			WHERE day >= ? AND user_id = ? ORDER BY day, user_id, model`, "usage_daily_models_user_id_day"},
		{"the dashboard's totals", `SELECT day, key FROM usage_daily_totals WHERE grp = ? AND day >= ? ORDER BY day, key`, "PRIMARY KEY"},
		{"a user's spend", `SELECT day, cost FROM usage_daily WHERE user_id = ? AND day >= ? ORDER BY day`, "PRIMARY KEY"},
	} {
		plan := explain(t, s, c.q, []any{1, 2})
		t.Logf("%s: %s", c.name, plan)
		if !strings.Contains(plan, c.index) {
			t.Errorf("%s: the plan does not use %s: %s", c.name, c.index, plan)
		}
	}
}

func explain(t *testing.T, s *Store, q string, args []any) string {
	t.Helper()
	rows, err := s.r.QueryContext(context.Background(), `EXPLAIN QUERY PLAN `+q, args...)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var steps []string
	for rows.Next() {
		var id, parent, unused int
		var detail string
		if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
			t.Fatal(err)
		}
		steps = append(steps, detail)
	}
	return strings.Join(steps, "; ")
}
