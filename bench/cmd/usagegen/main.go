// Command usagegen makes the usage data set of issue 34 (50 million rows by
// default) in a SQLite file or a PostgreSQL database, through the store, and
// times the console's and API's reads on it (-measure). See bench/README.md,
// "The usage store at scale".
//
//	go run ./bench/cmd/usagegen -driver sqlite -dsn /tmp/usage.db -rows 50000000 -days 90
//	go run ./bench/cmd/usagegen -driver sqlite -dsn /tmp/usage.db -fill=false -measure 50
//	go run ./bench/cmd/usagegen -driver postgres -dsn postgres://… -fast   # COPY a day at a time
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"time"

	"github.com/caddy-model-gateway/gateway/bench/usagegen"
	"github.com/caddy-model-gateway/gateway/store"
	_ "github.com/caddy-model-gateway/gateway/store/postgres"
	_ "github.com/caddy-model-gateway/gateway/store/sqlite"
)

func main() {
	d := usagegen.Defaults
	var cfg usagegen.Config
	driver := flag.String("driver", "sqlite", "store driver: sqlite or postgres")
	dsn := flag.String("dsn", "", "the database: a SQLite file, or a PostgreSQL URL")
	flag.Int64Var(&cfg.Rows, "rows", d.Rows, "usage rows to make")
	flag.IntVar(&cfg.Days, "days", d.Days, "days the rows span, ending now")
	flag.IntVar(&cfg.Users, "users", d.Users, "users (each with 1 to -keys keys)")
	flag.IntVar(&cfg.KeysPerUser, "keys", d.KeysPerUser, "most keys a user has")
	flag.IntVar(&cfg.Models, "models", d.Models, "models")
	flag.IntVar(&cfg.Channels, "channels", d.Channels, "channels")
	flag.IntVar(&cfg.FailedPermille, "failed", d.FailedPermille, "failed requests per thousand")
	flag.IntVar(&cfg.Batch, "batch", d.Batch, "rows per SettleBatch (one transaction)")
	flag.Uint64Var(&cfg.Seed, "seed", d.Seed, "random seed (the same seed makes the same rows)")
	fill := flag.Bool("fill", true, "make the data set (false: measure what is there)")
	fast := flag.Bool("fast", false, "make it a day at a time by the store's bulk load (PostgreSQL: COPY; SQLite: plain inserts; the day's indexes built after) rather than SettleBatch")
	measure := flag.Int("measure", 0, "time every filter and dashboard sum this many times and print p50/p95")
	retention := flag.Int("retention", 0, "after the rest, delete the oldest day in batches of this many rows (as usage_retention does) and time it")
	flag.Parse()
	if *dsn == "" {
		fmt.Fprintln(os.Stderr, "usagegen: -dsn is required (a SQLite file or a PostgreSQL URL)")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *driver, *dsn, cfg, *fill, *fast, *measure, *retention); err != nil {
		fmt.Fprintln(os.Stderr, "usagegen:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, driver, dsn string, cfg usagegen.Config, fill, fast bool, measure, retention int) error {
	began := time.Now()
	st, err := store.Open(driver, dsn)
	if err != nil {
		return err
	}
	defer st.Close()
	fmt.Printf("opened (migrations included) in %s\n", time.Since(began).Round(time.Millisecond))
	if fill {
		g := usagegen.New(cfg)
		began, last := time.Now(), time.Now()
		fillf := g.Fill
		if fast {
			fillf = g.FastFill
		}
		err := fillf(ctx, st, func(n int64) {
			if time.Since(last) >= 10*time.Second || n == g.Config().Rows {
				last = time.Now()
				el := time.Since(began)
				fmt.Fprintf(os.Stderr, "%d rows in %s (%.0f rows/s)\n", n, el.Round(time.Second), float64(n)/el.Seconds())
			}
		})
		if err != nil {
			return err
		}
		fmt.Printf("made %d rows over %d days, %d users, in %s\n", g.Config().Rows, g.Config().Days, g.Config().Users, time.Since(began).Round(time.Second))
	}
	if measure > 0 {
		res, err := usagegen.Measure(ctx, st, measure)
		if err != nil {
			return err
		}
		usagegen.PrintResults(os.Stdout, res)
	}
	if retention > 0 {
		n, err := st.CountUsage(ctx)
		if err != nil {
			return err
		}
		r, err := usagegen.DeleteOldestDay(ctx, st, retention)
		if err != nil {
			return err
		}
		if r.Drop > 0 {
			fmt.Printf("retention: %s's day dropped whole (DropUsageDays): %d rows in %s\n",
				r.Day.Format(time.DateOnly), r.Dropped, r.Drop.Round(time.Millisecond))
		}
		fmt.Printf("retention: %s's %d rows (of %d) in %d batches of %d: %s in all, a batch p50 %s, max %s\n",
			r.Day.Format(time.DateOnly), r.Rows, n, r.Batches, r.BatchSize, r.Total.Round(time.Millisecond),
			r.P50.Round(time.Microsecond), r.Max.Round(time.Microsecond))
	}
	return nil
}
