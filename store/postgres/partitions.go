package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/caddy-model-gateway/gateway/store"
)

// usage_logs is partitioned by UTC day of created_at (migration 0026):
// usage_logs_YYYYMMDD holds [day, day+1) in unix milliseconds, and
// usage_logs_default whatever has no day yet.

const (
	// partitionsAhead is how many days after today always have a partition;
	// with the hourly check, a day's partition exists a day before it starts
	partitionsAhead = 2
	// partitionInterval is how often a store makes the days ahead
	partitionInterval = time.Hour
	// partitionLock is the advisory lock ("gatewayprt") held while days are
	// made or dropped, so two instances never race on the same DDL
	partitionLock int64 = 0x67617465777072
	// dropLockTimeout bounds the wait for the usage table's lock when a day
	// is dropped: the drop waits for running statements on the table and
	// makes new ones wait behind it, so it gives up rather than stall them
	// (retention tries again at its next interval)
	dropLockTimeout = "1s"
	// packAfter is how long after its end a day's indexes are packed: rows
	// of a day still arrive a little after midnight (batches in flight, a
	// journal replayed at start-up), and a packed index splits again on them
	packAfter = time.Hour
	// packLock is the advisory lock ("gatewaypck") an instance holds while
	// it packs a day, so two never rebuild the same indexes
	packLock int64 = 0x6761746577706b
	// tendInterval is how often a store looks after the days being
	// written (tendDays): the longest a new day goes without statistics,
	// or a full range of its rows without its bloom filter, when
	// autovacuum is late
	tendInterval = time.Minute
	// analyzeAfterRows is how many rows a day holds before tendDays
	// analyzes it, when autovacuum has not yet: enough for the columns'
	// distinct counts and created_at's order
	analyzeAfterRows = 1000
	// tendLock is the advisory lock ("gatewtd") of tendDays, so that
	// instances take turns
	tendLock int64 = 0x67617465777464
)

var _ store.UsageDays = (*Store)(nil)

// dayPartition names the partition of UTC day d (days since 1970-01-01).
func dayPartition(d int64) string {
	return "usage_logs_" + time.UnixMilli(d*store.MsPerDay).UTC().Format("20060102")
}

// partitionDay is the day a partition name stands for; false for the
// default partition and anything else.
func partitionDay(name string) (int64, bool) {
	s, ok := strings.CutPrefix(name, "usage_logs_")
	if !ok || len(s) != 8 {
		return 0, false
	}
	t, err := time.Parse("20060102", s)
	if err != nil {
		return 0, false
	}
	return t.UnixMilli() / store.MsPerDay, true
}

// keepPartitions makes the days ahead every partitionInterval until ctx
// ends (Open made them once already). A round that fails is tried again at
// the next; rows of a day without its partition meanwhile go to the
// default partition, and move into their day when it is made.
func (s *Store) keepPartitions(ctx context.Context) {
	defer close(s.kept)
	t := time.NewTicker(partitionInterval)
	defer t.Stop()
	tend := time.NewTicker(tendInterval)
	defer tend.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_ = s.makeDays(ctx, time.Now())
			_, _ = s.packDay(ctx, time.Now())
		case <-tend.C:
			_ = s.tendDays(ctx, time.Now())
		}
	}
}

// tendDays keeps the days being written (today's, and yesterday's for
// the rows that arrive after midnight) fit for the console's filters:
//
//   - a day is analyzed once it holds analyzeAfterRows rows and has no
//     statistics yet. Without them the planner takes a request id to match
//     0.5 % of the day, expects the page's 20 rows near the newest end and
//     walks every day's created_at index back to the oldest row (288 ms on
//     1.7 million rows, 2.6 s on 6 million; the upstream id likewise)
//     rather than probing one index. Autovacuum analyzes a new day too,
//     but only when a worker is free, and its workers may be busy on the
//     big days for long.
//   - the bloom filters of the upstream request id (16 partial BRIN
//     indexes, one a part, migrations 0028 and 0030) are made for the
//     day's ranges not summarized yet:
//     autosummarize asks autovacuum for each range as it fills, but drops
//     the requests beyond 256 (a busy minute) and makes none while
//     autovacuum is off, and a lookup reads every unsummarized range whole.
//
// Both take a lock that lets the day's writers and readers through. An
// instance that finds another one at it skips the round.
func (s *Store) tendDays(ctx context.Context, now time.Time) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("tend usage days: %w", err)
	}
	defer conn.Release()
	var locked bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, tendLock).Scan(&locked); err != nil {
		return fmt.Errorf("tend usage days: %w", err)
	}
	if !locked {
		return nil
	}
	defer func() {
		if _, err := conn.Exec(context.Background(), `SELECT pg_advisory_unlock($1)`, tendLock); err != nil {
			conn.Conn().Close(context.Background())
		}
	}()
	today := now.UnixMilli() / store.MsPerDay
	var errs []error
	for _, d := range []int64{today - 1, today} {
		errs = append(errs, tendDay(ctx, conn.Conn(), dayPartition(d)))
	}
	return errors.Join(errs...)
}

// tendDay analyzes one day's partition if it needs it and summarizes its
// full BRIN ranges (tendDays).
func tendDay(ctx context.Context, conn *pgx.Conn, part string) error {
	var exists, analyzed bool
	if err := conn.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL, EXISTS (SELECT 1 FROM pg_stats s
		JOIN pg_class c ON c.relname = s.tablename JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = s.schemaname
		WHERE c.oid = to_regclass($1))`, part).Scan(&exists, &analyzed); err != nil {
		return fmt.Errorf("tend usage partition %s: %w", part, err)
	}
	if !exists {
		return nil
	}
	name := pgx.Identifier{part}.Sanitize()
	if !analyzed {
		var rows int64
		if err := conn.QueryRow(ctx, `SELECT COUNT(*) FROM (SELECT 1 FROM `+name+` LIMIT $1) t`, analyzeAfterRows).Scan(&rows); err != nil {
			return fmt.Errorf("tend usage partition %s: %w", part, err)
		}
		if rows >= analyzeAfterRows {
			if _, err := conn.Exec(ctx, `ANALYZE `+name); err != nil {
				return fmt.Errorf("analyze usage partition %s: %w", part, err)
			}
		}
	}
	if _, err := conn.Exec(ctx, `SELECT brin_summarize_new_values(i.indexrelid) FROM pg_index i
		JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam
		WHERE i.indrelid = to_regclass($1) AND a.amname = 'brin'`, part); err != nil {
		return fmt.Errorf("summarize usage partition %s: %w", part, err)
	}
	return nil
}

// makeDays makes the partitions of today and the partitionsAhead days
// after it that are missing. A day whose rows went to the default
// partition meanwhile gets them moved in: the day's table is made apart,
// filled from the default partition and attached, in one transaction.
func (s *Store) makeDays(ctx context.Context, now time.Time) error {
	today := now.UnixMilli() / store.MsPerDay
	have, err := s.dayPartitions(ctx)
	if err != nil {
		return err
	}
	for d := today; d <= today+partitionsAhead; d++ {
		if _, ok := have[d]; ok {
			continue
		}
		if err := s.makeDay(ctx, d); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) makeDay(ctx context.Context, d int64) error {
	name := pgx.Identifier{dayPartition(d)}.Sanitize()
	from, to := d*store.MsPerDay, (d+1)*store.MsPerDay
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, partitionLock); err != nil {
			return err
		}
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, dayPartition(d)).Scan(&exists); err != nil {
			return err
		}
		if exists {
			return nil // another instance made it
		}
		// made apart, filled from the default partition and attached:
		// CREATE ... PARTITION OF would fail when the default partition
		// holds rows of the day, and takes a stronger lock on usage_logs
		// than ATTACH does
		if _, err := tx.Exec(ctx, fmt.Sprintf(`CREATE TABLE %s (LIKE usage_logs INCLUDING DEFAULTS,
			CHECK (created_at >= %d AND created_at < %d))`, name, from, to)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, fmt.Sprintf(`WITH moved AS (DELETE FROM usage_logs_default
			WHERE created_at >= %d AND created_at < %d RETURNING *) INSERT INTO %s SELECT * FROM moved`,
			from, to, name)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, fmt.Sprintf(`ALTER TABLE usage_logs ATTACH PARTITION %s FOR VALUES FROM (%d) TO (%d)`,
			name, from, to))
		return err
	})
	if err != nil {
		return fmt.Errorf("make usage partition %s: %w", dayPartition(d), err)
	}
	return nil
}

// dayPartitions lists usage_logs' day partitions by day.
func (s *Store) dayPartitions(ctx context.Context) (map[int64]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT c.relname FROM pg_inherits i
		JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'usage_logs'::regclass`)
	if err != nil {
		return nil, fmt.Errorf("list usage partitions: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("list usage partitions: %w", err)
	}
	days := make(map[int64]string, len(names))
	for _, n := range names {
		if d, ok := partitionDay(n); ok {
			days[d] = n
		}
	}
	return days, nil
}

// DropUsageDays drops the partition of every day that ends at or before
// cutoff, oldest first, each in a transaction of its own: a DROP TABLE
// that takes a fraction of a second whatever the day holds, leaving no
// dead rows for VACUUM. Rows before cutoff in a partly expired day or in
// the default partition are DeleteUsageBefore's. It says how many rows
// went (counted before each drop, outside its lock).
func (s *Store) DropUsageDays(ctx context.Context, cutoff time.Time) (int64, error) {
	days, err := s.dayPartitions(ctx)
	if err != nil {
		return 0, err
	}
	var expired []int64 // the days that end at or before cutoff, oldest first
	for d := range days {
		if (d+1)*store.MsPerDay <= cutoff.UnixMilli() {
			expired = append(expired, d)
		}
	}
	slices.Sort(expired)
	var total int64
	for _, d := range expired {
		name := pgx.Identifier{days[d]}.Sanitize()
		var n int64
		if err := s.pool.QueryRow(ctx, `SELECT COUNT(*) FROM `+name).Scan(&n); err != nil {
			return total, fmt.Errorf("count usage partition %s: %w", days[d], err)
		}
		err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, partitionLock); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `SET LOCAL lock_timeout = '`+dropLockTimeout+`'`); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `DROP TABLE IF EXISTS `+name)
			return err
		})
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "55P03" { // lock_not_available
			return total, fmt.Errorf("drop usage partition %s: the usage table stayed busy for %s; trying again later: %w", days[d], dropLockTimeout, err)
		}
		if err != nil {
			return total, fmt.Errorf("drop usage partition %s: %w", days[d], err)
		}
		total += n
	}
	return total, nil
}

// packDay rebuilds the indexes of the newest closed day that has not been
// packed yet (one day a call, so an upgraded database with many days
// catches up an hour at a time), full: fillfactor 100 and REINDEX
// CONCURRENTLY, which neither blocks the day's readers nor its writers.
//
// A day's indexes are written in time order within each user, key, model
// and channel, so their pages split in the middle and stay about 60 %
// full (random-insert b-trees); once the day is over nothing but a replay
// writes there, and packed those take 35-45 % less, a row 18-22 % less in
// all (bench/README.md, "PostgreSQL's usage row at 300 bytes"). An index
// with fillfactor 100 is a packed one; a rebuild that fails has its
// setting reset and its leftover copy dropped, and is tried again at the
// next round. It holds one of the pool's connections meanwhile (about 17
// s for a day of 1.7 million rows). It says which day it packed, -1 for
// none.
func (s *Store) packDay(ctx context.Context, now time.Time) (int64, error) {
	days, err := s.dayPartitions(ctx)
	if err != nil {
		return -1, err
	}
	var closed []int64
	for d := range days {
		if (d+1)*store.MsPerDay+packAfter.Milliseconds() <= now.UnixMilli() {
			closed = append(closed, d)
		}
	}
	slices.Sort(closed)
	slices.Reverse(closed) // newest first: the oldest go first to retention
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return -1, fmt.Errorf("pack usage days: %w", err)
	}
	defer conn.Release()
	var locked bool
	if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, packLock).Scan(&locked); err != nil {
		return -1, fmt.Errorf("pack usage days: %w", err)
	}
	if !locked {
		return -1, nil // another instance is packing
	}
	defer func() {
		if _, err := conn.Exec(context.Background(), `SELECT pg_advisory_unlock($1)`, packLock); err != nil {
			conn.Conn().Close(context.Background()) // the session's lock goes with it
		}
	}()
	for _, d := range closed {
		// b-trees only: the upstream request id's BRIN indexes have no
		// fillfactor, and nothing to pack
		rows, err := conn.Query(ctx, `SELECT c.oid::regclass::text FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
			JOIN pg_am a ON a.oid = c.relam
			WHERE i.indrelid = to_regclass($1) AND a.amname = 'btree' AND NOT COALESCE(c.reloptions @> '{fillfactor=100}', false)
			ORDER BY c.relname`, days[d])
		if err != nil {
			return -1, fmt.Errorf("pack usage partition %s: %w", days[d], err)
		}
		ixs, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return -1, fmt.Errorf("pack usage partition %s: %w", days[d], err)
		}
		if len(ixs) == 0 {
			continue
		}
		for _, ix := range ixs {
			if err := packIndex(ctx, conn.Conn(), ix); err != nil {
				return -1, fmt.Errorf("pack usage partition %s: %w", days[d], err)
			}
		}
		return d, nil
	}
	return -1, nil
}

// packIndex rebuilds ix (a regclass text, quoted as needed) with
// fillfactor 100, undoing the setting and dropping the half-built copy
// when the rebuild fails.
func packIndex(ctx context.Context, conn *pgx.Conn, ix string) error {
	if _, err := conn.Exec(ctx, `ALTER INDEX `+ix+` SET (fillfactor = 100)`); err != nil {
		return err
	}
	_, err := conn.Exec(ctx, `REINDEX INDEX CONCURRENTLY `+ix)
	if err == nil {
		return nil
	}
	cleanup, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _ = conn.Exec(cleanup, `ALTER INDEX `+ix+` RESET (fillfactor)`)
	// REINDEX CONCURRENTLY leaves an invalid <name>_ccnew behind when it
	// fails; writes would keep it up to date for nothing
	rows, qerr := conn.Query(cleanup, `SELECT c.oid::regclass::text FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
		WHERE i.indrelid = (SELECT indrelid FROM pg_index WHERE indexrelid = $1::regclass) AND NOT i.indisvalid`, ix)
	if qerr == nil {
		left, _ := pgx.CollectRows(rows, pgx.RowTo[string])
		for _, l := range left {
			_, _ = conn.Exec(cleanup, `DROP INDEX CONCURRENTLY IF EXISTS `+l)
		}
	}
	return fmt.Errorf("rebuild %s: %w", ix, err)
}
