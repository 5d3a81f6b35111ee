package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/caddy-model-gateway/gateway/store"
)

// Usage rows live in one table per UTC day of created_at
// (usage_logs_YYYYMMDD, migration 0027), made by the first batch that has
// a row of that day, so that retention removes a day with one DROP TABLE
// instead of deleting its rows one index entry at a time (52 s for a day
// of 555,555 rows at 50 million, before). usage_days lists the day tables.
//
// usage_logs keeps the rows written before the day tables, and takes no
// new ones: it is read as one more table spanning the days of its rows,
// and retention empties it in batches (DeleteUsageBefore) as its rows
// expire. Nothing is moved at the upgrade, so it costs nothing however
// big the file.
//
// A day table's ids are its day's: the first row of day d gets d<<32 + 1,
// the next one more, so ids still grow with the day and never meet
// another day's (or usage_logs', below 2^32). A row written late into a
// past day (a journal replayed after midnight) takes an id of that day,
// not one above every id given since.
//
// The day tables run from 1970-01-02 to 9999-12-31 (firstUsageDay,
// lastUsageDay): a row of an earlier day goes to the first, of a later
// one to the last, whose spans are open at that end. A table of the
// epoch's own day or before would give ids at or below usage_logs' (day
// 0's base is 0) or negative ones, which the export, reading in id order
// from 0, would never reach; and a name past year 9999 has no date.

const legacyUsageTable = "usage_logs"

const (
	firstUsageDay int64 = 1       // 1970-01-02
	lastUsageDay  int64 = 2932896 // 9999-12-31

	// the span of the edge tables' open ends, in days: as far as unix
	// milliseconds in an int64 go
	spanFirstDay = math.MinInt64/store.MsPerDay + 1
	spanLastDay  = math.MaxInt64/store.MsPerDay - 2
)

// usageDayTable names the table of UTC day d (days since 1970-01-01).
func usageDayTable(d int64) string {
	return "usage_logs_" + time.UnixMilli(d*store.MsPerDay).UTC().Format("20060102")
}

// tableDayOfMs is the day whose table takes a row created at unix
// milliseconds ms.
func tableDayOfMs(ms int64) int64 {
	return min(max(dayOfMs(ms), firstUsageDay), lastUsageDay)
}

// usageDayTableDDL makes day d's table and the indexes the pages read it
// by. The table is usage_logs' own definition as SQLite keeps it (its
// columns added by later migrations included), under the day's name: a
// migration that adds a column to usage_logs adds it to the day tables
// made after, and must add it to those listed in usage_days too. The
// indexes are usage_logs' (bench/README.md, "The indexes of usage_logs
// on SQLite"), without the id at the end of three of them, which SQLite
// appends to every index entry anyway.
func (s *Store) usageDayTableDDL(d int64) []string {
	t := usageDayTable(d)
	return []string{
		strings.Replace(s.usageTableSQL, "CREATE TABLE "+legacyUsageTable, "CREATE TABLE IF NOT EXISTS "+t, 1),
		`CREATE INDEX IF NOT EXISTS ` + t + `_created_at ON ` + t + ` (created_at)`,
		`CREATE INDEX IF NOT EXISTS ` + t + `_user_id_created_at ON ` + t + ` (user_id, created_at)`,
		`CREATE INDEX IF NOT EXISTS ` + t + `_user_id_model_created_at ON ` + t + ` (user_id, model, created_at)`,
		`CREATE INDEX IF NOT EXISTS ` + t + `_model_created_at ON ` + t + ` (model, created_at)`,
		`CREATE INDEX IF NOT EXISTS ` + t + `_token_id_created_at ON ` + t + ` (token_id, created_at)`,
		`CREATE INDEX IF NOT EXISTS ` + t + `_channel_created_at ON ` + t + ` (channel, created_at)`,
		`CREATE INDEX IF NOT EXISTS ` + t + `_failed_created_at ON ` + t + ` (created_at) WHERE status < 200 OR status >= 300`,
		`CREATE INDEX IF NOT EXISTS ` + t + `_request_id ON ` + t + ` (request_id)`,
		`CREATE UNIQUE INDEX IF NOT EXISTS ` + t + `_row_key ON ` + t + ` (row_key)`,
		`INSERT OR IGNORE INTO usage_days (day) VALUES (` + fmt.Sprint(d) + `)`,
	}
}

// dayTables remembers the day tables this store has made or met, and
// their insert statements, so a batch makes a day's table once and builds
// no statement per row. It is a cache: a table dropped by another process
// (a CLI's retention) is made again when a write finds it missing.
type dayTables struct {
	mu    sync.Mutex
	known map[int64]*dayInserts
}

// dayInserts are insertUsageRow's two usual statements for a day.
type dayInserts struct{ plain, checkLegacy string }

func (d *dayTables) get(day int64) *dayInserts {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.known[day]
}

func (d *dayTables) add(day int64) *dayInserts {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.known == nil {
		d.known = map[int64]*dayInserts{}
	}
	ins := &dayInserts{insertUsageRow(day, false), insertUsageRow(day, true)}
	d.known[day] = ins
	return ins
}

func (d *dayTables) forget() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.known = nil
}

// ensureDay makes day d's table within tx, unless this store knows it,
// and returns its insert statements.
func (s *Store) ensureDay(ctx context.Context, tx execer, d int64) (*dayInserts, error) {
	if ins := s.days.get(d); ins != nil {
		return ins, nil
	}
	s.blooms.forget(d)
	if err := forgetBloomsOfNewDay(ctx, tx, d); err != nil {
		return nil, fmt.Errorf("make the usage table of %s: %w", usageDayTable(d), err)
	}
	for _, q := range s.usageDayTableDDL(d) {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return nil, fmt.Errorf("make the usage table of %s: %w", usageDayTable(d), err)
		}
	}
	return s.days.add(d), nil
}

// missingTable reports a statement that named a table no longer there (a
// day dropped meanwhile).
func missingTable(err error) bool {
	return err != nil && strings.Contains(err.Error(), "no such table")
}

// usageSegment is a table of usage rows and the UTC days its rows may be
// of: one day for a day table (open at one end for the first and the
// last), the span of its rows for usage_logs.
type usageSegment struct {
	table             string
	day               int64 // a day table's day, whose ids it has; 0 for usage_logs
	firstDay, lastDay int64
}

// firstMs and endMs bound the created_at of the segment's rows.
func (g usageSegment) firstMs() int64 { return g.firstDay * store.MsPerDay }
func (g usageSegment) endMs() int64   { return (g.lastDay + 1) * store.MsPerDay }

// usageSegments lists the tables holding usage rows, newest day last:
// usage_logs when it has rows (its span), then each day table.
func (s *Store) usageSegments(ctx context.Context) ([]usageSegment, error) {
	var segs []usageSegment
	var lo, hi sql.NullInt64
	err := s.r.QueryRowContext(ctx, `SELECT MIN(created_at), MAX(created_at) FROM usage_logs`).Scan(&lo, &hi)
	if err != nil {
		return nil, fmt.Errorf("usage tables: %w", err)
	}
	if lo.Valid {
		segs = append(segs, usageSegment{legacyUsageTable, 0, floorDiv(lo.Int64, store.MsPerDay), floorDiv(hi.Int64, store.MsPerDay)})
	}
	rows, err := s.r.QueryContext(ctx, `SELECT day FROM usage_days ORDER BY day`)
	if err != nil {
		return nil, fmt.Errorf("usage tables: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var d int64
		if err := rows.Scan(&d); err != nil {
			return nil, fmt.Errorf("usage tables: %w", err)
		}
		g := usageSegment{usageDayTable(d), d, d, d}
		if d <= firstUsageDay {
			g.firstDay = spanFirstDay
		}
		if d >= lastUsageDay {
			g.lastDay = spanLastDay
		}
		segs = append(segs, g)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("usage tables: %w", err)
	}
	return segs, nil
}

// usageTables names the tables holding usage rows, read within the
// writer's transaction tx: usage_logs and every day's.
func usageTables(ctx context.Context, tx execer) ([]string, error) {
	days, err := queryInt64s(ctx, tx, `SELECT day FROM usage_days ORDER BY day`)
	if err != nil {
		return nil, fmt.Errorf("usage tables: %w", err)
	}
	tables := []string{legacyUsageTable}
	for _, d := range days {
		tables = append(tables, usageDayTable(d))
	}
	return tables, nil
}

// otherTables is every table but day d's that may hold a row key: those
// stored before the batch and those the batch made.
func otherTables(d int64, stored []string, touched []int64) []string {
	own := usageDayTable(d)
	out := make([]string, 0, len(stored)+len(touched))
	for _, t := range stored {
		if t != own {
			out = append(out, t)
		}
	}
	for _, day := range touched {
		if t := usageDayTable(day); t != own && !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// inRange keeps the segments that may hold rows created in [since, until)
// (zero: unbounded).
func inRange(segs []usageSegment, since, until time.Time) []usageSegment {
	return slices.DeleteFunc(segs, func(g usageSegment) bool {
		return !since.IsZero() && g.endMs() <= since.UnixMilli() || !until.IsZero() && g.firstMs() >= until.UnixMilli()
	})
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// dayOfMs is the UTC day of unix milliseconds ms.
func dayOfMs(ms int64) int64 { return floorDiv(ms, store.MsPerDay) }

var _ store.UsageDays = (*Store)(nil)

// DropUsageDays implements store.UsageDays: every day table whose day
// ends at or before cutoff goes with one DROP TABLE each, in one write
// transaction; SQLite puts their pages on the file's free list, which new
// rows reuse (no VACUUM). usage_logs' rows, and the rows of the cutoff's
// own day, are left to DeleteUsageBefore.
func (s *Store) DropUsageDays(ctx context.Context, cutoff time.Time) (int64, error) {
	// the last day that ends by cutoff; never the last table, which may
	// hold rows of any later day
	last := min(dayOfMs(cutoff.UnixMilli())-1, lastUsageDay-1)
	var n int64
	err := s.inTx(ctx, func(tx *sql.Tx) error {
		rows, err := tx.QueryContext(ctx, `SELECT day FROM usage_days WHERE day <= ? ORDER BY day`, last)
		if err != nil {
			return err
		}
		var days []int64
		for rows.Next() {
			var d int64
			if err := rows.Scan(&d); err != nil {
				rows.Close()
				return err
			}
			days = append(days, d)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		for _, d := range days {
			t := usageDayTable(d)
			var c int64
			if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+t).Scan(&c); err != nil && !missingTable(err) {
				return fmt.Errorf("count %s: %w", t, err)
			}
			if _, err := tx.ExecContext(ctx, `DROP TABLE IF EXISTS `+t); err != nil {
				return fmt.Errorf("drop %s: %w", t, err)
			}
			if _, err := tx.ExecContext(ctx, `DELETE FROM usage_days WHERE day = ?`, d); err != nil {
				return fmt.Errorf("drop %s: %w", t, err)
			}
			lo, hi := dayIDs(d)
			if _, err := tx.ExecContext(ctx, `DELETE FROM usage_upstream_blooms WHERE `+bloomDayWhere, lo, hi); err != nil {
				return fmt.Errorf("drop %s: %w", t, err)
			}
			n += c
		}
		return nil
	})
	// a day dropped must be made again if a late row of it comes
	s.days.forget()
	s.blooms.forget()
	if err != nil {
		return 0, fmt.Errorf("drop usage days before %s: %w", cutoff.UTC().Format(time.RFC3339), err)
	}
	return n, nil
}

// eachSegment runs fn on each segment in order, skipping one dropped
// meanwhile.
func eachSegment(segs []usageSegment, fn func(g usageSegment) error) error {
	for _, g := range segs {
		if err := fn(g); err != nil && !missingTable(err) {
			return err
		}
	}
	return nil
}

var errStopSegments = errors.New("enough rows")
