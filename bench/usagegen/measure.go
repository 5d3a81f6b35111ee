package usagegen

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"math"
	"slices"
	"time"

	"github.com/caddy-model-gateway/gateway/store"
)

// Result is one read's timings over its runs.
type Result struct {
	Name          string
	Runs          int
	Rows          int // what the last run returned
	P50, P95, Max time.Duration
}

// Query is one read the console or the API makes, as the store sees it.
type Query struct {
	Name string
	Run  func(ctx context.Context) (rows int, err error)
}

// Measure runs each of the console's and API's usage reads (Queries)
// runs times, round-robin so that a neighbour's load meets them alike,
// on whatever data set st holds, and returns their timings.
func Measure(ctx context.Context, st store.Store, runs int) ([]Result, error) {
	qs, err := Queries(ctx, st)
	if err != nil {
		return nil, err
	}
	times := make([][]time.Duration, len(qs))
	rows := make([]int, len(qs))
	for range runs {
		for i, q := range qs {
			began := time.Now()
			n, err := q.Run(ctx)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", q.Name, err)
			}
			times[i] = append(times[i], time.Since(began))
			rows[i] = n
		}
	}
	out := make([]Result, len(qs))
	for i, q := range qs {
		t := times[i]
		slices.Sort(t)
		out[i] = Result{Name: q.Name, Runs: len(t), Rows: rows[i], P50: t[len(t)/2], P95: t[(len(t)*95+99)/100-1], Max: t[len(t)-1]}
	}
	return out, nil
}

// PrintResults writes results as a Markdown table.
func PrintResults(w io.Writer, res []Result) {
	fmt.Fprintln(w, "| read | rows | p50 ms | p95 ms | max ms |")
	fmt.Fprintln(w, "|---|---|---|---|---|")
	for _, r := range res {
		fmt.Fprintf(w, "| %s | %d | %.1f | %.1f | %.1f |\n", r.Name, r.Rows, ms(r.P50), ms(r.P95), ms(r.Max))
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// Queries are the reads the pages make, with their values (a heavy and a
// typical user, a busy and a rare model, a key, a channel, request ids)
// taken from the data set itself, so they work on any data set.
func Queries(ctx context.Context, st store.Store) ([]Query, error) {
	newest, err := st.ListUsage(ctx, store.UsageFilter{Limit: 100})
	if err != nil || len(newest) == 0 {
		return nil, fmt.Errorf("no usage rows to measure (%v)", err)
	}
	oldest, err := st.UsageSince(ctx, time.Time{}, 0, 1)
	if err != nil || len(oldest) == 0 {
		return nil, fmt.Errorf("no oldest row (%v)", err)
	}
	now := newest[0].CreatedAt
	today := now.UTC().Truncate(24 * time.Hour)
	// the users and models of the last full day, by requests
	days, err := st.DailyUsageByModel(ctx, 0, today.AddDate(0, 0, -1))
	if err != nil {
		return nil, err
	}
	users, models := map[int64]int64{}, map[string]int64{}
	for _, d := range days {
		users[d.UserID] += d.Requests
		models[d.Model] += d.Requests
	}
	byUse := func(m map[int64]int64) []int64 {
		ids := make([]int64, 0, len(m))
		for id := range m {
			ids = append(ids, id)
		}
		slices.SortFunc(ids, func(a, b int64) int { return cmp.Or(cmp.Compare(m[b], m[a]), cmp.Compare(a, b)) })
		return ids
	}
	userIDs := byUse(users)
	heavy, typical := userIDs[0], userIDs[len(userIDs)/2]
	var modelNames []string
	for m := range models {
		modelNames = append(modelNames, m)
	}
	slices.SortFunc(modelNames, func(a, b string) int { return cmp.Or(cmp.Compare(models[b], models[a]), cmp.Compare(a, b)) })
	busyModel, rareModel := modelNames[0], modelNames[len(modelNames)-1]
	keys, err := st.ListTokens(ctx, typical)
	if err != nil {
		return nil, err
	}
	var key int64
	if len(keys) > 0 {
		key = keys[0].ID
	}
	channel, upstreamID := "", ""
	for _, l := range newest {
		if channel == "" && l.Channel != "" {
			channel = l.Channel
		}
		if upstreamID == "" && l.UpstreamRequestID != "" {
			upstreamID = l.UpstreamRequestID
		}
	}
	requestID := oldest[0].RequestID
	weekAgo := today.AddDate(0, 0, -7)

	list := func(name string, f store.UsageFilter) Query {
		if f.Limit == 0 {
			f.Limit = 20 // the console's page
		}
		return Query{name, func(ctx context.Context) (int, error) {
			logs, err := st.ListUsage(ctx, f)
			return len(logs), err
		}}
	}
	qs := []Query{
		list("newest page (admin, no filter)", store.UsageFilter{}),
		list("user, heavy", store.UsageFilter{UserID: heavy}),
		list("user, typical", store.UsageFilter{UserID: typical}),
		list("key", store.UsageFilter{TokenID: key}),
		list("model, busy", store.UsageFilter{Model: busyModel}),
		list("model, rare", store.UsageFilter{Model: rareModel}),
		list("channel", store.UsageFilter{Channel: channel}),
		list("status error", store.UsageFilter{Status: store.UsageStatusError}),
		list("status 429", store.UsageFilter{Status: "429"}),
		list("status ok", store.UsageFilter{Status: store.UsageStatusOK}),
		list("request id (gateway's, oldest row)", store.UsageFilter{RequestID: requestID}),
		list("upstream request id, last hour", store.UsageFilter{RequestID: upstreamID, Since: now.Add(-time.Hour)}),
		list("upstream request id, last day", store.UsageFilter{RequestID: upstreamID, Since: now.Add(-24 * time.Hour)}),
		list("upstream request id, all time", store.UsageFilter{RequestID: upstreamID}),
		list("request id (gateway's) + user (heavy)", store.UsageFilter{RequestID: newest[0].RequestID, UserID: newest[0].UserID}),
		list("user (heavy), next page", store.UsageFilter{UserID: heavy, After: &store.UsageCursor{CreatedAt: now.Add(-48 * time.Hour), ID: math.MaxInt64}}),
		list("time range: a day a week ago", store.UsageFilter{Since: weekAgo, Until: weekAgo.AddDate(0, 0, 1)}),
		list("user + model (typical, busy)", store.UsageFilter{UserID: typical, Model: busyModel}),
		list("user + model (typical, rare)", store.UsageFilter{UserID: typical, Model: rareModel}),
		list("user + status error (typical)", store.UsageFilter{UserID: typical, Status: store.UsageStatusError}),
		list("user + time range (typical, a week ago)", store.UsageFilter{UserID: typical, Since: weekAgo, Until: weekAgo.AddDate(0, 0, 1)}),
		list("key + time range (a week ago)", store.UsageFilter{TokenID: key, Since: weekAgo, Until: weekAgo.AddDate(0, 0, 1)}),
		list("model + time range (rare, a week ago)", store.UsageFilter{Model: rareModel, Since: weekAgo, Until: weekAgo.AddDate(0, 0, 1)}),
		list("channel + status error, 7 days (channels page)", store.UsageFilter{Channel: channel, Status: store.UsageStatusError, Since: now.Add(-7 * 24 * time.Hour), Limit: 1}),
		list("status 429 + time range (a week ago)", store.UsageFilter{Status: "429", Since: weekAgo, Until: weekAgo.AddDate(0, 0, 1)}),
	}
	// the dashboard's and the user page's sums
	for _, n := range []int{1, 7, 30} {
		since := today.AddDate(0, 0, 1-n)
		qs = append(qs, Query{fmt.Sprintf("dashboard sums, %d days", n), func(ctx context.Context) (int, error) {
			return DashboardSums(ctx, st, since)
		}})
	}
	// model_contains first names the models used (accountapi's modelsContaining)
	qs = append(qs, Query{"models used, for model_contains (admin, no since)", func(ctx context.Context) (int, error) {
		d, err := st.DailyTotals(ctx, store.ByModel, time.Time{}, 0)
		return len(d), err
	}}, Query{"models used, for model_contains (a user, no since)", func(ctx context.Context) (int, error) {
		d, err := st.DailyUsageByModel(ctx, typical, time.Time{})
		return len(d), err
	}})
	qs = append(qs, Query{"user's daily spend, 30 days", func(ctx context.Context) (int, error) {
		d, err := st.DailySpend(ctx, heavy, today.AddDate(0, 0, -29))
		return len(d), err
	}})
	return qs, nil
}

// DashboardSums makes the store reads of the operators' dashboard
// (GET /api/admin/dashboard?days=N) from since on and says how many rows
// they returned: the daily totals by model and channel, and of the top
// ten users and keys.
func DashboardSums(ctx context.Context, st store.Store, since time.Time) (int, error) {
	n := 0
	for _, g := range []struct {
		by  store.UsageGroup
		top int
	}{{store.ByModel, 0}, {store.ByChannel, 0}, {store.ByUser, 10}, {store.ByToken, 10}} {
		t, err := st.DailyTotals(ctx, g.by, since, g.top)
		if err != nil {
			return 0, err
		}
		n += len(t)
	}
	return n, nil
}

// RetentionResult is what deleting one day of rows took.
type RetentionResult struct {
	Day       time.Time
	Rows      int64
	Batches   int
	Total     time.Duration // the batches' time, the pauses between them left out
	P50, Max  time.Duration // one batch: how long a writer may wait for the lock
	BatchSize int
	// Dropped are the rows of the whole days dropped first (a store that
	// keeps days apart: PostgreSQL's partitions), in Drop.
	Dropped int64
	Drop    time.Duration
}

// DeleteOldestDay removes the oldest UTC day of rows as the retention
// worker does (billing.Retention: on a store that keeps days apart,
// DropUsageDays first, then DeleteUsageBefore in batches of batchSize,
// each its own transaction, for what is left) and times each step.
func DeleteOldestDay(ctx context.Context, st store.Store, batchSize int) (RetentionResult, error) {
	oldest, err := st.UsageSince(ctx, time.Time{}, 0, 1)
	if err != nil || len(oldest) == 0 {
		return RetentionResult{}, fmt.Errorf("no rows to delete (%v)", err)
	}
	day := oldest[0].CreatedAt.UTC().Truncate(24 * time.Hour)
	cutoff := day.AddDate(0, 0, 1)
	res := RetentionResult{Day: day, BatchSize: batchSize}
	if days, ok := st.(store.UsageDays); ok {
		began := time.Now()
		n, err := days.DropUsageDays(ctx, cutoff)
		if err != nil {
			return res, err
		}
		res.Dropped, res.Drop = n, time.Since(began)
	}
	var times []time.Duration
	for {
		began := time.Now()
		n, err := st.DeleteUsageBefore(ctx, cutoff, batchSize)
		if err != nil {
			return res, err
		}
		if n == 0 {
			break
		}
		d := time.Since(began)
		times = append(times, d)
		res.Total += d
		res.Rows += n
	}
	if len(times) > 0 {
		slices.Sort(times)
		res.Batches, res.P50, res.Max = len(times), times[len(times)/2], times[len(times)-1]
	}
	return res, nil
}
