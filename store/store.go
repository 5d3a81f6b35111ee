// Package store is the gateway's persistence boundary: users, tokens,
// sessions, redemption codes, usage logs and tasks. Every read and write the
// rest of the gateway does goes through the Store interface, so that an
// embedded SQLite file and a shared PostgreSQL server are interchangeable.
//
// This package holds types, the interface and what both drivers share of
// reading rows (rows.go) and of their pure logic; it must not import any
// SQL driver. Implementations live in sub-packages (store/sqlite) and register
// themselves with Register so the gateway app can open them by driver name.
package store

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// Errors every implementation returns so callers can branch without knowing
// the backend.
var (
	ErrNotFound          = errors.New("not found")
	ErrConflict          = errors.New("already exists")
	ErrInsufficientQuota = errors.New("insufficient quota")
)

// Roles a user may have, from least to most privileged.
const (
	RoleUser  = "user"
	RoleAdmin = "admin"
	RoleRoot  = "root"
)

// User statuses.
const (
	UserEnabled  = "enabled"
	UserDisabled = "disabled"
)

// Token statuses.
const (
	TokenEnabled  = "enabled"
	TokenDisabled = "disabled"
)

// User is an account that owns tokens and a quota balance. Quota is in units
// of 1/1,000,000 USD.
type User struct {
	ID              int64  `json:"id"`
	Username        string `json:"username"`
	PasswordHash    string `json:"-"`
	Role            string `json:"role"`
	Status          string `json:"status"`     // enabled or disabled
	Quota           int64  `json:"quota"`      // remaining balance
	UsedQuota       int64  `json:"used_quota"` // charged so far
	RequestCount    int64  `json:"request_count"`
	InviteCode      string `json:"invite_code"`      // this user's own code to invite others
	InvitedBy       int64  `json:"invited_by"`       // inviter's user id, 0 if none
	InvitationQuota int64  `json:"invitation_quota"` // rewards earned by inviting, not yet transferred
	// Limits are the user's own rate limits, over all of their keys.
	Limits    Limits    `json:"limits"`
	CreatedAt time.Time `json:"created_at"`
}

// Limits are rate limits; a zero field means the gateway-wide default
// applies (and a zero default means no limit).
type Limits struct {
	RPM         int64 `json:"rpm,omitempty"`          // requests a minute
	TPM         int64 `json:"tpm,omitempty"`          // tokens a minute, prompt and completion
	MaxParallel int64 `json:"max_parallel,omitempty"` // requests at once
}

// Token is an API key. The key itself is never stored: only its SHA-256
// hash, and a short prefix so a person can tell keys apart.
type Token struct {
	ID        int64  `json:"id"`
	UserID    int64  `json:"user_id"`
	Name      string `json:"name"`
	KeyHash   string `json:"-"`
	KeyPrefix string `json:"key_prefix"`
	Status    string `json:"status"`
	// ExpiresAt is the zero time when the token never expires.
	ExpiresAt time.Time `json:"expires_at"`
	// QuotaLimit caps what this token may spend in total; 0 means no cap of its own.
	QuotaLimit int64 `json:"quota_limit"`
	UsedQuota  int64 `json:"used_quota"`
	// Models is the allow-list; empty means every model.
	Models []string `json:"models"`
	// Limits are the key's own rate limits.
	Limits Limits `json:"limits"`
	// Management says the key reaches the account and admin API as its
	// owner's login does; other keys reach the model and task endpoints
	// only. Set when the key is made, never changed.
	Management bool      `json:"management"`
	CreatedAt  time.Time `json:"created_at"`
}

// InvitationReward is what an invitee's signup owes their inviter, and
// what pays it: the first payment (a code redeemed, an administrator's
// credit) of at least MinPayment units (0: Amount itself), or a plan
// code when PlanCodes says so.
type InvitationReward struct {
	Amount     int64
	MinPayment int64
	PlanCodes  bool
}

// Redemption code statuses.
const (
	CodeEnabled  = "enabled"
	CodeDisabled = "disabled"
)

// RedemptionCode is a one-time code that adds quota to the user who redeems it.
type RedemptionCode struct {
	ID         int64     `json:"id"`
	Code       string    `json:"code"`
	Quota      int64     `json:"quota"`
	Status     string    `json:"status"`  // enabled or disabled; "" is enabled
	UsedBy     int64     `json:"used_by"` // 0 while unused
	CreatedAt  time.Time `json:"created_at"`
	RedeemedAt time.Time `json:"redeemed_at"`
	// ExpiresAt is the zero time when the code never expires.
	ExpiresAt time.Time `json:"expires_at"`
	// Name is the batch's name, given when the codes were made ("" none).
	Name string `json:"name"`
	// Plan, when set, is what the code grants instead of quota (which is
	// then 0): the plan for PlanDays from its redemption, or from the end
	// of the same plan still running
	Plan     string `json:"plan,omitempty"`
	PlanDays int64  `json:"plan_days,omitempty"`
}

// Session is a logged-in browser session; the cookie carries the ID, the
// store keeps only its hash.
type Session struct {
	IDHash    string
	UserID    int64
	ExpiresAt time.Time
	CreatedAt time.Time
}

// UsageLog is one row per relayed request, successful or not.
type UsageLog struct {
	ID int64 `json:"id"`
	// Key is unique to the request: a row whose key is already stored is
	// not written or charged again, so replaying a journal is idempotent.
	// Empty for rows that need no such guard.
	Key              string    `json:"key,omitempty"`
	CreatedAt        time.Time `json:"created_at"`
	UserID           int64     `json:"user_id"`
	TokenID          int64     `json:"token_id"`
	Model            string    `json:"model"`
	Channel          string    `json:"channel"`
	Endpoint         string    `json:"endpoint"`
	PromptTokens     int64     `json:"prompt_tokens"`
	CompletionTokens int64     `json:"completion_tokens"`
	CachedTokens     int64     `json:"cached_tokens"`
	ReasoningTokens  int64     `json:"reasoning_tokens"`
	Cost             int64     `json:"cost"` // quota units charged
	Status           int       `json:"status"`
	Estimated        bool      `json:"estimated"` // token counts came from the local tokenizer
	Stream           bool      `json:"stream"`
	LatencyMS        int64     `json:"latency_ms"`
	TTFBMS           int64     `json:"ttfb_ms"`
	Error            string    `json:"error"`
	// RequestID is the gateway's id for the request (X-Request-Id);
	// UpstreamRequestID the upstream's own, as its answer gave it.
	RequestID         string `json:"request_id"`
	UpstreamRequestID string `json:"upstream_request_id"`
	// TraceID is the request's OpenTelemetry trace id (hex), "" when the
	// site has no tracing.
	TraceID string `json:"trace_id,omitempty"`
	// Windows are the spending windows the cost counted against,
	// comma-separated ids ("user:3/daily@2026-11-26"); see BudgetStore
	Windows string `json:"windows,omitempty"`
	// Plan is the plan that paid Cost: the user's balance and the key's
	// used quota are not charged with it
	Plan string `json:"plan,omitempty"`
	// CacheHit says the response cache answered; CacheSaved is what the
	// answer would have cost beyond what the hit was charged
	CacheHit   bool  `json:"cache_hit,omitempty"`
	CacheSaved int64 `json:"cache_saved,omitempty"`
	// PriceTier is the tier of the model's price the request was billed
	// at: the prompt length in tokens the tier applies above, 0 for the
	// base prices
	PriceTier int64 `json:"price_tier,omitempty"`
}

// UsageDay is one UTC day's usage of one model by one user, with tokens:
// DailySpend's detail. Days are written with the usage rows and kept when
// retention deletes the rows.
type UsageDay struct {
	Day              time.Time `json:"day"` // midnight UTC
	UserID           int64     `json:"user_id"`
	Model            string    `json:"model"`
	Requests         int64     `json:"requests"`
	PromptTokens     int64     `json:"prompt_tokens"`
	CompletionTokens int64     `json:"completion_tokens"`
	CachedTokens     int64     `json:"cached_tokens"`
	ReasoningTokens  int64     `json:"reasoning_tokens"`
	Cost             int64     `json:"cost"`
}

// Task is a long-running generation job (video, music) polled upstream.
// Status is one of the task endpoints' statuses (not_started, running,
// finished, failed); a task is settled, its money final, exactly when
// FinishedAt is set.
type Task struct {
	ID         string    `json:"task_id"`
	UserID     int64     `json:"user_id"`
	TokenID    int64     `json:"token_id"`
	Channel    string    `json:"channel"`
	Model      string    `json:"model"`
	UpstreamID string    `json:"upstream_id"`
	Status     string    `json:"status"`
	Reserved   int64     `json:"reserved"`
	Result     string    `json:"result"` // JSON as the adapter produced it
	CreatedAt  time.Time `json:"created_at"`
	UpdatedAt  time.Time `json:"updated_at"`

	Progress int    `json:"progress"` // 0..100
	Files    string `json:"files"`    // JSON array of {file_url, file_type}, the vendor's URLs
	Error    string `json:"error"`    // why it failed
	// Duration is the video length the client asked for in seconds (0:
	// the vendor's default); PriceTask and PriceSecond are the model's
	// prices in quota units when it was submitted, which settle it.
	Duration    int   `json:"duration"`
	PriceTask   int64 `json:"price_task"`
	PriceSecond int64 `json:"price_second"`
	// Cost is what the task was charged, once settled.
	Cost       int64     `json:"cost"`
	RequestID  string    `json:"request_id"` // the submit request's X-Request-Id
	FinishedAt time.Time `json:"finished_at"`

	// NextPollAt is when the poller asks the upstream next; Polls counts
	// the polls so far (its backoff).
	NextPollAt time.Time `json:"next_poll_at"`
	Polls      int       `json:"polls"`
	// LeaseOwner holds the task until LeaseUntil: only it polls or saves
	// the task meanwhile.
	LeaseOwner string    `json:"lease_owner"`
	LeaseUntil time.Time `json:"lease_until"`

	// Windows are the spending windows the reservation counts in
	// (UsageLog.Windows), from the submit; Plan is the plan that pays the
	// task, "" when the balance does. CreateTask adds the reservation to
	// each window's spend and, when no plan pays, takes it from the
	// balances; FinishTask gives back what the task did not cost to both.
	Windows string `json:"windows,omitempty"`
	Plan    string `json:"plan,omitempty"`
}

// TaskTrace is the trace of a task's submit: its trace and span ids, hex.
type TaskTrace struct {
	TraceID, SpanID string
}

// UsageFilter narrows ListUsage; zero fields do not filter.
type UsageFilter struct {
	UserID int64
	Model  string
	// Since (inclusive) and Until (exclusive) bound created_at.
	Since, Until time.Time
	// After continues a listing: only rows older than this cursor, which is
	// the last row of the previous page. Paging by cursor rather than by
	// offset keeps the hundredth page as cheap as the first.
	After *UsageCursor
	Limit int
	// TokenID, Channel and RequestID (the gateway's or the upstream's id)
	// match exactly; Status is "ok" (2xx), "error" (any other) or a
	// status code such as "429".
	TokenID   int64
	Channel   string
	Status    string
	RequestID string
}

// UsageStatusOK and UsageStatusError are UsageFilter.Status's classes.
const (
	UsageStatusOK    = "ok"
	UsageStatusError = "error"
)

// UsageCursor is a position in the newest-first order of usage rows.
type UsageCursor struct {
	CreatedAt time.Time
	ID        int64
}

// DailySpend is what one user spent on one UTC day.
type DailySpend struct {
	Day      time.Time `json:"day"` // midnight UTC
	Cost     int64     `json:"cost"`
	Requests int64     `json:"requests"`
}

// UserChange is an administrator's change to one user, which UpdateUser
// applies whole or not at all. Nil fields and a zero QuotaDelta are kept.
type UserChange struct {
	Status *string
	Role   *string
	// QuotaDelta is added to the balance. A credit (> 0) is a payment and
	// pays any invitation reward the user's signup owes, as CreditQuota
	// does; a debit (< 0) that would take the balance below zero is
	// ErrInsufficientQuota.
	QuotaDelta int64
	Limits     *Limits
	// EndSessions logs the user out everywhere (disabled, or a new role).
	EndSessions bool
}

// UserFilter narrows ListUsers: users with an id above AfterID, oldest first.
type UserFilter struct {
	AfterID int64
	Limit   int
	// Search keeps users whose name holds it, in any case.
	Search string
	// Plan and Group keep the users assigned that plan or budget group
	// (user_budgets), exactly; "" does not filter.
	Plan, Group string
}

// CodeFilter narrows ListRedemptionCodes: codes with an id below BeforeID
// (when not zero), newest first.
type CodeFilter struct {
	BeforeID int64
	Limit    int
	// Search keeps codes whose batch name or code holds it, in any case;
	// Name keeps one batch, by its exact name.
	Search, Name string
	// UsedBy keeps the codes a user redeemed (0: no filter).
	UsedBy int64
}

// LeaseAccount names a balance that gateway instances lease slices of: a
// user's quota, or a token's own limit (QuotaLimit - UsedQuota).
type LeaseAccount struct {
	Token bool // false: the user's quota; true: the token's own limit
	ID    int64
}

// LeaseRequest asks that an owner's lease on one account become Want, or
// as much of it as the balance no other live lease holds, but never less
// than Keep: what the owner admitted against its lease and has not yet
// charged, which is spent whatever the balance now says. When what it can
// have is less than Need, it holds only Keep: an instance that cannot get
// enough for the request at hand gives its fragment back rather than sit
// on it, so that the fragments of several instances cannot together hold
// a balance none of them can spend.
type LeaseRequest struct {
	Account          LeaseAccount
	Want, Keep, Need int64
}

// Lease is what an owner holds on one account after LeaseBalances.
type Lease struct {
	Account LeaseAccount
	Amount  int64
	// Free is the balance no live lease holds, this one included: what a
	// top-up could still get. Below zero when the balance was lowered
	// (a charge, a debit) under leases taken before.
	Free int64
	// Balance is the account's balance as read (a user's quota, a limited
	// key's limit less its use), leased or not: a lease granted above it
	// (its Keep) is more than the owner can spend.
	Balance int64
}

// RateUse is one instance's use of a key's or a user's rate limits, as
// it reports it: requests admitted and tokens used in the last minute,
// requests in flight now.
type RateUse struct {
	Token                      bool // false: a user's limits; true: a key's
	ID                         int64
	Requests, Tokens, Parallel int64
}

// RateShare is what the other instances reported of one key's or user's
// use, live reports only.
type RateShare struct {
	Requests, Tokens, Parallel int64
	// Owners is how many other instances use it; Before, how many of them
	// have a name that sorts before the asker's (who gets a remainder).
	Owners, Before int
}

// Store is everything the gateway persists.
type Store interface {
	BudgetStore       // spending windows (budgets.go)
	UserPageStore     // what the console's user page reads (userpage.go)
	ClientSecretStore // Realtime client secrets (clientsecrets.go)
	AlertStore        // budget alerts (alerts.go)
	RuntimeStore      // channels, prices and plans made at runtime (runtime.go)
	PaymentStore      // self-serve top-ups (payments.go)
	FileStore         // files and the batches listed (files.go)
	SignInStore       // reset links, second factors, SSO links (signin.go)

	// Users.
	CreateUser(ctx context.Context, u *User) error // sets u.ID and u.CreatedAt
	UserByID(ctx context.Context, id int64) (*User, error)
	UserByName(ctx context.Context, username string) (*User, error)
	UserByInviteCode(ctx context.Context, code string) (*User, error)
	CountUsers(ctx context.Context) (int64, error)
	// UpdatePassword replaces a user's password hash and ends every session
	// of theirs but keepSession (an id hash; "" ends them all), in one
	// transaction: whoever knew the old password is logged out with it.
	UpdatePassword(ctx context.Context, userID int64, hash, keepSession string) error
	// AddQuota adds delta (which may be negative) to a user's balance.
	AddQuota(ctx context.Context, userID int64, delta int64) error
	// TransferInvitationQuota moves amount from invitation quota to quota;
	// ErrInsufficientQuota when the invitation quota is smaller.
	TransferInvitationQuota(ctx context.Context, userID int64, amount int64) error
	// RegisterUser creates u (as CreateUser) and, when u.InvitedBy is not
	// zero, records reward as owed to the inviter, in one transaction. The
	// reward is paid into the inviter's invitation quota by u's first
	// payment that reward's rule accepts (Redeem, CreditQuota or a credit
	// through UpdateUser), in that payment's transaction, exactly once: a
	// signup alone never mints quota, nor does a payment smaller than the
	// reward's minimum.
	RegisterUser(ctx context.Context, u *User, reward InvitationReward) error
	// CreditQuota adds a payment (an administrator's credit, amount > 0)
	// to a user's balance and pays any invitation reward their signup owes,
	// in one transaction.
	CreditQuota(ctx context.Context, userID int64, amount int64) error
	// ListUsers pages through users by id.
	ListUsers(ctx context.Context, f UserFilter) ([]*User, error)
	SetUserStatus(ctx context.Context, userID int64, status string) error
	SetUserRole(ctx context.Context, userID int64, role string) error
	// UpdateUser applies c to a user in one transaction and returns the
	// user as it then is: a change is never half made, and a debit is
	// checked against the balance it is taken from.
	UpdateUser(ctx context.Context, userID int64, c UserChange) (*User, error)

	// Tokens.
	CreateToken(ctx context.Context, t *Token) error // sets t.ID and t.CreatedAt
	// CreateTokenFrom creates t (as CreateToken) and, in the same
	// transaction, takes t.QuotaLimit from the quota limit of token
	// parentID of the same user: a limited management key hands part of
	// what it has left to a key it makes, so keys made under it cannot
	// together spend more than it could. The parent keeps a limit of at
	// least 1 and of its used quota (a limit of 0 would mean none);
	// ErrInsufficientQuota when it has too little left, and nothing is
	// made.
	CreateTokenFrom(ctx context.Context, t *Token, parentID int64) error
	TokenByHash(ctx context.Context, keyHash string) (*Token, error)
	TokenByID(ctx context.Context, id int64) (*Token, error)
	ListTokens(ctx context.Context, userID int64) ([]*Token, error)
	SetTokenStatus(ctx context.Context, id int64, status string) error
	// UpdateToken writes t's name, status, expiry, quota limit and models,
	// only if the token belongs to t.UserID; ErrNotFound otherwise.
	UpdateToken(ctx context.Context, t *Token) error
	// DeleteToken removes a token of userID's; ErrNotFound if there is none.
	DeleteToken(ctx context.Context, userID, id int64) error
	// SetTokenLimits and SetUserLimits replace the rate limits.
	SetTokenLimits(ctx context.Context, id int64, l Limits) error
	SetUserLimits(ctx context.Context, userID int64, l Limits) error

	// Quota movement. Reservations live in the gateway's memory (the
	// billing ledger, against its leases); the store only sees settled
	// costs. SettleBatch writes every row and charges each row's Cost to
	// its user (quota down, used quota and request count up) and token
	// (used quota up), all in one transaction, so a batch is either wholly
	// applied or not at all. A row whose Key is already stored is skipped
	// with its charge.
	SettleBatch(ctx context.Context, logs []*UsageLog) error

	// Balance leases: an instance holds a slice of a balance to admit
	// requests against in memory. A lease is a claim, not a debit: the
	// balance (users.quota, a token's limit) is charged only by settled
	// costs, so a lease that runs out or is dropped gives nothing back and
	// loses nothing; other instances merely cannot lease what it claims.
	//
	// LeaseBalances sets owner's lease on each account, in one
	// transaction, as LeaseRequest says, until until; a lease of 0 is
	// dropped. An account that does not exist, or a token without a
	// limit of its own, grants nothing. Expired leases (of any owner)
	// count for nothing, so a killed instance's leases come back when
	// they run out.
	LeaseBalances(ctx context.Context, owner string, until time.Time, reqs []LeaseRequest) ([]Lease, error)
	// DropExpiredLeases deletes leases that ran out before now, as any
	// instance may, and says how many.
	DropExpiredLeases(ctx context.Context, now time.Time) (int64, error)

	// ShareRates records owner's use of each key's and user's rate limits
	// until until (a use of all zeros is dropped) and returns, for each,
	// what the other owners' live reports hold: rate limits are shared by
	// instances through these reports, each admitting in memory its share
	// of what the others leave.
	ShareRates(ctx context.Context, owner string, until time.Time, uses []RateUse) ([]RateShare, error)

	// Redemption codes.
	CreateRedemptionCodes(ctx context.Context, codes []*RedemptionCode) error
	// Redeem marks the code used by userID and credits its quota, and pays
	// any invitation reward userID's signup owes, atomically;
	// ErrNotFound when the code does not exist, was used already, is
	// disabled or has expired.
	Redeem(ctx context.Context, code string, userID int64) (int64, error)
	ListRedemptionCodes(ctx context.Context, f CodeFilter) ([]*RedemptionCode, error)
	SetRedemptionCodeStatus(ctx context.Context, id int64, status string) error

	// Sessions.
	CreateSession(ctx context.Context, s *Session) error
	SessionByHash(ctx context.Context, idHash string) (*Session, error)
	DeleteSession(ctx context.Context, idHash string) error
	// TouchSession moves a live session's expiry (sliding sessions).
	TouchSession(ctx context.Context, idHash string, expiresAt time.Time) error
	// DeleteUserSessions logs a user out everywhere.
	DeleteUserSessions(ctx context.Context, userID int64) error

	// Usage logs.
	ListUsage(ctx context.Context, f UsageFilter) ([]*UsageLog, error)
	// DailySpend sums a user's cost per UTC day from since on, oldest first;
	// days without spend are absent.
	DailySpend(ctx context.Context, userID int64, since time.Time) ([]DailySpend, error)
	CountUsage(ctx context.Context) (int64, error)
	// UsageSince returns up to limit rows created at or after since with an
	// id above afterID, in id order: pages for a streamed export.
	UsageSince(ctx context.Context, since time.Time, afterID int64, limit int) ([]*UsageLog, error)
	// DeleteUsageBefore deletes up to limit rows created before cutoff, the
	// oldest first, in one short transaction, and says how many it deleted.
	// Their days stay in DailySpend and DailyUsageByModel.
	DeleteUsageBefore(ctx context.Context, cutoff time.Time, limit int) (int64, error)
	// DailyUsageByModel returns the per-day totals of a user (every user
	// when userID is 0) for each model from since on, oldest first.
	DailyUsageByModel(ctx context.Context, userID int64, since time.Time) ([]*UsageDay, error)
	// Ping checks that the store can take a write right now.
	Ping(ctx context.Context) error

	// Tasks. A task's money outlives the request that submitted it, so it
	// is kept in the store rather than the in-memory ledger: CreateTask
	// debits the reservation, FinishTask credits back what the task did
	// not cost, once.
	//
	// CreateTask stores a new task and, in the same transaction, takes its
	// Reserved from its user's quota and adds it to its token's used quota
	// (not when a Plan pays it), and adds it to each of its Windows' spend.
	// Zero times become now; an empty Status is not_started. An ID already
	// stored is ErrConflict.
	CreateTask(ctx context.Context, t *Task) error
	TaskByID(ctx context.Context, id string) (*Task, error)
	// UpdateTask writes what a poll or a submit learned (Status, Progress,
	// Files, Error, Result, UpstreamID, Channel, NextPollAt, Polls) and
	// releases the lease, only while the task is unfinished and leased by
	// t.LeaseOwner; ErrConflict otherwise, ErrNotFound for no such task.
	UpdateTask(ctx context.Context, t *Task) error
	// LeaseTasks leases to owner until until up to limit unfinished tasks
	// whose poll is due and whose lease has run out, atomically, and
	// returns them: two gateways on one database never get the same task.
	LeaseTasks(ctx context.Context, owner string, until time.Time, limit int) ([]*Task, error)
	// LeaseTask leases one unfinished task whose lease has run out and
	// returns it; ErrConflict when it is finished or held (by anyone, owner
	// too), ErrNotFound for no such task.
	LeaseTask(ctx context.Context, id, owner string, until time.Time) (*Task, error)
	// ReleaseTasks ends every lease owner holds (an instance stopping).
	ReleaseTasks(ctx context.Context, owner string) error
	// FinishTask is a task's terminal transition: it writes t's final
	// Status, Progress, Files, Error, Result and Cost, sets FinishedAt,
	// credits the reservation back to the user and token (when they paid
	// it) and to its windows, and charges Cost through row (written as
	// SettleBatch writes a row, with the task's own cost, windows and
	// plan), all in one transaction, if and only if the task was not
	// finished before. It reports whether this call settled it, and sets
	// t's Windows and Plan from the stored task.
	FinishTask(ctx context.Context, t *Task, row *UsageLog) (bool, error)
	// PendingTasks returns up to limit unfinished tasks, least recently
	// updated first.
	PendingTasks(ctx context.Context, limit int) ([]*Task, error)
	// SetTaskTrace keeps the trace of a task's submit (its trace and span
	// ids, hex), which each poll's span links to; ErrNotFound for no such
	// task. TaskTrace reads them back ("" when the submit was not traced).
	SetTaskTrace(ctx context.Context, id string, trace TaskTrace) error
	TaskTrace(ctx context.Context, id string) (TaskTrace, error)

	// Audit log. AddAudit appends e (setting its ID, and CreatedAt when
	// zero); ListAudit pages through entries newest first.
	AddAudit(ctx context.Context, e *AuditEntry) error
	ListAudit(ctx context.Context, f AuditFilter) ([]*AuditEntry, error)
	// UsageTotals sums the rows f selects (its After and Limit aside) per
	// UTC day and per by, oldest day first: the operators' dashboard and
	// channels, counted by the database rather than over fetched rows.
	UsageTotals(ctx context.Context, f UsageFilter, by UsageGroup) ([]UsageTotal, error)
	// DailyTotals are UsageTotals of every row from since's UTC day on
	// (no other filter), read from the per-day totals each batch writes
	// with its rows (SettleBatch, FinishTask): their cost is the days
	// and keys asked for, not the rows, and they outlive usage retention.
	// With top > 0, only the days of the top keys over the period: the
	// costliest, then those with the most requests, then by key.
	DailyTotals(ctx context.Context, by UsageGroup, since time.Time, top int) ([]UsageTotal, error)

	// The response cache's entries shared by several instances. Entries
	// are opaque bytes under a key. GetCachedResponse returns key's entry
	// unless it expired by now (ErrNotFound), marking it used now.
	// PutCachedResponse keeps entry (replacing key's), drops expired
	// entries, then the least recently used until the entries' sizes sum
	// to at most maxBytes; an entry larger than maxBytes is not kept.
	GetCachedResponse(ctx context.Context, key string, now time.Time) ([]byte, error)
	PutCachedResponse(ctx context.Context, key string, entry []byte, expires, now time.Time, maxBytes int64) error

	Close() error
}

// AuditEntry is one administrator's action: who did what to which thing,
// with the fields it changed before and after as JSON objects. Callers
// leave secrets (passwords, their hashes, keys) out of Before and After.
type AuditEntry struct {
	ID        int64     `json:"id"`
	CreatedAt time.Time `json:"created_at"`
	ActorID   int64     `json:"actor_id"` // 0: not a user (the CLI)
	Actor     string    `json:"actor"`
	Action    string    `json:"action"` // such as user.create, code.disable
	Target    string    `json:"target"` // such as user:7, key:3, channel:primary
	// Before and After are JSON objects, or empty.
	Before json.RawMessage `json:"before,omitempty"`
	After  json.RawMessage `json:"after,omitempty"`
}

// AuditFilter narrows ListAudit; zero fields do not filter. Actor and
// Action match exactly; an Action ending in "." matches every action
// that begins with it ("user." for every change to users).
type AuditFilter struct {
	Actor, Action, Target string
	// Since (inclusive) and Until (exclusive) bound created_at.
	Since, Until time.Time
	// BeforeID continues a listing: entries with a smaller id.
	BeforeID int64
	Limit    int
}

// UsageGroup is what UsageTotals sums by.
type UsageGroup string

const (
	ByChannel UsageGroup = "channel"
	ByModel   UsageGroup = "model"
	ByUser    UsageGroup = "user_id"
	ByToken   UsageGroup = "token_id"
)

// UsageTotal is one day's rows of one channel, model, user or key.
type UsageTotal struct {
	Day time.Time `json:"day"` // midnight UTC
	// Key is the channel or model, or the user's or key's id in decimal.
	Key      string `json:"key"`
	Requests int64  `json:"requests"`
	Errors   int64  `json:"errors"` // rows whose status is not 2xx
	Cost     int64  `json:"cost"`
	Tokens   int64  `json:"tokens"` // prompt and completion
	// PromptTokens and CachedTokens, for the prompt cache's share
	PromptTokens int64 `json:"prompt_tokens"`
	CachedTokens int64 `json:"cached_tokens"`
	// LatencyMS and TTFBMS are sums, for averages.
	LatencyMS int64 `json:"latency_ms"`
	TTFBMS    int64 `json:"ttfb_ms"`
	// CacheHits are the rows the response cache answered, CacheSaved
	// what they would have cost beyond what they were charged
	CacheHits  int64 `json:"cache_hits"`
	CacheSaved int64 `json:"cache_saved"`
}

// ByRequestID finds usage rows by a request id, which is the gateway's
// (request_id) or the upstream's (upstream_request_id): the gateway's
// first, through its index, and the upstream's only when that finds none.
// The upstream's ids have no index: vendors make them at random, and an
// index of random values puts every row of a batch in a page of its own,
// which made each usage commit several times dearer. Each store narrows
// the rows it reads by bloom filters instead: PostgreSQL's BRIN bloom
// indexes of a day, SQLite's filters of each run of rows the writer wrote
// (store/sqlite/upstreamblooms.go).
func ByRequestID(list func(column string) ([]*UsageLog, error)) ([]*UsageLog, error) {
	logs, err := list("request_id")
	if err != nil || len(logs) > 0 {
		return logs, err
	}
	return list("upstream_request_id")
}
