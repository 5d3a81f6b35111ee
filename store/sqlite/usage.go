package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"

	"github.com/caddy-model-gateway/gateway/store"
)

const usageColumns = `id, created_at, user_id, token_id, model, channel, endpoint,
	prompt_tokens, completion_tokens, cached_tokens, reasoning_tokens, cost, status,
	estimated, stream, latency_ms, ttfb_ms, error`

// defaultUsageLimit is ListUsage's page size when the filter names none.
const defaultUsageLimit = 100

func scanUsage(sc scanner) (*store.UsageLog, error) {
	var (
		l                 store.UsageLog
		createdAt         sql.NullInt64
		estimated, stream int
	)
	err := sc.Scan(&l.ID, &createdAt, &l.UserID, &l.TokenID, &l.Model, &l.Channel, &l.Endpoint,
		&l.PromptTokens, &l.CompletionTokens, &l.CachedTokens, &l.ReasoningTokens, &l.Cost,
		&l.Status, &estimated, &stream, &l.LatencyMS, &l.TTFBMS, &l.Error)
	if err != nil {
		return nil, err
	}
	l.CreatedAt = fromMillis(createdAt)
	l.Estimated = estimated != 0
	l.Stream = stream != 0
	return &l, nil
}

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
	if slices.Contains(logs, nil) {
		return errors.New("settle batch: nil usage log")
	}

	type charge struct{ cost, requests int64 }
	users := make(map[int64]*charge)
	tokens := make(map[int64]int64)
	ids := make([]int64, len(logs))
	ts := now()

	err := s.inTx(ctx, func(tx *sql.Tx) error {
		ins, err := tx.PrepareContext(ctx, `INSERT INTO usage_logs (created_at, user_id, token_id,
			model, channel, endpoint, prompt_tokens, completion_tokens, cached_tokens,
			reasoning_tokens, cost, status, estimated, stream, latency_ms, ttfb_ms, error)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
		if err != nil {
			return err
		}
		defer ins.Close()
		for i, l := range logs {
			createdAt := l.CreatedAt
			if createdAt.IsZero() {
				createdAt = ts
			}
			res, err := ins.ExecContext(ctx, createdAt.UnixMilli(), l.UserID, l.TokenID,
				l.Model, l.Channel, l.Endpoint, l.PromptTokens, l.CompletionTokens, l.CachedTokens,
				l.ReasoningTokens, l.Cost, l.Status, boolInt(l.Estimated), boolInt(l.Stream),
				l.LatencyMS, l.TTFBMS, l.Error)
			if err != nil {
				return fmt.Errorf("insert usage row %d: %w", i, err)
			}
			if ids[i], err = res.LastInsertId(); err != nil {
				return fmt.Errorf("insert usage row %d: %w", i, err)
			}
			if l.UserID != 0 {
				c := users[l.UserID]
				if c == nil {
					c = &charge{}
					users[l.UserID] = c
				}
				c.cost += l.Cost
				c.requests++
			}
			if l.TokenID != 0 && l.Cost != 0 {
				tokens[l.TokenID] += l.Cost
			}
		}

		// Updated in id order: the PostgreSQL store, locking rows as it
		// goes, cannot then deadlock two concurrent batches.
		upUser, err := tx.PrepareContext(ctx, `UPDATE users SET quota = quota - ?,
			used_quota = used_quota + ?, request_count = request_count + ? WHERE id = ?`)
		if err != nil {
			return err
		}
		defer upUser.Close()
		for _, id := range sortedKeys(users) {
			c := users[id]
			if _, err := upUser.ExecContext(ctx, c.cost, c.cost, c.requests, id); err != nil {
				return fmt.Errorf("charge user %d: %w", id, err)
			}
		}
		if len(tokens) == 0 {
			return nil
		}
		upToken, err := tx.PrepareContext(ctx,
			`UPDATE tokens SET used_quota = used_quota + ? WHERE id = ?`)
		if err != nil {
			return err
		}
		defer upToken.Close()
		for _, id := range sortedKeys(tokens) {
			if _, err := upToken.ExecContext(ctx, tokens[id], id); err != nil {
				return fmt.Errorf("charge token %d: %w", id, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("settle batch of %d: %w", len(logs), err)
	}
	for i, l := range logs {
		l.ID = ids[i]
		if l.CreatedAt.IsZero() {
			l.CreatedAt = ts
		}
	}
	return nil
}

func sortedKeys[V any](m map[int64]V) []int64 {
	keys := make([]int64, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// ListUsage returns usage rows newest first, at most f.Limit of them (100
// when f.Limit is not positive), only f.UserID's when it is not zero.
func (s *Store) ListUsage(ctx context.Context, f store.UsageFilter) ([]*store.UsageLog, error) {
	limit := f.Limit
	if limit <= 0 {
		limit = defaultUsageLimit
	}
	var (
		rows *sql.Rows
		err  error
	)
	if f.UserID != 0 {
		rows, err = s.r.QueryContext(ctx, `SELECT `+usageColumns+` FROM usage_logs
			WHERE user_id = ? ORDER BY created_at DESC, id DESC LIMIT ?`, f.UserID, limit)
	} else {
		rows, err = s.r.QueryContext(ctx, `SELECT `+usageColumns+` FROM usage_logs
			ORDER BY created_at DESC, id DESC LIMIT ?`, limit)
	}
	if err != nil {
		return nil, fmt.Errorf("list usage: %w", err)
	}
	defer rows.Close()
	logs := []*store.UsageLog{}
	for rows.Next() {
		l, err := scanUsage(rows)
		if err != nil {
			return nil, fmt.Errorf("list usage: %w", err)
		}
		logs = append(logs, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list usage: %w", err)
	}
	return logs, nil
}

// CountUsage returns how many usage rows exist.
func (s *Store) CountUsage(ctx context.Context) (int64, error) {
	var n int64
	if err := s.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM usage_logs`).Scan(&n); err != nil {
		return 0, fmt.Errorf("count usage: %w", err)
	}
	return n, nil
}
