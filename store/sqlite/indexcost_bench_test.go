package sqlite

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/caddy-model-gateway/gateway/bench/usagegen"
	"github.com/caddy-model-gateway/gateway/store"
)

// BenchmarkUsageIndexCost prices each index of usage_logs for the usage
// writer: the same batches of 500 rows (the writer's batch at load:
// hundreds of rows a commit) through SettleBatch, on a table of 100,000
// rows of bench/usagegen's data set, with every index and without each one
// in turn. It reports µs/row and the file's bytes per row; the difference
// to "all" is what the index costs. Not part of `make test`:
//
//	go test -run '^$' -bench UsageIndexCost -benchtime 200x ./store/sqlite
func BenchmarkUsageIndexCost(b *testing.B) {
	const preload, batch = 100_000, 500
	variants := []string{"all"}
	{
		st := openBench(b, filepath.Join(b.TempDir(), "names.db"))
		rs, err := st.w.Query(`SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'usage_logs' AND sql IS NOT NULL ORDER BY name`)
		if err != nil {
			b.Fatal(err)
		}
		for rs.Next() {
			var n string
			if err := rs.Scan(&n); err != nil {
				b.Fatal(err)
			}
			variants = append(variants, n)
		}
		rs.Close()
		st.Close()
	}
	for _, without := range variants {
		b.Run("without="+without, func(b *testing.B) {
			ctx := context.Background()
			path := filepath.Join(b.TempDir(), "cost.db")
			st := openBench(b, path)
			defer st.Close()
			if without != "all" {
				if _, err := st.w.Exec(`DROP INDEX ` + without); err != nil {
					b.Fatal(err)
				}
			}
			g := usagegen.New(usagegen.Config{Rows: preload + int64(b.N)*batch, Days: 90, Batch: batch})
			if err := g.Setup(ctx, st); err != nil {
				b.Fatal(err)
			}
			for written := 0; written < preload; written += 10 * batch {
				var rows []*store.UsageLog
				for range 10 {
					rows = append(rows, g.Next()...)
				}
				if err := st.SettleBatch(ctx, rows); err != nil {
					b.Fatal(err)
				}
			}
			batches := make([][]*store.UsageLog, b.N)
			for i := range batches {
				batches[i] = g.Next()
			}
			// the preload's pages into the file, so no checkpoint of them is timed
			if _, err := st.w.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for i := range b.N {
				if err := st.SettleBatch(ctx, batches[i]); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*batch), "µs/row")
			if _, err := st.w.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
				b.Fatal(err)
			}
			if fi, err := os.Stat(path); err == nil {
				b.ReportMetric(float64(fi.Size())/float64(preload+b.N*batch), "bytes/row")
			}
		})
	}
}

func openBench(b *testing.B, path string) *Store {
	st, err := Open(path)
	if err != nil {
		b.Fatal(err)
	}
	return st.(*Store)
}
