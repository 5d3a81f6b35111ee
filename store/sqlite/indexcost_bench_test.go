package sqlite

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/bench/usagegen"
	"github.com/caddy-model-gateway/gateway/store"
)

// BenchmarkUsageIndexCost prices each index of a usage day table for the
// usage writer: the same batches of 500 rows (the writer's batch at load:
// hundreds of rows a commit) through SettleBatch, on a day of 100,000
// rows of bench/usagegen's data set (its last 24 hours, so two day
// tables), with every index and without each one in turn. It reports, per row written, the pages the commits wrote (WAL
// frames: what does not depend on the machine's load), the process's CPU
// and the wall time, and the file's bytes per row; the difference to "all"
// is what the index costs. Not part of `make test`:
//
//	go test -run '^$' -bench UsageIndexCost -benchtime 200x ./store/sqlite
func BenchmarkUsageIndexCost(b *testing.B) {
	const preload, batch = 100_000, 500
	variants := []string{"all"}
	today := time.Now().UnixMilli() / store.MsPerDay
	days := []int64{today - 1, today}
	{
		st := openBench(b, filepath.Join(b.TempDir(), "names.db"))
		if _, err := st.ensureDay(context.Background(), st.w, today); err != nil {
			b.Fatal(err)
		}
		// the row key's index stays: the writer's ON CONFLICT (row_key),
		// which makes a replayed journal idempotent, needs it
		t := usageDayTable(today)
		rs, err := st.w.Query(`SELECT substr(name, ?) FROM sqlite_master WHERE type = 'index' AND tbl_name = ?
			AND sql IS NOT NULL AND name != ? ORDER BY name`, len(t)+1, t, t+"_row_key")
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
	droppable := variants[1:]
	variants = append(variants, "every index it can")
	for _, without := range variants {
		b.Run("without="+without, func(b *testing.B) {
			ctx := context.Background()
			path := filepath.Join(b.TempDir(), "cost.db")
			st := openBench(b, path)
			defer st.Close()
			drop := []string{without}
			switch without {
			case "all":
				drop = nil
			case "every index it can":
				drop = droppable
			}
			for _, d := range days {
				if _, err := st.ensureDay(ctx, st.w, d); err != nil {
					b.Fatal(err)
				}
				for _, name := range drop {
					if _, err := st.w.Exec(`DROP INDEX ` + usageDayTable(d) + name); err != nil {
						b.Fatal(err)
					}
				}
			}
			g := usagegen.New(usagegen.Config{Rows: preload + int64(b.N)*batch, Days: 1, Batch: batch})
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
			// the preload's pages into the file, and no checkpoint while
			// timing: the WAL then holds every page the batches wrote
			if _, err := st.w.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
				b.Fatal(err)
			}
			if _, err := st.w.Exec(`PRAGMA wal_autocheckpoint = 0`); err != nil {
				b.Fatal(err)
			}
			cpu := cpuTime()
			b.ResetTimer()
			for i := range b.N {
				if err := st.SettleBatch(ctx, batches[i]); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			rows := float64(b.N * batch)
			b.ReportMetric(float64((cpuTime()-cpu).Microseconds())/rows, "cpu-µs/row")
			b.ReportMetric(float64(b.Elapsed().Microseconds())/rows, "µs/row")
			if fi, err := os.Stat(path + "-wal"); err == nil {
				// a WAL frame is a page and its 24-byte header, after the
				// file's 32-byte header
				b.ReportMetric(float64((fi.Size()-32)/(4096+24))/rows, "pages/row")
			}
			if _, err := st.w.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
				b.Fatal(err)
			}
			if fi, err := os.Stat(path); err == nil {
				b.ReportMetric(float64(fi.Size())/(preload+rows), "file-bytes/row")
			}
		})
	}
}

// cpuTime is the process's user and system CPU so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func openBench(b *testing.B, path string) *Store {
	st, err := Open(path)
	if err != nil {
		b.Fatal(err)
	}
	return st.(*Store)
}
