package store

import (
	"cmp"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// This file is the arithmetic both drivers do before they write a batch of
// usage rows: what each row takes from whom, summed per account, so that a
// batch costs one update per user, token, day and window however many rows
// it has. The drivers write the sums in the order the key lists give (ids
// ascending), which is also the lock order that keeps two concurrent
// batches from deadlocking on PostgreSQL.

// MsPerDay turns unix milliseconds into UTC day numbers.
const MsPerDay = 24 * 60 * 60 * 1000

// DayOf is t's UTC day number; the zero time is day 0.
func DayOf(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli() / MsPerDay
}

// Charge is what a user's rows of a batch cost and how many there were.
type Charge struct{ Cost, Requests int64 }

// UserDay names a user's UTC day (a day number from MsPerDay).
type UserDay struct{ User, Day int64 }

// ModelDay names a user's UTC day on one model.
type ModelDay struct {
	Day, User int64
	Model     string
}

// BatchCharges is a batch of written usage rows summed per account.
// Every sum saturates at the int64 maximum rather than wrap.
type BatchCharges struct {
	Users   map[int64]*Charge      // taken from each user's balance (Charged), and the rows counted
	Days    map[UserDay]*Charge    // each user's daily spend: every row's cost, a plan's too
	Tokens  map[int64]int64        // added to each token's used quota (Charged)
	Models  map[ModelDay]*UsageDay // per day, user and model
	Windows map[string]int64       // spend by budget window id
	// Totals are the batch's sums per day and per channel, model, user
	// and key: the dashboard's daily totals (DailyTotals)
	Totals map[TotalKey]*UsageTotal
}

// TotalKey names one day's total of one channel or model (Name) or of
// one user or key (ID): ids stay numbers until written, so counting a row
// allocates nothing.
type TotalKey struct {
	By   UsageGroup
	Day  int64
	ID   int64
	Name string
}

// Key is the total's key as UsageTotal.Key has it.
func (k TotalKey) Key() string {
	if k.By == ByUser || k.By == ByToken {
		return strconv.FormatInt(k.ID, 10)
	}
	return k.Name
}

// NewBatchCharges starts an empty tally; windows, when not nil, already
// holds spend to write with the batch's (a task's reservation given back).
func NewBatchCharges(windows map[string]int64) *BatchCharges {
	if windows == nil {
		windows = map[string]int64{}
	}
	return &BatchCharges{
		Users:   map[int64]*Charge{},
		Days:    map[UserDay]*Charge{},
		Tokens:  map[int64]int64{},
		Models:  map[ModelDay]*UsageDay{},
		Windows: windows,
		Totals:  map[TotalKey]*UsageTotal{},
	}
}

// Add counts a row written with createdAt (its CreatedAt, or the batch's
// time when that is zero).
func (b *BatchCharges) Add(l *UsageLog, createdAt time.Time) {
	day := createdAt.UnixMilli() / MsPerDay
	if l.UserID != 0 {
		c := b.Users[l.UserID]
		if c == nil {
			c = &Charge{}
			b.Users[l.UserID] = c
		}
		c.Cost = AddSat(c.Cost, Charged(l))
		c.Requests++
		k := UserDay{l.UserID, day}
		d := b.Days[k]
		if d == nil {
			d = &Charge{}
			b.Days[k] = d
		}
		d.Cost = AddSat(d.Cost, l.Cost)
		d.Requests++
	}
	if l.TokenID != 0 && Charged(l) != 0 {
		b.Tokens[l.TokenID] = AddSat(b.Tokens[l.TokenID], Charged(l))
	}
	mk := ModelDay{day, l.UserID, l.Model}
	t := b.Models[mk]
	if t == nil {
		t = &UsageDay{}
		b.Models[mk] = t
	}
	t.Requests++
	t.PromptTokens = AddSat(t.PromptTokens, l.PromptTokens)
	t.CompletionTokens = AddSat(t.CompletionTokens, l.CompletionTokens)
	t.CachedTokens = AddSat(t.CachedTokens, l.CachedTokens)
	t.ReasoningTokens = AddSat(t.ReasoningTokens, l.ReasoningTokens)
	t.Cost = AddSat(t.Cost, l.Cost)
	RowWindows(b.Windows, l)
	b.addTotal(TotalKey{By: ByChannel, Day: day, Name: l.Channel}, l)
	b.addTotal(TotalKey{By: ByModel, Day: day, Name: l.Model}, l)
	b.addTotal(TotalKey{By: ByToken, Day: day, ID: l.TokenID}, l)
	b.addTotal(TotalKey{By: ByUser, Day: day, ID: l.UserID}, l)
}

// GroupKey is a row's key in group by, as UsageTotal.Key has it.
func GroupKey(l *UsageLog, by UsageGroup) string {
	switch by {
	case ByChannel:
		return l.Channel
	case ByModel:
		return l.Model
	case ByUser:
		return strconv.FormatInt(l.UserID, 10)
	default:
		return strconv.FormatInt(l.TokenID, 10)
	}
}

func (b *BatchCharges) addTotal(k TotalKey, l *UsageLog) {
	t := b.Totals[k]
	if t == nil {
		t = &UsageTotal{}
		b.Totals[k] = t
	}
	t.Requests++
	if l.Status < 200 || l.Status >= 300 {
		t.Errors++
	}
	t.Cost = AddSat(t.Cost, l.Cost)
	t.Tokens = AddSat(t.Tokens, AddSat(l.PromptTokens, l.CompletionTokens))
	t.PromptTokens = AddSat(t.PromptTokens, l.PromptTokens)
	t.CachedTokens = AddSat(t.CachedTokens, l.CachedTokens)
	t.LatencyMS = AddSat(t.LatencyMS, l.LatencyMS)
	t.TTFBMS = AddSat(t.TTFBMS, l.TTFBMS)
	if l.CacheHit {
		t.CacheHits++
	}
	t.CacheSaved = AddSat(t.CacheSaved, l.CacheSaved)
}

// TotalKeys are the daily totals of the batch in the order every writer
// updates them (group, day, id or name): two batches lock them in one
// order.
func (b *BatchCharges) TotalKeys() []TotalKey {
	return slices.SortedFunc(maps.Keys(b.Totals), func(x, y TotalKey) int {
		return cmp.Or(strings.Compare(string(x.By), string(y.By)), cmp.Compare(x.Day, y.Day),
			cmp.Compare(x.ID, y.ID), strings.Compare(x.Name, y.Name))
	})
}

// UserIDs are the users charged, ascending.
func (b *BatchCharges) UserIDs() []int64 { return slices.Sorted(maps.Keys(b.Users)) }

// TokenIDs are the tokens charged, ascending.
func (b *BatchCharges) TokenIDs() []int64 { return slices.Sorted(maps.Keys(b.Tokens)) }

// DayKeys are the user days, by user then day.
func (b *BatchCharges) DayKeys() []UserDay {
	return slices.SortedFunc(maps.Keys(b.Days), func(x, y UserDay) int {
		return cmp.Or(cmp.Compare(x.User, y.User), cmp.Compare(x.Day, y.Day))
	})
}

// ModelKeys are the model days, by day, user, then model.
func (b *BatchCharges) ModelKeys() []ModelDay {
	return slices.SortedFunc(maps.Keys(b.Models), func(x, y ModelDay) int {
		return cmp.Or(cmp.Compare(x.Day, y.Day), cmp.Compare(x.User, y.User), strings.Compare(x.Model, y.Model))
	})
}

// WindowIDs are the windows with spend, in order.
func (b *BatchCharges) WindowIDs() []string { return slices.Sorted(maps.Keys(b.Windows)) }

// Charged is what a row takes from its user's balance and its key's used
// quota: nothing when a plan paid it.
func Charged(l *UsageLog) int64 {
	if l.Plan != "" {
		return 0
	}
	return l.Cost
}

// RowWindows adds a written row's cost to each window id it carries.
func RowWindows(spend map[string]int64, l *UsageLog) {
	if l.Windows == "" || l.Cost == 0 {
		return
	}
	for i, id := range strings.Split(l.Windows, ",") {
		if i == MaxWindowIDs {
			return
		}
		spend[id] = AddSat(spend[id], l.Cost)
	}
}

// TaskWindows is amount in each window id of a task's windows (a
// reservation counted at the submit, or given back when it settles).
func TaskWindows(ids string, amount int64) map[string]int64 {
	spend := map[string]int64{}
	if ids == "" || amount == 0 {
		return spend
	}
	for i, id := range strings.Split(ids, ",") {
		if i == MaxWindowIDs {
			break
		}
		spend[id] = amount
	}
	return spend
}

// AddSat adds two non-negative amounts, saturating at the int64 maximum.
func AddSat(a, b int64) int64 {
	if b > 0 && a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// SubSat is a - b saturating at the int64 range, so that no absurd
// balance or lease wraps into a grant.
func SubSat(a, b int64) int64 {
	c := a - b
	if (c < a) != (b > 0) {
		if b > 0 {
			return math.MinInt64
		}
		return math.MaxInt64
	}
	return c
}

// LeaseOrder is the order LeaseBalances applies requests in, as indexes
// into reqs: users by id, then tokens by id, the order a batch is charged
// in.
func LeaseOrder(reqs []LeaseRequest) []int {
	idx := make([]int, len(reqs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int {
		x, y := reqs[a].Account, reqs[b].Account
		if x.Token != y.Token {
			if x.Token {
				return 1
			}
			return -1
		}
		return cmp.Compare(x.ID, y.ID)
	})
	return idx
}

// WindowGrant is what ClaimWindow grants of want from a window with limit
// of which claimed is taken: what room there is, up to want, and nothing
// when that is below least.
func WindowGrant(limit, claimed, want, least int64) int64 {
	g := min(want, limit-claimed)
	if g < least || g <= 0 {
		return 0
	}
	return g
}

// PlanUntilMillis is SetUserPlan's plan_until: until in unix milliseconds,
// 0 (no end) when it is zero or there is no plan.
func PlanUntilMillis(plan string, until time.Time) int64 {
	if until.IsZero() || plan == "" {
		return 0
	}
	return until.UnixMilli()
}
