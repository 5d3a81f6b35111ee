package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/bench/usagegen"
)

// LoadUsageDay (usagegen's FastFill) writes what SettleBatch (Fill)
// writes for the same generated rows: every row with the same id, the
// three rollup tables, the users' balances and counts and the keys' used
// quota; the day tables have the same indexes.
func TestLoadUsageDayEqualsSettleBatch(t *testing.T) {
	ctx := context.Background()
	cfg := usagegen.Config{Rows: 5000, Days: 3, Users: 20, Models: 6, Channels: 4, Batch: 700, End: time.Now()}
	dump := func(fast bool) map[string]string {
		st, err := Open(filepath.Join(t.TempDir(), fmt.Sprint("fill-", fast, ".db")))
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		s := st.(*Store)
		g := usagegen.New(cfg)
		fill := g.Fill
		if fast {
			fill = g.FastFill
		}
		if err := fill(ctx, s, nil); err != nil {
			t.Fatalf("fast %v: %v", fast, err)
		}
		out := map[string]string{}
		queries := map[string]string{
			"usage_daily":        `SELECT * FROM usage_daily ORDER BY user_id, day`,
			"usage_daily_models": `SELECT * FROM usage_daily_models ORDER BY day, user_id, model`,
			"usage_daily_totals": `SELECT * FROM usage_daily_totals ORDER BY grp, day, key`,
			"users":              `SELECT id, quota, used_quota, request_count FROM users ORDER BY id`,
			"tokens":             `SELECT id, used_quota FROM tokens ORDER BY id`,
			"usage_days":         `SELECT day FROM usage_days ORDER BY day`,
			"indexes":            `SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name LIKE 'usage_logs_%' ORDER BY name`,
		}
		segs, err := s.usageSegments(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, g := range segs {
			queries[g.table] = `SELECT * FROM ` + g.table + ` ORDER BY id`
		}
		for name, q := range queries {
			rows, err := s.r.QueryContext(ctx, q)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			cols, _ := rows.Columns()
			var b strings.Builder
			n := 0
			for rows.Next() {
				vals := make([]any, len(cols))
				ptrs := make([]any, len(cols))
				for i := range vals {
					ptrs[i] = &vals[i]
				}
				if err := rows.Scan(ptrs...); err != nil {
					t.Fatal(err)
				}
				fmt.Fprintln(&b, vals...)
				n++
			}
			rows.Close()
			out[name] = fmt.Sprintf("%d\n%s", n, b.String())
		}
		return out
	}
	slow, fast := dump(false), dump(true)
	if !strings.HasPrefix(slow["usage_days"], "3\n") && !strings.HasPrefix(slow["usage_days"], "4\n") {
		t.Fatalf("SettleBatch made days %q", slow["usage_days"])
	}
	if len(fast) != len(slow) {
		t.Fatalf("the bulk load made %d tables' worth, SettleBatch %d", len(fast), len(slow))
	}
	var total int
	for name, want := range slow {
		if got := fast[name]; got != want {
			t.Errorf("%s: the bulk load wrote\n%.1500s\nSettleBatch\n%.1500s", name, got, want)
		}
		if strings.HasPrefix(name, "usage_logs_") {
			var n int
			fmt.Sscan(want, &n)
			total += n
		}
	}
	if total != 5000 {
		t.Fatalf("%d rows in the day tables, want 5000", total)
	}
}
