package postgres

import (
	"context"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/bench/usagegen"
)

// LoadUsageDay (usagegen's FastFill) writes what SettleBatch (Fill)
// writes for the same generated rows: every row with the same id, the
// three rollup tables, the users' balances and counts and the keys' used
// quota. The rows end now, so today's day goes through its existing
// partition and the days before through tables made apart and attached.
func TestLoadUsageDayEqualsSettleBatch(t *testing.T) {
	ctx := context.Background()
	cfg := usagegen.Config{Rows: 5000, Days: 3, Users: 20, Models: 6, Channels: 4, Batch: 700, End: time.Now()}
	dump := func(fast bool) map[string]string {
		s, err := Open(testCluster.Database(t))
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		g := usagegen.New(cfg)
		fill := g.Fill
		if fast {
			fill = g.FastFill
		}
		if err := fill(ctx, s, nil); err != nil {
			t.Fatalf("fast %v: %v", fast, err)
		}
		out := map[string]string{}
		for name, q := range map[string]string{
			"usage_logs":         `SELECT * FROM usage_logs ORDER BY id`,
			"usage_daily":        `SELECT * FROM usage_daily ORDER BY user_id, day`,
			"usage_daily_models": `SELECT * FROM usage_daily_models ORDER BY day, user_id, model`,
			"usage_daily_totals": `SELECT * FROM usage_daily_totals ORDER BY grp, day, key`,
			"users":              `SELECT id, quota, used_quota, request_count FROM users ORDER BY id`,
			"tokens":             `SELECT id, used_quota FROM tokens ORDER BY id`,
			"next id":            `SELECT nextval(pg_get_serial_sequence('usage_logs', 'id'))`,
		} {
			var text string
			if err := s.(*Store).pool.QueryRow(ctx, `SELECT COUNT(*) || E'\n' || COALESCE(string_agg(t::text, E'\n'), '') FROM (`+q+`) t`).Scan(&text); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			out[name] = text
		}
		return out
	}
	slow, fast := dump(false), dump(true)
	if n := slow["usage_logs"][:5]; n != "5000\n" {
		t.Fatalf("SettleBatch wrote %q rows", n)
	}
	for name, want := range slow {
		if got := fast[name]; got != want {
			t.Errorf("%s: the bulk load wrote\n%.2000s\nSettleBatch\n%.2000s", name, diffFrom(got, want), diffFrom(want, got))
		}
	}
}

// diffFrom is a from its first difference with b.
func diffFrom(a, b string) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	for i > 0 && a[i-1] != '\n' {
		i--
	}
	return a[i:]
}
