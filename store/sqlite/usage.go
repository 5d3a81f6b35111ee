package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/caddy-model-gateway/gateway/store"
)

// defaultUsageLimit is ListUsage's page size when the filter names none.
const defaultUsageLimit = 100

// SettleBatch writes every log and charges its cost, all in one
// transaction. Charges are summed per user and per token first, so a batch
// of thousands of rows from a few hundred users costs one UPDATE per user and
// token rather than two per row. Every row counts as one request of its user,
// failed ones too. A zero CreatedAt becomes now. IDs are set on the logs only
// once the transaction has committed.
//
// A row whose user or token does not exist (deleted since the request) is
// still written; its charge finds no row to update. Failing the batch for it
// would lose every other row with it.
func (s *Store) SettleBatch(ctx context.Context, logs []*store.UsageLog) error {
	if len(logs) == 0 {
		return nil
	}
	if err := store.CheckBatch(logs); err != nil {
		return err
	}

	ids := make([]int64, len(logs))
	ts := now()
	blooms := &bloomBatch{open: &s.blooms}
	err := s.inRawTx(ctx, func(tx execer) error { return s.settleRows(ctx, tx, logs, ids, ts, nil, blooms) })
	if err != nil {
		return fmt.Errorf("settle batch of %d: %w", len(logs), err)
	}
	blooms.committed()
	store.SettledBatch(logs, ids, ts)
	return nil
}

// settleRows writes logs and charges their costs within tx, as SettleBatch
// describes; ids receives each written row's id (0: written before), and
// blooms the filters of their upstream ids, written within tx too.
func (s *Store) settleRows(ctx context.Context, tx execer, logs []*store.UsageLog, ids []int64, ts time.Time, windows map[string]int64, blooms *bloomBatch) error {
	sums := store.NewBatchCharges(windows)
	// The statements run without ctx's deadline: for a statement whose
	// context can end, the driver starts a goroutine to watch it, a
	// goroutine per row. ctx is checked between rows instead, and the
	// busy timeout bounds a wait for the lock.
	exec := context.WithoutCancel(ctx)

	// a keyed row already stored (a journal replayed twice) is skipped,
	// and with it its charge: by the unique row key of its day's table,
	// which the replay reaches since the usage writer gives a row its time
	// before its first attempt; and in usage_logs while it holds rows of
	// before the day tables. A keyed row sent without a time may have
	// gone to another day the first time: it is looked for in every table.
	legacy := s.legacyRows.Load()
	var touched []int64 // the days of this batch's rows, made within tx
	var stored []string // the tables there were before tx, read once
	for i, l := range logs {
		if err := ctx.Err(); err != nil {
			return err
		}
		createdAt := l.CreatedAt
		if createdAt.IsZero() {
			createdAt = ts
		}
		ms := createdAt.UnixMilli()
		day := tableDayOfMs(ms)
		res, err := s.insertRow(exec, tx, l, ms, day, legacy, &stored, touched)
		if err != nil {
			return fmt.Errorf("insert usage row %d: %w", i, err)
		}
		if !slices.Contains(touched, day) {
			touched = append(touched, day)
		}
		if res == nil {
			continue // written before, in another day
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("insert usage row %d: %w", i, err)
		} else if n == 0 {
			continue // written before
		}
		id, err := res.LastInsertId()
		if err != nil {
			return fmt.Errorf("insert usage row %d: %w", i, err)
		}
		ids[i] = id
		blooms.add(day, id, l.UpstreamRequestID)
		sums.Add(l, createdAt)
	}
	if err := blooms.write(exec, tx); err != nil {
		return err
	}
	return writeCharges(exec, tx, sums)
}

// insertRow writes one usage row of day into its table within tx and
// returns the statement's result, or nil when a keyed row sent without a
// time is in another table already. stored caches the tables there were
// before tx (read on first need), touched the days the batch made.
func (s *Store) insertRow(exec context.Context, tx execer, l *store.UsageLog, ms, day int64, legacy bool, stored *[]string, touched []int64) (sql.Result, error) {
	for attempt := 0; ; attempt++ {
		inserts, err := s.ensureDay(exec, tx, day)
		if err != nil {
			return nil, err
		}
		ins := inserts.plain
		switch {
		case l.Key != "" && l.CreatedAt.IsZero():
			if *stored == nil {
				if *stored, err = usageTables(exec, tx); err != nil {
					return nil, err
				}
			}
			found, err := keyStored(exec, tx, l.Key, otherTables(day, *stored, touched))
			if missingTable(err) && attempt == 0 {
				s.days.forget()
				*stored = nil
				continue
			}
			if err != nil || found {
				return nil, err
			}
		case legacy && l.Key != "":
			ins = inserts.checkLegacy
		}
		res, err := tx.ExecContext(exec, ins, ms, l.UserID, l.TokenID,
			l.Model, l.Channel, l.Endpoint, l.PromptTokens, l.CompletionTokens, l.CachedTokens,
			l.ReasoningTokens, l.Cost, l.Status, boolInt(l.Estimated), boolInt(l.Stream),
			l.LatencyMS, l.TTFBMS, l.Error, l.RequestID, l.UpstreamRequestID, nullString(l.Key), l.TraceID, l.Windows, l.Plan, boolInt(l.CacheHit), l.CacheSaved, l.PriceTier)
		if missingTable(err) && attempt == 0 {
			// a day dropped behind this store's back (another process's
			// retention, before this transaction took the write lock):
			// made again, the tables listed anew; a statement that fails
			// to prepare leaves tx as it was
			s.days.forget()
			*stored = nil
			continue
		}
		return res, err
	}
}

// keyStoredChunk is how many tables one look-up of a row key names: a
// compound SELECT of SQLite takes at most 500 terms.
const keyStoredChunk = 200

// keyStored reports whether one of tables has a row with key.
func keyStored(ctx context.Context, tx execer, key string, tables []string) (bool, error) {
	for len(tables) > 0 {
		chunk := tables[:min(len(tables), keyStoredChunk)]
		tables = tables[len(chunk):]
		var q strings.Builder
		for i, t := range chunk {
			if i > 0 {
				q.WriteString(" UNION ALL ")
			}
			q.WriteString("SELECT 1 FROM " + t + " WHERE row_key = ?1")
		}
		found, err := queryInt64s(ctx, tx, "SELECT EXISTS ("+q.String()+")", key)
		if err != nil {
			return false, fmt.Errorf("look for row key: %w", err)
		}
		if len(found) == 1 && found[0] == 1 {
			return true, nil
		}
	}
	return false, nil
}

// writeCharges writes a batch's sums: the rollups, the windows' spend,
// and the users' and keys' charges.
func writeCharges(exec context.Context, tx execer, sums *store.BatchCharges) error {
	if err := writeModelDays(exec, tx, sums); err != nil {
		return err
	}
	if err := writeDailyTotals(exec, tx, sums); err != nil {
		return err
	}
	if err := addWindowSpend(exec, tx, sums.Windows); err != nil {
		return err
	}

	// Updated in id order: the PostgreSQL store, locking rows as it
	// goes, cannot then deadlock two concurrent batches.
	// Each sum saturates rather than overflow: SQLite would turn an
	// overflowing column into a REAL, and the user into one no int64
	// read can load.
	upUser := `UPDATE users SET
		quota = CASE WHEN typeof(quota - ?1) = 'integer' THEN quota - ?1 ELSE -9223372036854775808 END,
		used_quota = CASE WHEN typeof(used_quota + ?1) = 'integer' THEN used_quota + ?1 ELSE 9223372036854775807 END,
		request_count = request_count + ?2 WHERE id = ?3`
	for _, id := range sums.UserIDs() {
		c := sums.Users[id]
		if _, err := tx.ExecContext(exec, upUser, c.Cost, c.Requests, id); err != nil {
			return fmt.Errorf("charge user %d: %w", id, err)
		}
	}
	upDay := `INSERT INTO usage_daily (user_id, day, cost, requests)
		VALUES (?, ?, ?, ?) ON CONFLICT (user_id, day) DO UPDATE
		SET cost = usage_daily.cost + excluded.cost, requests = usage_daily.requests + excluded.requests`
	for _, k := range sums.DayKeys() {
		d := sums.Days[k]
		if _, err := tx.ExecContext(exec, upDay, k.User, k.Day, d.Cost, d.Requests); err != nil {
			return fmt.Errorf("daily spend of user %d: %w", k.User, err)
		}
	}
	if len(sums.Tokens) == 0 {
		return nil
	}
	upToken := `UPDATE tokens SET
		used_quota = CASE WHEN typeof(used_quota + ?1) = 'integer' THEN used_quota + ?1 ELSE 9223372036854775807 END
		WHERE id = ?2`
	for _, id := range sums.TokenIDs() {
		if _, err := tx.ExecContext(exec, upToken, sums.Tokens[id], id); err != nil {
			return fmt.Errorf("charge token %d: %w", id, err)
		}
	}
	return nil
}

// insertUsageRow is the statement that writes a row of day d into its
// table: the id the day's next (the day's base when it has none), nothing
// when its row key is taken, and with checkLegacy nothing either when
// usage_logs has the key (a row written before the day tables, replayed).
func insertUsageRow(d int64, checkLegacy bool) string {
	t := usageDayTable(d)
	values := `VALUES ((SELECT IFNULL(MAX(id), ` + fmt.Sprint(d<<32) + `) + 1 FROM ` + t + `),
		?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	if checkLegacy {
		values = `SELECT (SELECT IFNULL(MAX(id), ` + fmt.Sprint(d<<32) + `) + 1 FROM ` + t + `),
		?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26
		WHERE NOT EXISTS (SELECT 1 FROM usage_logs WHERE row_key = ?20)`
	}
	return `INSERT INTO ` + t + ` (id, created_at, user_id, token_id,
		model, channel, endpoint, prompt_tokens, completion_tokens, cached_tokens,
		reasoning_tokens, cost, status, estimated, stream, latency_ms, ttfb_ms, error,
		request_id, upstream_request_id, row_key, trace_id, windows, plan, cache_hit, cache_saved, price_tier)
		` + values + ` ON CONFLICT (row_key) DO NOTHING`
}

// ListUsage returns usage rows newest first (by created_at, then id), at
// most f.Limit of them (100 when f.Limit is not positive), narrowed by the
// filter's fields. A page continues from f.After by a range condition on the
// (user_id[, model], created_at) indexes, never by OFFSET, so its cost does
// not grow with how deep the page is or how big the table is.
func (s *Store) ListUsage(ctx context.Context, f store.UsageFilter) ([]*store.UsageLog, error) {
	if f.RequestID == "" {
		return s.listUsage(ctx, f, "")
	}
	return store.ByRequestID(func(column string) ([]*store.UsageLog, error) { return s.listUsage(ctx, f, column) })
}

// listUsage reads the tables that may hold the page's rows newest first,
// each for at most a page by the same statement (its indexes are the
// same), and keeps the newest of what they give; it stops at a table
// whose rows are all older than a full page's last row, so a page costs
// what it does in one table plus an index probe per day with no row of
// the filter.
func (s *Store) listUsage(ctx context.Context, f store.UsageFilter, idColumn string) ([]*store.UsageLog, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = defaultUsageLimit
	}
	segs, err := s.usageSegments(ctx)
	if err != nil {
		return nil, err
	}
	until := f.Until
	if f.After != nil && (until.IsZero() || f.After.CreatedAt.Add(time.Millisecond).Before(until)) {
		until = f.After.CreatedAt.Add(time.Millisecond)
	}
	segs = inRange(segs, f.Since, until)
	// newest first: by the last day each may hold
	slices.SortStableFunc(segs, func(a, b usageSegment) int { return cmp.Compare(b.lastDay, a.lastDay) })
	page := []*store.UsageLog{} // none is an empty page, not nil
	err = eachSegment(segs, func(g usageSegment) error {
		if len(page) >= limit && page[limit-1].CreatedAt.UnixMilli() >= g.endMs() {
			return errStopSegments
		}
		var ranges []idRange
		if idColumn == "upstream_request_id" && g.day != 0 {
			var filtered bool
			if ranges, filtered, err = s.upstreamIDRanges(ctx, g.day, f.RequestID); err != nil {
				return err
			}
			if filtered && len(ranges) == 0 {
				return nil // no row of the day can have it
			}
		}
		q, args, err := listUsageQuery(g.table, f, idColumn, ranges)
		if err != nil {
			return err
		}
		rows, err := s.r.QueryContext(ctx, q, args...)
		got, err := collect(rows, err, store.ScanUsage, "list usage")
		if err != nil {
			return err
		}
		page = append(page, got...)
		slices.SortStableFunc(page, newestFirst)
		if len(page) > limit {
			page = page[:limit]
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStopSegments) {
		return nil, err
	}
	return page, nil
}

// newestFirst is the listing's order: created_at, then id, descending.
func newestFirst(a, b *store.UsageLog) int {
	if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
		return c
	}
	return cmp.Compare(b.ID, a.ID)
}

// listUsageQuery is ListUsage's statement for f on table, matching the
// request id in idColumn, within the id ranges given (none: anywhere).
func listUsageQuery(table string, f store.UsageFilter, idColumn string, ranges []idRange) (string, []any, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = defaultUsageLimit
	}
	w := store.NewWhere("?")
	if err := store.UsageWhere(f, idColumn, w); err != nil {
		return "", nil, err
	}
	if c := f.After; c != nil {
		// Written as a bound on created_at plus a tie-break, rather than a
		// row-value comparison, so that every planner sees the index range.
		ms := w.Arg(c.CreatedAt.UnixMilli())
		w.Add("created_at <= "+ms, "(created_at < "+ms+" OR id < "+w.Arg(c.ID)+")")
	}
	from := ` FROM ` + table
	switch {
	case idColumn == "request_id":
		// A request id matches a row or two: its index, whatever else the
		// filter says. Left to itself the planner takes the index that
		// gives the order (a user's), and walks all that user's rows.
		from += ` INDEXED BY ` + table + `_request_id`
	case len(ranges) > 0:
		// the upstream id's candidate rows, by their ids (upstreamblooms.go);
		// an index walked for the order would read the whole day
		from += ` NOT INDEXED`
		w.Add(idRangesWhere(ranges, w.Arg))
	}
	q := `SELECT ` + store.UsageColumns + from + w.String() +
		` ORDER BY created_at DESC, id DESC LIMIT ` + w.Arg(limit)
	return q, w.Args(), nil
}

// DailySpend reads the per-day totals SettleBatch keeps, so its cost is
// the number of days asked for, not the number of requests made.
func (s *Store) DailySpend(ctx context.Context, userID int64, since time.Time) ([]store.DailySpend, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT day, cost, requests FROM usage_daily
		WHERE user_id = ? AND day >= ? ORDER BY day`, userID, since.UnixMilli()/store.MsPerDay)
	return collect(rows, err, store.ScanDailySpend, "daily spend of user %d", userID)
}

// CountUsage returns how many usage rows exist, in every table.
func (s *Store) CountUsage(ctx context.Context) (int64, error) {
	segs, err := s.usageSegments(ctx)
	if err != nil {
		return 0, err
	}
	var total int64
	err = eachSegment(segs, func(g usageSegment) error {
		var n int64
		if err := s.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM `+g.table).Scan(&n); err != nil {
			return err
		}
		total += n
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("count usage: %w", err)
	}
	return total, nil
}

// writeModelDays adds the batch's totals per day, user and model.
func writeModelDays(ctx context.Context, tx execer, sums *store.BatchCharges) error {
	up := `INSERT INTO usage_daily_models (day, user_id, model, requests,
		prompt_tokens, completion_tokens, cached_tokens, reasoning_tokens, cost)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (day, user_id, model) DO UPDATE SET
		requests = requests + excluded.requests,
		prompt_tokens = prompt_tokens + excluded.prompt_tokens,
		completion_tokens = completion_tokens + excluded.completion_tokens,
		cached_tokens = cached_tokens + excluded.cached_tokens,
		reasoning_tokens = reasoning_tokens + excluded.reasoning_tokens,
		cost = cost + excluded.cost`
	for _, k := range sums.ModelKeys() {
		t := sums.Models[k]
		if _, err := tx.ExecContext(ctx, up, k.Day, k.User, k.Model, t.Requests, t.PromptTokens,
			t.CompletionTokens, t.CachedTokens, t.ReasoningTokens, t.Cost); err != nil {
			return fmt.Errorf("daily usage of user %d: %w", k.User, err)
		}
	}
	return nil
}

// writeDailyTotals adds the batch's sums per day and per channel, model,
// user and key to the dashboard's daily totals.
func writeDailyTotals(ctx context.Context, tx execer, sums *store.BatchCharges) error {
	up := `INSERT INTO usage_daily_totals (grp, day, key, requests, errors, cost, tokens,
		prompt_tokens, cached_tokens, latency_ms, ttfb_ms, cache_hits, cache_saved)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (grp, day, key) DO UPDATE SET
		requests = requests + excluded.requests,
		errors = errors + excluded.errors,
		cost = cost + excluded.cost,
		tokens = tokens + excluded.tokens,
		prompt_tokens = prompt_tokens + excluded.prompt_tokens,
		cached_tokens = cached_tokens + excluded.cached_tokens,
		latency_ms = latency_ms + excluded.latency_ms,
		ttfb_ms = ttfb_ms + excluded.ttfb_ms,
		cache_hits = cache_hits + excluded.cache_hits,
		cache_saved = cache_saved + excluded.cache_saved`
	for _, k := range sums.TotalKeys() {
		t := sums.Totals[k]
		if _, err := tx.ExecContext(ctx, up, string(k.By), k.Day, k.Key(), t.Requests, t.Errors, t.Cost, t.Tokens,
			t.PromptTokens, t.CachedTokens, t.LatencyMS, t.TTFBMS, t.CacheHits, t.CacheSaved); err != nil {
			return fmt.Errorf("daily totals by %s: %w", k.By, err)
		}
	}
	return nil
}

// DailyTotals reads the per-day totals the batches keep: one range of the
// table's key (group, day) whatever the usage log holds.
func (s *Store) DailyTotals(ctx context.Context, by store.UsageGroup, since time.Time, top int) ([]store.UsageTotal, error) {
	if err := store.CheckUsageGroup(by); err != nil {
		return nil, err
	}
	q := `SELECT day, key, requests, errors, cost, tokens, prompt_tokens,
		cached_tokens, latency_ms, ttfb_ms, cache_hits, cache_saved FROM usage_daily_totals
		WHERE grp = ?1 AND day >= ?2`
	args := []any{string(by), store.DayOf(since)}
	if top > 0 {
		// the period's sums per key in the database: a few thousand keys'
		// days summed there rather than sent here to be summed
		q += ` AND key IN (SELECT key FROM usage_daily_totals WHERE grp = ?1 AND day >= ?2
			GROUP BY key ORDER BY SUM(cost) DESC, SUM(requests) DESC, key LIMIT ?3)`
		args = append(args, top)
	}
	rows, err := s.r.QueryContext(ctx, q+` ORDER BY day, key`, args...)
	return collect(rows, err, store.ScanUsageTotal, "daily totals by %s", by)
}

// UsageSince returns a page of rows created at or after since, in id order.
// Keyset pages keep every read short, however many rows an export streams.
// The tables' ids do not overlap and grow with their days (usage_logs'
// below every day's), so the page is read from them in that order.
func (s *Store) UsageSince(ctx context.Context, since time.Time, afterID int64, limit int) ([]*store.UsageLog, error) {
	if limit <= 0 {
		limit = defaultUsageLimit
	}
	segs, err := s.usageSegments(ctx)
	if err != nil {
		return nil, err
	}
	var logs []*store.UsageLog
	err = eachSegment(inRange(segs, since, time.Time{}), func(g usageSegment) error {
		if len(logs) >= limit {
			return errStopSegments
		}
		if g.table != legacyUsageTable && afterID >= (g.day+1)<<32 {
			return nil // every id of the day is at or below the cursor
		}
		rows, err := s.r.QueryContext(ctx, `SELECT `+store.UsageColumns+` FROM `+g.table+`
			WHERE id > ? AND created_at >= ? ORDER BY id LIMIT ?`, afterID, since.UnixMilli(), limit-len(logs))
		got, err := collect(rows, err, store.ScanUsage, "usage since")
		logs = append(logs, got...)
		return err
	})
	if err != nil && !errors.Is(err, errStopSegments) {
		return nil, err
	}
	if len(logs) == 0 {
		return nil, nil // an exhausted export is nil
	}
	return logs, nil
}

// DeleteUsageBefore deletes one batch of the oldest rows before cutoff:
// usage_logs' first (rows of before the day tables), then those of the
// day tables that start before cutoff (the cutoff's own day, and any day
// DropUsageDays has not dropped). A batch is chosen through the
// created_at index, so the write lock is held for about as long as
// deleting limit rows takes, not for a table scan.
func (s *Store) DeleteUsageBefore(ctx context.Context, cutoff time.Time, limit int) (int64, error) {
	if limit <= 0 {
		return 0, errors.New("delete usage: the batch size must be positive")
	}
	segs, err := s.usageSegments(ctx)
	if err != nil {
		return 0, err
	}
	var total int64
	err = eachSegment(inRange(segs, time.Time{}, cutoff), func(g usageSegment) error {
		if total >= int64(limit) {
			return errStopSegments
		}
		res, err := s.w.ExecContext(ctx, `DELETE FROM `+g.table+` WHERE id IN (
			SELECT id FROM `+g.table+` WHERE created_at < ? ORDER BY created_at LIMIT ?)`,
			cutoff.UnixMilli(), int64(limit)-total)
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		total += n
		return err
	})
	if err != nil && !errors.Is(err, errStopSegments) {
		return 0, fmt.Errorf("delete usage before %s: %w", cutoff.UTC().Format(time.RFC3339), err)
	}
	if total == 0 && s.legacyRows.Load() {
		// usage_logs may have been emptied: its row keys need no look-up
		// once it has no row
		var any bool
		if err := s.r.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM usage_logs)`).Scan(&any); err == nil && !any {
			s.legacyRows.Store(false)
		}
	}
	return total, nil
}

// DailyUsageByModel returns a user's (or everyone's) daily totals per
// model from since on.
func (s *Store) DailyUsageByModel(ctx context.Context, userID int64, since time.Time) ([]*store.UsageDay, error) {
	q := `SELECT ` + store.UsageDayColumns + ` FROM usage_daily_models WHERE day >= ?`
	args := []any{since.UnixMilli() / store.MsPerDay}
	if userID != 0 {
		q += ` AND user_id = ?`
		args = append(args, userID)
	}
	rows, err := s.r.QueryContext(ctx, q+` ORDER BY day, user_id, model`, args...)
	out, err := collect(rows, err, store.ScanUsageDay, "daily usage")
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, nil // no days is nil, not an empty slice
	}
	return out, nil
}

// Ping takes and releases the write lock (the writer's transactions begin
// IMMEDIATE): it fails when another process holds the lock past the busy
// timeout, or the file cannot be locked for writing.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.inTx(ctx, func(*sql.Tx) error { return nil }); err != nil {
		return fmt.Errorf("ping: %w", err)
	}
	return nil
}
