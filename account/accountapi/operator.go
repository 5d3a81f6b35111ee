package accountapi

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/account"
	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/keys"
	"github.com/caddy-model-gateway/gateway/routing"
	"github.com/caddy-model-gateway/gateway/store"
)

// The operators' pages: channels with their health and a test button, a
// dashboard, and a password reset. Their counts come from the store's
// daily totals (DailyTotals), which each usage batch writes with its
// rows: a page reads the days and keys it shows, not the rows, so it
// answers as fast at 50 million rows as at 50.

// channelDays is how many UTC days, today's included, a channel's recent
// traffic is counted over.
const channelDays = 7

// ChannelTest is what an operator's test request through one channel
// found (POST /api/admin/channels/{name}/test).
type ChannelTest struct {
	Channel string `json:"channel"`
	Model   string `json:"model"`
	OK      bool   `json:"ok"`
	// Status is the upstream's status, or the gateway's when it got none.
	Status     int    `json:"status"`
	LatencyMS  int64  `json:"latency_ms"`
	Error      string `json:"error,omitempty"`
	Detail     string `json:"detail,omitempty"`
	UpstreamID string `json:"upstream_request_id,omitempty"`
	// PromptTokens and CompletionTokens are what the upstream counted.
	PromptTokens     int64  `json:"prompt_tokens"`
	CompletionTokens int64  `json:"completion_tokens"`
	Reply            string `json:"reply,omitempty"`
	// Cost is what the request would have cost a caller at the model's
	// price, in quota units (billed to nobody); 0 for a model without one
	Cost     int64     `json:"cost"`
	TestedAt time.Time `json:"tested_at"`
}

// channelView is a channel as the channels page shows it.
type channelView struct {
	routing.ChannelState
	// Prices are its models' prices; a model without one is absent.
	Prices map[string]any `json:"prices"`
	// Recent is its traffic among the newest usage rows.
	Recent channelTraffic `json:"recent"`
	// Setup is how it is set up and where (the Caddyfile, read-only
	// here, or the database); nil when the gateway keeps no runtime
	// configuration
	Setup *ChannelSetup `json:"setup,omitempty"`
}

// StateDisabled is the state of a database channel taken out of service.
const StateDisabled = "disabled"

// channelTraffic is a channel's requests among the rows sampled.
type channelTraffic struct {
	Requests     int64  `json:"requests"`
	Errors       int64  `json:"errors"`
	AvgLatencyMS int64  `json:"avg_latency_ms"`
	AvgTTFBMS    int64  `json:"avg_ttfb_ms"`
	LastError    string `json:"last_error,omitempty"`
	LastErrorAt  string `json:"last_error_at,omitempty"`
	LastStatus   int    `json:"last_error_status,omitempty"`
}

func (h *Handler) listChannels(_ http.ResponseWriter, r *http.Request, _ *caller) (any, error) {
	states := []routing.ChannelState{}
	if h.channels != nil {
		states = h.channels()
	}
	prices := map[string]any{}
	for _, m := range h.served() {
		if m.Price != nil {
			prices[m.ID] = m.Price
		}
	}
	ctx := r.Context()
	since := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, 1-channelDays)
	totals, err := h.store.DailyTotals(ctx, store.ByChannel, since, 0)
	if err != nil {
		return nil, err
	}
	traffic := map[string]*channelTraffic{}
	sums := map[string]*[2]int64{} // latency, ttfb
	for _, d := range totals {
		if d.Key == "" {
			continue
		}
		t := traffic[d.Key]
		if t == nil {
			t, sums[d.Key] = &channelTraffic{}, &[2]int64{}
			traffic[d.Key] = t
		}
		t.Requests += d.Requests
		t.Errors += d.Errors
		sums[d.Key][0] += d.LatencyMS
		sums[d.Key][1] += d.TTFBMS
	}
	for name, t := range traffic {
		if t.Errors == 0 {
			continue
		}
		last, err := h.store.ListUsage(ctx, store.UsageFilter{Channel: name, Status: store.UsageStatusError, Since: since, Limit: 1})
		if err != nil {
			return nil, err
		}
		if len(last) == 1 {
			l := last[0]
			t.LastError, t.LastStatus, t.LastErrorAt = l.Error, l.Status, l.CreatedAt.UTC().Format(time.RFC3339)
		}
	}
	setups, setupList, err := h.setupsByName(ctx)
	if err != nil {
		return nil, err
	}
	// a disabled database channel is in no routing table: listed all the same
	listed := map[string]bool{}
	for _, s := range states {
		listed[s.Name] = true
	}
	for _, s := range setupList {
		if !listed[s.Name] {
			states = append(states, routing.ChannelState{Name: s.Name, Type: s.Type, Models: s.Models, State: StateDisabled})
		}
	}
	out := make([]channelView, len(states))
	for i, s := range states {
		v := channelView{ChannelState: s, Prices: map[string]any{}, Setup: setups[s.Name]}
		for _, m := range s.Models {
			if p, ok := prices[m]; ok {
				v.Prices[m] = p
			}
		}
		if t := traffic[s.Name]; t != nil {
			t.AvgLatencyMS, t.AvgTTFBMS = sums[s.Name][0]/t.Requests, sums[s.Name][1]/t.Requests
			v.Recent = *t
		}
		out[i] = v
	}
	return map[string]any{"data": out, "since": since.Format(time.RFC3339)}, nil
}

// testChannel sends a one-token request through one channel: billed to
// nobody, not counted toward the channel's health, logged with who asked.
func (h *Handler) testChannel(_ http.ResponseWriter, r *http.Request, c *caller) (any, error) {
	if h.testChan == nil {
		return nil, &apiError{status: http.StatusNotFound, typ: errNotFound, code: "no_channels", msg: "this gateway has no channels to test"}
	}
	var in struct {
		Model string `json:"model"`
		// All tests every model of the channel, one after another
		All bool `json:"all"`
	}
	if err := decode(r, &in); err != nil {
		return nil, err
	}
	name := r.PathValue("name")
	if in.All {
		return h.testEveryModel(r, c, name)
	}
	res, err := h.testChan(r.Context(), name, in.Model)
	var ae *adapters.Error
	if errors.As(err, &ae) {
		return nil, &apiError{status: ae.Status, typ: ae.Type, code: "channel_test_refused", msg: ae.Message}
	}
	if err != nil {
		return nil, err
	}
	h.log.Info("channel tested", zap.String("by", c.user.Username), zap.String("channel", res.Channel),
		zap.String("model", res.Model), zap.Bool("ok", res.OK), zap.Int("status", res.Status),
		zap.Int64("latency_ms", res.LatencyMS), zap.String("error", res.Error))
	h.audit(r.Context(), c, account.AuditChannelTest, "channel:"+res.Channel, nil,
		account.Fields{"model": res.Model, "ok": res.OK, "status": res.Status, "error": res.Error})
	return res, nil
}

// resetPassword sets another user's password: POST
// /api/admin/users/{id}/password {"password": "..."}; an empty password
// has the gateway make one, given once in the answer.
func (h *Handler) resetPassword(_ http.ResponseWriter, r *http.Request, c *caller) (any, error) {
	id, err := pathID(r)
	if err != nil {
		return nil, err
	}
	var in struct {
		Password string `json:"password"`
	}
	if err := decode(r, &in); err != nil {
		return nil, err
	}
	made := in.Password == ""
	if made {
		// as 'caddy gateway user passwd' makes one
		if in.Password, err = keys.Random("", 20); err != nil {
			return nil, err
		}
	}
	if err := account.ResetPassword(r.Context(), h.store, c.user, id, in.Password); err != nil {
		return nil, err
	}
	h.log.Info("password reset", zap.String("by", c.user.Username), zap.Int64("user_id", id))
	h.audit(r.Context(), c, account.AuditUserPassword, account.UserTarget(id), nil,
		account.Fields{"password": "(changed)", "sessions_ended": true})
	out := map[string]any{"id": id, "sessions_ended": true}
	if made {
		out["password"] = in.Password
	}
	return out, nil
}

// point is one UTC day of a series.
type point struct {
	Day      string `json:"day"`
	Requests int64  `json:"requests"`
	Cost     int64  `json:"cost"`
	Tokens   int64  `json:"tokens"`
	Errors   int64  `json:"errors"`
	// Prompt and Cached are the prompt tokens and those read from the
	// vendor's prompt cache, for the cache hit share
	Prompt int64 `json:"prompt_tokens"`
	Cached int64 `json:"cached_tokens"`
	// CacheHits are the requests the gateway's response cache answered,
	// CacheSaved what they would have cost beyond what they were charged
	CacheHits  int64 `json:"cache_hits,omitempty"`
	CacheSaved int64 `json:"cache_saved,omitempty"`
}

// series is one model's, user's, channel's or key's usage over the days.
type series struct {
	Name     string  `json:"name"`
	ID       int64   `json:"id,omitempty"`
	UserID   int64   `json:"user_id,omitempty"` // a key's owner
	Requests int64   `json:"requests"`
	Cost     int64   `json:"cost"`
	Tokens   int64   `json:"tokens"`
	Errors   int64   `json:"errors"`
	Daily    []point `json:"daily"`
	Prompt   int64   `json:"prompt_tokens"`
	Cached   int64   `json:"cached_tokens"`
	// the response cache's hits and savings (see point)
	CacheHits  int64 `json:"cache_hits"`
	CacheSaved int64 `json:"cache_saved"`
}

// dayIndex places days on a window of n days ending today.
type dayIndex struct {
	first time.Time
	n     int
}

func (d dayIndex) at(t time.Time) int {
	i := int(t.UTC().Sub(d.first) / (24 * time.Hour))
	if t.Before(d.first) || i >= d.n {
		return -1
	}
	return i
}

// seriesSet accumulates series by key.
type seriesSet struct {
	days  dayIndex
	byKey map[string]*series
}

func newSeriesSet(d dayIndex) *seriesSet { return &seriesSet{days: d, byKey: map[string]*series{}} }

func (s *seriesSet) add(key, name string, id int64, day time.Time, p point) *series {
	i := s.days.at(day)
	if i < 0 {
		return nil
	}
	se := s.byKey[key]
	if se == nil {
		se = &series{Name: name, ID: id, Daily: make([]point, s.days.n)}
		for j := range se.Daily {
			se.Daily[j].Day = s.days.first.AddDate(0, 0, j).Format(time.DateOnly)
		}
		s.byKey[key] = se
	}
	d := &se.Daily[i]
	d.Requests += p.Requests
	d.Cost += p.Cost
	d.Tokens += p.Tokens
	d.Errors += p.Errors
	d.Prompt += p.Prompt
	d.Cached += p.Cached
	d.CacheHits += p.CacheHits
	d.CacheSaved += p.CacheSaved
	se.Requests += p.Requests
	se.Cost += p.Cost
	se.Tokens += p.Tokens
	se.Errors += p.Errors
	se.Prompt += p.Prompt
	se.Cached += p.Cached
	se.CacheHits += p.CacheHits
	se.CacheSaved += p.CacheSaved
	return se
}

// only is the series of key, zero on every day when it has none.
func (s *seriesSet) only(key string) *series {
	if se := s.byKey[key]; se != nil {
		return se
	}
	return s.add(key, "all", 0, s.days.first, point{})
}

// top is the set's series, the costliest first (then the busiest, then
// by name), at most n (0: all).
func (s *seriesSet) top(n int) []*series {
	out := make([]*series, 0, len(s.byKey))
	for _, se := range s.byKey {
		out = append(out, se)
	}
	slices.SortFunc(out, func(a, b *series) int {
		return cmp.Or(cmp.Compare(b.Cost, a.Cost), cmp.Compare(b.Requests, a.Requests), cmp.Compare(a.Name, b.Name))
	})
	if n > 0 && len(out) > n {
		out = out[:n]
	}
	return out
}

// dashboardTop is how many users and keys the dashboard ranks.
const dashboardTop = 10

// dashboard answers GET /api/admin/dashboard?days=N (1-90, default 14):
// requests, spend and tokens per day, model and user, and errors,
// channels and keys, all from the daily totals the usage batches write,
// which are exact and outlive usage retention.
func (h *Handler) dashboard(_ http.ResponseWriter, r *http.Request, _ *caller) (any, error) {
	n := 14
	if v := r.URL.Query().Get("days"); v != "" {
		d, err := strconv.Atoi(v)
		if err != nil || d < 1 || d > 90 {
			return nil, badRequest("invalid_days", "days must be a whole number from 1 to 90, not %q", v)
		}
		n = d
	}
	ctx := r.Context()
	today := time.Now().UTC().Truncate(24 * time.Hour)
	days := dayIndex{first: today.AddDate(0, 0, 1-n), n: n}
	totals, models, users := newSeriesSet(days), newSeriesSet(days), newSeriesSet(days)
	errs, channels, tokens := newSeriesSet(days), newSeriesSet(days), newSeriesSet(days)
	errModels, errUsers := newSeriesSet(days), newSeriesSet(days)
	var prompt, cached int64
	// every figure from the daily totals of the window; users and keys
	// only the top ones, ranked by the store (there may be thousands)
	for _, g := range []struct {
		by  store.UsageGroup
		top int
		add func(d store.UsageTotal, p point)
	}{
		{store.ByModel, 0, func(d store.UsageTotal, p point) {
			if totals.add("", "all", 0, d.Day, p) == nil {
				return
			}
			models.add(d.Key, d.Key, 0, d.Day, p)
			errModels.add(d.Key, d.Key, 0, d.Day, p)
			prompt += d.PromptTokens
			cached += d.CachedTokens
		}},
		{store.ByChannel, 0, func(d store.UsageTotal, p point) {
			errs.add("", "all", 0, d.Day, p)
			ch := d.Key
			if ch == "" {
				// refused before any channel, or no channel answered: the
				// row names the channel that answered, if one did
				ch = "(no channel answered)"
			}
			channels.add(ch, ch, 0, d.Day, p)
		}},
		{store.ByUser, dashboardTop, func(d store.UsageTotal, p point) {
			id, _ := strconv.ParseInt(d.Key, 10, 64)
			users.add(d.Key, "", id, d.Day, p)
			errUsers.add(d.Key, "", id, d.Day, p)
		}},
		{store.ByToken, dashboardTop, func(d store.UsageTotal, p point) {
			id, _ := strconv.ParseInt(d.Key, 10, 64)
			tokens.add(d.Key, "", id, d.Day, p)
		}},
	} {
		days, err := h.store.DailyTotals(ctx, g.by, days.first, g.top)
		if err != nil {
			return nil, err
		}
		for _, d := range days {
			g.add(d, point{Requests: d.Requests, Cost: d.Cost, Tokens: d.Tokens, Errors: d.Errors, Prompt: d.PromptTokens, Cached: d.CachedTokens,
				CacheHits: d.CacheHits, CacheSaved: d.CacheSaved})
		}
	}
	topUsers, topKeys := users.top(dashboardTop), tokens.top(dashboardTop)
	// only the users shown are named: a user a query each
	if err := h.nameUsers(ctx, topUsers, errUsers.top(dashboardTop)); err != nil {
		return nil, err
	}
	if err := h.nameKeys(ctx, topKeys); err != nil {
		return nil, err
	}
	share := 0.0
	if prompt > 0 {
		share = float64(cached) / float64(prompt)
	}
	return map[string]any{
		"days":   n,
		"since":  days.first.Format(time.DateOnly),
		"total":  totals.only(""),
		"cache":  map[string]any{"prompt_tokens": prompt, "cached_tokens": cached, "share": share},
		"models": models.top(0),
		"users":  topUsers,
		"recent": map[string]any{
			"total":    errs.only(""),
			"channels": channels.top(0),
			"models":   errModels.top(0),
			"users":    errUsers.top(dashboardTop),
			"keys":     topKeys,
		},
	}, nil
}

// nameUsers fills in the names of users' series; a user since removed
// keeps its id.
func (h *Handler) nameUsers(ctx context.Context, lists ...[]*series) error {
	names := map[int64]string{}
	for _, list := range lists {
		for _, se := range list {
			name, ok := names[se.ID]
			if !ok {
				u, err := h.store.UserByID(ctx, se.ID)
				switch {
				case errors.Is(err, store.ErrNotFound):
					name = "user #" + strconv.FormatInt(se.ID, 10)
				case err != nil:
					return err
				default:
					name = u.Username
				}
				names[se.ID] = name
			}
			se.Name = name
		}
	}
	return nil
}

// nameKeys fills in the names of keys' series; a deleted key is named so.
func (h *Handler) nameKeys(ctx context.Context, list []*series) error {
	for _, se := range list {
		if se.ID == 0 {
			se.Name = "(no key)"
			continue
		}
		t, err := h.store.TokenByID(ctx, se.ID)
		switch {
		case errors.Is(err, store.ErrNotFound):
			se.Name = "deleted key #" + strconv.FormatInt(se.ID, 10)
		case err != nil:
			return err
		default:
			se.Name, se.UserID = t.Name, t.UserID
		}
	}
	return nil
}

// testEveryModel tests each model of the channel in turn: {"data":
// [...], "ok", "failed", "cost"}, as test_all answers for every channel.
func (h *Handler) testEveryModel(r *http.Request, c *caller, name string) (any, error) {
	var models []string
	if h.channels != nil {
		for _, s := range h.channels() {
			if s.Name == name {
				models = s.Models
			}
		}
	}
	if len(models) == 0 {
		return nil, &apiError{status: http.StatusNotFound, typ: errNotFound, code: "channel_test_refused", msg: "there is no channel " + strconv.Quote(name) + " in service to test"}
	}
	out := make([]*ChannelTest, 0, len(models))
	var ok, failed int
	var cost int64
	for _, m := range models {
		res, err := h.testChan(r.Context(), name, m)
		if err != nil {
			res = &ChannelTest{Channel: name, Model: m, Error: err.Error()}
		}
		if res.OK {
			ok++
		} else {
			failed++
		}
		cost += res.Cost
		out = append(out, res)
	}
	h.audit(r.Context(), c, account.AuditChannelTest, "channel:"+name, nil, account.Fields{"tests": len(out), "ok": ok, "failed": failed})
	return map[string]any{"data": out, "ok": ok, "failed": failed, "cost": cost}, nil
}
