package sqlite

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/store"
)

// TestUsageFilterPlans checks the query plan of each usage filter the
// console and the API send (issue 34: p95 under 200 ms at 50 million rows):
// each walks an index whose leading columns are the filter's, newest
// first, with no sort of the rows it finds (no temporary b-tree), so a page
// costs about its 20 rows however big the table is. The gateway runs no
// ANALYZE, so these are the plans a large file gets too.
func TestUsageFilterPlans(t *testing.T) {
	st, err := Open(filepath.Join(t.TempDir(), "plans.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	s := st.(*Store)
	at := time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC)
	after := &store.UsageCursor{CreatedAt: at, ID: 99}
	for _, c := range []struct {
		name  string
		f     store.UsageFilter
		idCol string
		index string // "" for any index
	}{
		{"newest", store.UsageFilter{}, "", "usage_logs_created_at"},
		{"newest, next page", store.UsageFilter{After: after}, "", "usage_logs_created_at"},
		{"time range", store.UsageFilter{Since: at, Until: at.AddDate(0, 0, 1)}, "", "usage_logs_created_at"},
		{"user", store.UsageFilter{UserID: 3}, "", "usage_logs_user_id_created_at"},
		{"user, next page", store.UsageFilter{UserID: 3, After: after}, "", "usage_logs_user_id_created_at"},
		{"user and time", store.UsageFilter{UserID: 3, Since: at, Until: at.AddDate(0, 0, 1)}, "", "usage_logs_user_id_created_at"},
		{"user and model", store.UsageFilter{UserID: 3, Model: "m"}, "", "usage_logs_user_id_model_created_at"},
		{"user and model, next page", store.UsageFilter{UserID: 3, Model: "m", After: after}, "", "usage_logs_user_id_model_created_at"},
		{"model", store.UsageFilter{Model: "m"}, "", "usage_logs_model_created_at"},
		{"model and time", store.UsageFilter{Model: "m", Since: at}, "", "usage_logs_model_created_at"},
		{"key", store.UsageFilter{TokenID: 5}, "", "usage_logs_token_id_created_at"},
		{"key and time", store.UsageFilter{TokenID: 5, Since: at}, "", "usage_logs_token_id_created_at"},
		{"channel", store.UsageFilter{Channel: "c"}, "", "usage_logs_channel_created_at"},
		{"channel, failed, 7 days", store.UsageFilter{Channel: "c", Status: store.UsageStatusError, Since: at}, "", ""},
		{"failed", store.UsageFilter{Status: store.UsageStatusError}, "", "usage_logs_failed_created_at"},
		{"one status", store.UsageFilter{Status: "429"}, "", "usage_logs_failed_created_at"},
		{"one status and time", store.UsageFilter{Status: "429", Since: at}, "", "usage_logs_failed_created_at"},
		{"succeeded", store.UsageFilter{Status: store.UsageStatusOK}, "", "usage_logs_created_at"},
		{"user and failed", store.UsageFilter{UserID: 3, Status: store.UsageStatusError}, "", ""},
		{"request id", store.UsageFilter{RequestID: "r"}, "request_id", "usage_logs_request_id"},
		{"request id and user", store.UsageFilter{RequestID: "r", UserID: 3}, "request_id", "usage_logs_request_id"},
	} {
		q, args, err := listUsageQuery(c.f, c.idCol)
		if err != nil {
			t.Fatal(err)
		}
		plan := explain(t, s, q, args)
		t.Logf("%s: %s", c.name, plan)
		// a request id's row or two are sorted, nothing else is
		sorts := strings.Contains(plan, "TEMP B-TREE") && c.idCol == ""
		if sorts || !strings.Contains(plan, "USING INDEX") && !strings.Contains(plan, "USING COVERING INDEX") {
			t.Errorf("%s: the plan sorts or scans: %s", c.name, plan)
		}
		if c.index != "" && !strings.Contains(plan+" ", "INDEX "+c.index+" ") {
			t.Errorf("%s: the plan does not use %s: %s", c.name, c.index, plan)
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
