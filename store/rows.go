package store

import (
	"encoding/json"
	"fmt"
	"time"
)

// This file is how both drivers read a row into the store's types: one
// column list and one scan per row type, so a column added to a table is
// read the same way on SQLite and PostgreSQL. The scans take their NULLs
// as pointers (**int64, **string), which database/sql and pgx both fill
// with nil for NULL; database/sql also reads SQLite's 0/1 into a bool.

// RowScanner is one row of a result: *sql.Row, *sql.Rows, pgx.Row and
// pgx.Rows all are.
type RowScanner interface {
	Scan(dest ...any) error
}

// Times are stored as unix milliseconds. A nullable column keeps the zero
// time.Time as NULL; a NOT NULL one (a task's next poll, a lease's end)
// as 0.

// Millis is t for a nullable time column: nil for the zero time.
func Millis(t time.Time) *int64 {
	if t.IsZero() {
		return nil
	}
	ms := t.UnixMilli()
	return &ms
}

// FromMillis reads a nullable time column.
func FromMillis(ms *int64) time.Time {
	if ms == nil {
		return time.Time{}
	}
	return time.UnixMilli(*ms).UTC()
}

// ZeroMillis is t for a NOT NULL time column: the zero time is 0.
func ZeroMillis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// FromMillisOrZero reads a NOT NULL time column where 0 means none.
func FromMillisOrZero(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// UserColumns are the users columns ScanUser reads, in its order.
const UserColumns = `id, username, password_hash, role, status, quota, used_quota,
	request_count, invite_code, invited_by, invitation_quota, rpm, tpm, max_parallel, created_at`

// ScanUser reads a row of UserColumns.
func ScanUser(sc RowScanner) (*User, error) {
	var (
		u          User
		inviteCode *string
		createdAt  *int64
	)
	err := sc.Scan(&u.ID, &u.Username, &u.PasswordHash, &u.Role, &u.Status, &u.Quota,
		&u.UsedQuota, &u.RequestCount, &inviteCode, &u.InvitedBy, &u.InvitationQuota,
		&u.Limits.RPM, &u.Limits.TPM, &u.Limits.MaxParallel, &createdAt)
	if err != nil {
		return nil, err
	}
	if inviteCode != nil {
		u.InviteCode = *inviteCode
	}
	u.CreatedAt = FromMillis(createdAt)
	return &u, nil
}

// TokenColumns are the tokens columns ScanToken reads, in its order.
const TokenColumns = `id, user_id, name, key_hash, key_prefix, status, expires_at,
	quota_limit, used_quota, models, rpm, tpm, max_parallel, created_at, management`

// ScanToken reads a row of TokenColumns.
func ScanToken(sc RowScanner) (*Token, error) {
	var (
		t                    Token
		expiresAt, createdAt *int64
		models               string
	)
	err := sc.Scan(&t.ID, &t.UserID, &t.Name, &t.KeyHash, &t.KeyPrefix, &t.Status, &expiresAt,
		&t.QuotaLimit, &t.UsedQuota, &models, &t.Limits.RPM, &t.Limits.TPM, &t.Limits.MaxParallel, &createdAt,
		&t.Management)
	if err != nil {
		return nil, err
	}
	t.ExpiresAt = FromMillis(expiresAt)
	t.CreatedAt = FromMillis(createdAt)
	if t.Models, err = DecodeModels(models); err != nil {
		return nil, fmt.Errorf("token %d: %w", t.ID, err)
	}
	return &t, nil
}

// EncodeModels is a token's models column: a JSON array, not
// comma-separated, because nothing stops a model name from containing a
// comma. No models is the empty string.
func EncodeModels(models []string) (string, error) {
	if len(models) == 0 {
		return "", nil
	}
	b, err := json.Marshal(models)
	return string(b), err
}

// DecodeModels reads what EncodeModels wrote.
func DecodeModels(s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	var models []string
	if err := json.Unmarshal([]byte(s), &models); err != nil {
		return nil, fmt.Errorf("decode models: %w", err)
	}
	return models, nil
}

// CodeColumns are the redemption_codes columns ScanCode reads, in its
// order.
const CodeColumns = `id, code, quota, status, used_by, created_at, redeemed_at, expires_at, name, plan, plan_days`

// ScanCode reads a row of CodeColumns.
func ScanCode(sc RowScanner) (*RedemptionCode, error) {
	var (
		c                               RedemptionCode
		createdAt, redeemedAt, expireAt *int64
	)
	if err := sc.Scan(&c.ID, &c.Code, &c.Quota, &c.Status, &c.UsedBy, &createdAt, &redeemedAt, &expireAt,
		&c.Name, &c.Plan, &c.PlanDays); err != nil {
		return nil, err
	}
	c.CreatedAt = FromMillis(createdAt)
	c.RedeemedAt = FromMillis(redeemedAt)
	c.ExpiresAt = FromMillis(expireAt)
	return &c, nil
}

// SessionColumns are the sessions columns ScanSession reads, in its order.
const SessionColumns = `id_hash, user_id, expires_at, created_at`

// ScanSession reads a row of SessionColumns.
func ScanSession(sc RowScanner) (*Session, error) {
	var (
		sess                 Session
		expiresAt, createdAt *int64
	)
	if err := sc.Scan(&sess.IDHash, &sess.UserID, &expiresAt, &createdAt); err != nil {
		return nil, err
	}
	sess.ExpiresAt = FromMillis(expiresAt)
	sess.CreatedAt = FromMillis(createdAt)
	return &sess, nil
}

// UsageColumns are the usage_logs columns ScanUsage reads, in its order.
const UsageColumns = `id, COALESCE(row_key, ''), created_at, user_id, token_id, model, channel, endpoint,
	prompt_tokens, completion_tokens, cached_tokens, reasoning_tokens, cost, status,
	estimated, stream, latency_ms, ttfb_ms, error, request_id, upstream_request_id, trace_id, windows, plan,
	cache_hit, cache_saved, price_tier`

// ScanUsage reads a row of UsageColumns.
func ScanUsage(sc RowScanner) (*UsageLog, error) {
	var (
		l         UsageLog
		createdAt *int64
	)
	err := sc.Scan(&l.ID, &l.Key, &createdAt, &l.UserID, &l.TokenID, &l.Model, &l.Channel, &l.Endpoint,
		&l.PromptTokens, &l.CompletionTokens, &l.CachedTokens, &l.ReasoningTokens, &l.Cost,
		&l.Status, &l.Estimated, &l.Stream, &l.LatencyMS, &l.TTFBMS, &l.Error, &l.RequestID,
		&l.UpstreamRequestID, &l.TraceID, &l.Windows, &l.Plan, &l.CacheHit, &l.CacheSaved, &l.PriceTier)
	if err != nil {
		return nil, err
	}
	l.CreatedAt = FromMillis(createdAt)
	return &l, nil
}

// TaskColumns are the tasks columns ScanTask reads, in its order.
const TaskColumns = `id, user_id, token_id, channel, model, upstream_id, status, reserved,
	result, created_at, updated_at, progress, files, error, duration, price_task, price_second,
	cost, request_id, finished_at, next_poll_at, polls, lease_owner, lease_until, windows, plan`

// ScanTask reads a row of TaskColumns.
func ScanTask(sc RowScanner) (*Task, error) {
	var (
		t                                Task
		createdAt, updatedAt, finishedAt *int64
		nextPollAt, leaseUntil           int64
	)
	err := sc.Scan(&t.ID, &t.UserID, &t.TokenID, &t.Channel, &t.Model, &t.UpstreamID,
		&t.Status, &t.Reserved, &t.Result, &createdAt, &updatedAt, &t.Progress, &t.Files, &t.Error,
		&t.Duration, &t.PriceTask, &t.PriceSecond, &t.Cost, &t.RequestID, &finishedAt,
		&nextPollAt, &t.Polls, &t.LeaseOwner, &leaseUntil, &t.Windows, &t.Plan)
	if err != nil {
		return nil, err
	}
	t.CreatedAt = FromMillis(createdAt)
	t.UpdatedAt = FromMillis(updatedAt)
	t.FinishedAt = FromMillis(finishedAt)
	t.NextPollAt = FromMillisOrZero(nextPollAt)
	t.LeaseUntil = FromMillisOrZero(leaseUntil)
	return &t, nil
}

// AuditColumns are the audit_log columns ScanAudit reads, in its order.
const AuditColumns = `id, created_at, actor_id, actor, action, target, before_json, after_json`

// ScanAudit reads a row of AuditColumns.
func ScanAudit(sc RowScanner) (*AuditEntry, error) {
	var (
		e             AuditEntry
		at            int64
		before, after string
	)
	if err := sc.Scan(&e.ID, &at, &e.ActorID, &e.Actor, &e.Action, &e.Target, &before, &after); err != nil {
		return nil, err
	}
	e.CreatedAt = FromMillisOrZero(at)
	if before != "" {
		e.Before = []byte(before)
	}
	if after != "" {
		e.After = []byte(after)
	}
	return &e, nil
}

// ScanUsageTotal reads a row of UsageTotals' query: the day number, the
// group's key, then the sums in UsageTotal's order.
func ScanUsageTotal(sc RowScanner) (UsageTotal, error) {
	var (
		t   UsageTotal
		day int64
	)
	if err := sc.Scan(&day, &t.Key, &t.Requests, &t.Errors, &t.Cost, &t.Tokens, &t.PromptTokens,
		&t.CachedTokens, &t.LatencyMS, &t.TTFBMS, &t.CacheHits, &t.CacheSaved); err != nil {
		return t, err
	}
	t.Day = time.UnixMilli(day * MsPerDay).UTC()
	return t, nil
}

// Rows is a query's rows: *sql.Rows and pgx.Rows both are. Closing them
// is the driver's (the two Close differ), and so is the error of the
// query itself.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// Collect scans every row with scan; an empty, non-nil slice when there
// are none, so that listings encode as [] rather than null. err is the
// query's: when it is set the rows are not read. Either error is wrapped
// as format and args say.
func Collect[T any](rows Rows, err error, scan func(RowScanner) (T, error), format string, args ...any) ([]T, error) {
	if err != nil {
		return nil, fmt.Errorf(format+": %w", append(args, err)...)
	}
	out := []T{}
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf(format+": %w", append(args, err)...)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf(format+": %w", append(args, err)...)
	}
	return out, nil
}

// ReadBudgets reads rows of (subject, window_kind, limit_units) into
// Budgets' answer, adding to out.
func ReadBudgets(rows Rows, out map[string]map[string]int64) error {
	for rows.Next() {
		var subject, window string
		var limit int64
		if err := rows.Scan(&subject, &window, &limit); err != nil {
			return err
		}
		if out[subject] == nil {
			out[subject] = map[string]int64{}
		}
		out[subject][window] = limit
	}
	return rows.Err()
}

// ReadWindowSpend reads rows of (window_id, spent) into out.
func ReadWindowSpend(rows Rows, out map[string]int64) error {
	for rows.Next() {
		var id string
		var v int64
		if err := rows.Scan(&id, &v); err != nil {
			return err
		}
		out[id] = v
	}
	return rows.Err()
}

// ScanDailySpend reads a usage_daily row of (day, cost, requests).
func ScanDailySpend(sc RowScanner) (DailySpend, error) {
	var (
		day int64
		d   DailySpend
	)
	if err := sc.Scan(&day, &d.Cost, &d.Requests); err != nil {
		return d, err
	}
	d.Day = time.UnixMilli(day * MsPerDay).UTC()
	return d, nil
}

// UsageDayColumns are the usage_daily_models columns ScanUsageDay reads,
// in its order.
const UsageDayColumns = `day, user_id, model, requests, prompt_tokens, completion_tokens, cached_tokens,
	reasoning_tokens, cost`

// ScanUsageDay reads a row of UsageDayColumns.
func ScanUsageDay(sc RowScanner) (*UsageDay, error) {
	var (
		d   UsageDay
		day int64
	)
	if err := sc.Scan(&day, &d.UserID, &d.Model, &d.Requests, &d.PromptTokens, &d.CompletionTokens,
		&d.CachedTokens, &d.ReasoningTokens, &d.Cost); err != nil {
		return nil, err
	}
	d.Day = time.UnixMilli(day * MsPerDay).UTC()
	return &d, nil
}

// UserBudgetColumns are the user_budgets columns ScanUserBudget reads, in
// its order.
const UserBudgetColumns = `budget_group, plan, plan_until`

// ScanUserBudget reads a row of UserBudgetColumns.
func ScanUserBudget(sc RowScanner) (UserBudget, error) {
	var (
		b     UserBudget
		until int64
	)
	if err := sc.Scan(&b.Group, &b.Plan, &until); err != nil {
		return UserBudget{}, err
	}
	b.PlanUntil = FromMillisOrZero(until)
	return b, nil
}
