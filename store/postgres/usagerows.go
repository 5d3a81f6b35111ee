package postgres

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/caddy-model-gateway/gateway/store"
)

// insertUsage writes a whole batch of usage rows in one statement: each
// column travels as one array and unnest turns the arrays back into rows,
// so the server parses, plans and starts the executor once per batch
// rather than once per row (pgx prepares it once per connection). It cost
// a quarter of a statement per row in a pgx.Batch and less than the copy
// protocol through a staging table (BenchmarkInsertUsage, bench/README.md).
//
// ON CONFLICT DO NOTHING without a target: the only unique index a new
// row can meet is the row key's, so a keyed row already stored (a journal
// replayed twice, or by two instances) is skipped, and so is a second row
// of one key within the batch. A concurrent insert of the same key waits
// for the first to commit, then finds it.
const insertUsage = `INSERT INTO usage_logs (created_at, user_id, token_id,
	model, channel, endpoint, prompt_tokens, completion_tokens, cached_tokens,
	reasoning_tokens, cost, status, estimated, stream, latency_ms, ttfb_ms, error,
	request_id, upstream_request_id, row_key, trace_id, windows, plan, cache_hit, cache_saved, price_tier)
	SELECT * FROM unnest($1::bigint[], $2::bigint[], $3::bigint[], $4::text[], $5::text[], $6::text[],
		$7::bigint[], $8::bigint[], $9::bigint[], $10::bigint[], $11::bigint[], $12::int[], $13::bool[],
		$14::bool[], $15::bigint[], $16::bigint[], $17::text[], $18::text[], $19::text[], $20::text[],
		$21::text[], $22::text[], $23::text[], $24::bool[], $25::bigint[], $26::bigint[])
	ON CONFLICT DO NOTHING RETURNING id, row_key`

// untimedKeyLock is the first half of the advisory locks on untimed row
// keys ("usag"), the key's hash the second.
const untimedKeyLock int32 = 0x75736167

// usageArrays are a batch's rows column by column, as insertUsage binds
// them.
type usageArrays struct {
	createdAt, userID, tokenID                  []int64
	model, channel, endpoint                    []string
	prompt, completion, cached, reasoning, cost []int64
	status                                      []int32
	estimated, stream                           []bool
	latency, ttfb                               []int64
	errMsg, requestID, upstreamID               []string
	key                                         []*string
	traceID, windows, plan                      []string
	cacheHit                                    []bool
	cacheSaved, priceTier                       []int64
}

// newUsageArrays lays out logs but those whose key is in skip.
func newUsageArrays(logs []*store.UsageLog, ts time.Time, skip map[string]bool) *usageArrays {
	n := len(logs)
	for _, l := range logs {
		if skip[l.Key] {
			n--
		}
	}
	a := &usageArrays{
		createdAt: make([]int64, n), userID: make([]int64, n), tokenID: make([]int64, n),
		model: make([]string, n), channel: make([]string, n), endpoint: make([]string, n),
		prompt: make([]int64, n), completion: make([]int64, n), cached: make([]int64, n),
		reasoning: make([]int64, n), cost: make([]int64, n), status: make([]int32, n),
		estimated: make([]bool, n), stream: make([]bool, n), latency: make([]int64, n), ttfb: make([]int64, n),
		errMsg: make([]string, n), requestID: make([]string, n), upstreamID: make([]string, n),
		key: make([]*string, n), traceID: make([]string, n), windows: make([]string, n), plan: make([]string, n),
		cacheHit: make([]bool, n), cacheSaved: make([]int64, n), priceTier: make([]int64, n),
	}
	i := 0
	for _, l := range logs {
		if skip[l.Key] {
			continue
		}
		createdAt := l.CreatedAt
		if createdAt.IsZero() {
			createdAt = ts
		}
		a.createdAt[i], a.userID[i], a.tokenID[i] = createdAt.UnixMilli(), l.UserID, l.TokenID
		a.model[i], a.channel[i], a.endpoint[i] = l.Model, l.Channel, l.Endpoint
		a.prompt[i], a.completion[i], a.cached[i], a.reasoning[i] = l.PromptTokens, l.CompletionTokens, l.CachedTokens, l.ReasoningTokens
		a.cost[i], a.status[i], a.estimated[i], a.stream[i] = l.Cost, int32(l.Status), l.Estimated, l.Stream
		a.latency[i], a.ttfb[i], a.errMsg[i] = l.LatencyMS, l.TTFBMS, l.Error
		a.requestID[i], a.upstreamID[i], a.key[i] = l.RequestID, l.UpstreamRequestID, nullString(l.Key)
		a.traceID[i], a.windows[i], a.plan[i] = l.TraceID, l.Windows, l.Plan
		a.cacheHit[i], a.cacheSaved[i], a.priceTier[i] = l.CacheHit, l.CacheSaved, l.PriceTier
		i++
	}
	return a
}

func (a *usageArrays) args() []any {
	return []any{a.createdAt, a.userID, a.tokenID, a.model, a.channel, a.endpoint,
		a.prompt, a.completion, a.cached, a.reasoning, a.cost, a.status, a.estimated,
		a.stream, a.latency, a.ttfb, a.errMsg, a.requestID, a.upstreamID, a.key,
		a.traceID, a.windows, a.plan, a.cacheHit, a.cacheSaved, a.priceTier}
}

// insertRows writes logs within tx and sets ids[i] to each written row's
// id, leaving 0 for a keyed row stored before (or earlier in the batch).
//
// The statement returns the rows it wrote with their keys: a keyed row
// is found by its key (the first of the batch with that key), an unkeyed
// one, which nothing can skip, by its place among the unkeyed, since the
// insert returns rows in the order unnest gives them.
//
// The guard is the unique index on (row_key, created_at), within a day's
// partition: a keyed row that comes without a time (a task's, settled at
// the batch's time ts) could meet its first copy in another day, so such
// keys are looked for in every day first. The usage writer's rows always
// carry the time they were first written with.
func insertRows(ctx context.Context, tx pgx.Tx, logs []*store.UsageLog, ids []int64, ts time.Time) error {
	skip, err := storedUntimedKeys(ctx, tx, logs)
	if err != nil {
		return err
	}
	if len(skip) > 0 && !slices.ContainsFunc(logs, func(l *store.UsageLog) bool { return !skip[l.Key] }) {
		return nil // every row stored before
	}
	rows, err := tx.Query(ctx, insertUsage, newUsageArrays(logs, ts, skip).args()...)
	if err != nil {
		return fmt.Errorf("insert %d usage rows: %w", len(logs), err)
	}
	defer rows.Close()
	var byKey map[string]int // a key's first row
	nextUnkeyed := 0
	for rows.Next() {
		var id int64
		var key *string
		if err := rows.Scan(&id, &key); err != nil {
			return fmt.Errorf("insert usage rows: %w", err)
		}
		if key == nil {
			for nextUnkeyed < len(logs) && logs[nextUnkeyed].Key != "" {
				nextUnkeyed++
			}
			if nextUnkeyed == len(logs) {
				return fmt.Errorf("insert usage rows: more unkeyed rows returned than sent")
			}
			ids[nextUnkeyed] = id
			nextUnkeyed++
			continue
		}
		if byKey == nil {
			byKey = make(map[string]int, len(logs))
			for i := len(logs) - 1; i >= 0; i-- {
				if k := logs[i].Key; k != "" {
					byKey[k] = i
				}
			}
		}
		i, ok := byKey[*key]
		if !ok {
			return fmt.Errorf("insert usage rows: returned a key not sent")
		}
		ids[i] = id
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("insert usage rows: %w", err)
	}
	return nil
}

// storedUntimedKeys are the keys of logs' keyed rows without a time that
// are stored already, in whatever day. Each such key is locked first (an
// advisory lock on its hash, held to the end of the transaction, taken in
// hash order), so two batches sending one key at once are serialized and
// the second finds the first's row once it has committed.
func storedUntimedKeys(ctx context.Context, tx pgx.Tx, logs []*store.UsageLog) (map[string]bool, error) {
	var keys []string
	for _, l := range logs {
		if l.Key != "" && l.CreatedAt.IsZero() {
			keys = append(keys, l.Key)
		}
	}
	if len(keys) == 0 {
		return nil, nil
	}
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1, h) FROM
		(SELECT DISTINCT hashtext(k) AS h FROM unnest($2::text[]) AS k) AS keys ORDER BY h`, untimedKeyLock, keys); err != nil {
		return nil, fmt.Errorf("lock usage keys: %w", err)
	}
	// a statement of its own: its snapshot is taken after the locks
	rows, err := tx.Query(ctx, `SELECT DISTINCT row_key FROM usage_logs WHERE row_key = ANY($1)`, keys)
	if err != nil {
		return nil, fmt.Errorf("look for stored usage keys: %w", err)
	}
	found, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("look for stored usage keys: %w", err)
	}
	if len(found) == 0 {
		return nil, nil
	}
	skip := make(map[string]bool, len(found))
	for _, k := range found {
		skip[k] = true
	}
	return skip, nil
}
