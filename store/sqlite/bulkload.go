package sqlite

import (
	"context"
	"fmt"
	"iter"

	"github.com/caddy-model-gateway/gateway/store"
)

// LoadUsageDay is the bulk load of a whole UTC day of usage rows, for
// bench/usagegen's data sets (issue 34: 50 million rows by SettleBatch
// take over an hour here): the rows go into the day's table made without
// its indexes, which are then built once from the loaded rows, as a
// restore does, and the day's charges are summed as SettleBatch sums a
// batch's (store.BatchCharges) and written by the same statements. What it
// writes equals what SettleBatch writes for the same rows
// (TestLoadUsageDayEqualsSettleBatch): ids the day's in the rows' order,
// the rollups, the windows' spend, the users' and keys' charges.
//
// It is for an offline database only: it assumes the day's rows are new
// (no row key check) and nothing else writes meanwhile. A day whose table
// exists already gets its rows through its indexes.
func (s *Store) LoadUsageDay(ctx context.Context, day int64, rows iter.Seq[*store.UsageLog]) (int64, error) {
	if day < firstUsageDay || day > lastUsageDay {
		return 0, fmt.Errorf("load usage day %d: the day tables run from 1970-01-02 to 9999-12-31", day)
	}
	t := usageDayTable(day)
	from, to := day*store.MsPerDay, (day+1)*store.MsPerDay
	ddl := s.usageDayTableDDL(day)
	// read before the write transaction, which holds the one writer
	// connection (nothing else writes: an offline database)
	var exists bool
	if err := s.w.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM usage_days WHERE day = ?)`, day).Scan(&exists); err != nil {
		return 0, fmt.Errorf("load usage day %s: %w", t, err)
	}
	next := day << 32
	if exists {
		if err := s.w.QueryRowContext(ctx, `SELECT IFNULL(MAX(id), ?) FROM `+t, day<<32).Scan(&next); err != nil {
			return 0, fmt.Errorf("load usage day %s: %w", t, err)
		}
	}
	var n int64
	err := s.inRawTx(ctx, func(tx execer) error {
		if err := forgetBloomsOfNewDay(ctx, tx, day); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, ddl[0]); err != nil { // the table alone
			return err
		}
		sums := store.NewBatchCharges(nil)
		blooms := &bloomBatch{} // the upstream ids' filters, as SettleBatch's batches leave them
		ins := `INSERT INTO ` + t + ` (id, created_at, user_id, token_id,
			model, channel, endpoint, prompt_tokens, completion_tokens, cached_tokens,
			reasoning_tokens, cost, status, estimated, stream, latency_ms, ttfb_ms, error,
			request_id, upstream_request_id, row_key, trace_id, windows, plan, cache_hit, cache_saved, price_tier)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
		for l := range rows {
			ms := l.CreatedAt.UnixMilli()
			if l.CreatedAt.IsZero() || ms < from || ms >= to {
				return fmt.Errorf("row %q at %s is not of the day", l.Key, l.CreatedAt)
			}
			next++
			if _, err := tx.ExecContext(ctx, ins, next, ms, l.UserID, l.TokenID,
				l.Model, l.Channel, l.Endpoint, l.PromptTokens, l.CompletionTokens, l.CachedTokens,
				l.ReasoningTokens, l.Cost, l.Status, boolInt(l.Estimated), boolInt(l.Stream),
				l.LatencyMS, l.TTFBMS, l.Error, l.RequestID, l.UpstreamRequestID, nullString(l.Key), l.TraceID, l.Windows, l.Plan,
				boolInt(l.CacheHit), l.CacheSaved, l.PriceTier); err != nil {
				return fmt.Errorf("row %d: %w", n, err)
			}
			sums.Add(l, l.CreatedAt)
			blooms.add(day, next, l.UpstreamRequestID)
			n++
		}
		if err := blooms.write(ctx, tx); err != nil {
			return err
		}
		if err := writeCharges(ctx, tx, sums); err != nil {
			return err
		}
		for _, q := range ddl[1:] { // the indexes, built once, and the day listed
			if _, err := tx.ExecContext(ctx, q); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("load usage day %s: %w", t, err)
	}
	s.days.add(day)
	s.blooms.forget(day)
	return n, nil
}
