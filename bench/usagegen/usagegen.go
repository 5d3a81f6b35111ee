// Package usagegen makes a usage data set as the gateway would have
// written it (issue 34: the usage store at 50 million rows), and writes it
// through the store.Store interface, so one generator fills SQLite and
// PostgreSQL alike and the rollups (usage_daily, usage_daily_models and
// the dashboard's daily totals) come out exactly as the usage writer's
// batches make them: rows go in SettleBatch batches, in time order.
//
// The rows are deterministic for a seed: users, keys, models and channels
// follow skewed (Zipf) distributions, about 2 % of requests fail, request
// ids and row keys have the gateway's formats (time-ordered ids, the
// writer's zero-padded row keys), and no prompt content is stored (the
// store keeps none). cmd/usagegen is the command; Measure times the
// console's and API's reads on what it made.
package usagegen

import (
	"context"
	"encoding/hex"
	"fmt"
	"iter"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/caddy-model-gateway/gateway/store"
)

// Config says what to make. Zero fields take Defaults' values.
type Config struct {
	Rows        int64 // usage rows
	Days        int   // spread evenly over this many days, ending at End
	Users       int
	KeysPerUser int // each user has 1 to KeysPerUser keys
	Models      int
	Channels    int
	// FailedPermille is the share of failed requests (status not 2xx), per
	// thousand.
	FailedPermille int
	// End is the newest row's time (default: now).
	End time.Time
	// Batch is how many rows go in one SettleBatch (one transaction).
	Batch int
	Seed  uint64
}

// Defaults are the data set issue 34 names: 50 million rows over 90 days.
var Defaults = Config{
	Rows: 50_000_000, Days: 90, Users: 2000, KeysPerUser: 3, Models: 40, Channels: 30,
	FailedPermille: 20, Batch: 5000, Seed: 34,
}

func (c Config) withDefaults() Config {
	d := Defaults
	if c.Rows > 0 {
		d.Rows = c.Rows
	}
	if c.Days > 0 {
		d.Days = c.Days
	}
	if c.Users > 0 {
		d.Users = c.Users
	}
	if c.KeysPerUser > 0 {
		d.KeysPerUser = c.KeysPerUser
	}
	if c.Models > 0 {
		d.Models = c.Models
	}
	if c.Channels > 0 {
		d.Channels = c.Channels
	}
	if c.FailedPermille > 0 {
		d.FailedPermille = c.FailedPermille
	}
	if c.Batch > 0 {
		d.Batch = c.Batch
	}
	if c.Seed != 0 {
		d.Seed = c.Seed
	}
	d.End = c.End
	if d.End.IsZero() {
		d.End = time.Now()
	}
	return d
}

// Model is one model of the data set, with its price (quota units per
// million tokens) and the channels that serve it.
type Model struct {
	Name             string
	Endpoint         string
	Prompt, Complete int64 // units per million tokens
	Channels         []string
	upstreamPrefix   string
}

// Gen makes rows in time order. Accounts must be set (Setup, or by hand
// in tests) before Next.
type Gen struct {
	cfg    Config
	rng    *rand.Rand
	users  *rand.Zipf
	models *rand.Zipf
	Models []Model
	// Keys are each user's key ids (index: user's place, 0-based);
	// UserIDs the users' ids.
	UserIDs []int64
	Keys    [][]int64

	start, span int64 // unix ms of the first row, and the span
	made        int64
	prefix      string // the row keys' writer prefix
}

// New prepares a generator; Setup or SetAccounts gives it its users and keys.
func New(cfg Config) *Gen {
	cfg = cfg.withDefaults()
	rng := rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))
	g := &Gen{cfg: cfg, rng: rng}
	// a few users and models carry most of the traffic, as on a real gateway
	g.users = rand.NewZipf(rng, 1.1, 4, uint64(cfg.Users-1))
	g.models = rand.NewZipf(rng, 1.2, 2, uint64(cfg.Models-1))
	families := []struct{ prefix, endpoint, upstream string }{
		{"gpt-4o-mini-", "/v1/chat/completions", "chatcmpl-"},
		{"claude-sonnet-", "/v1/messages", "msg_"},
		{"gemini-2.5-flash-", "/v1beta/models/generateContent", ""},
		{"text-embedding-", "/v1/embeddings", "emb-"},
	}
	for i := range cfg.Models {
		f := families[i%len(families)]
		m := Model{
			Name: f.prefix + strconv.Itoa(i), Endpoint: f.endpoint, upstreamPrefix: f.upstream,
			Prompt: int64(150_000 + 97_000*(i%13)), Complete: int64(600_000 + 389_000*(i%11)),
		}
		// each model on two channels, the first taking most requests
		m.Channels = []string{channelName(i % cfg.Channels), channelName((i*7 + 3) % cfg.Channels)}
		g.Models = append(g.Models, m)
	}
	var p [6]byte
	for i := range p {
		p[i] = byte(rng.Uint32())
	}
	g.prefix = hex.EncodeToString(p[:]) + "-"
	end := cfg.End.UnixMilli()
	g.span = int64(cfg.Days) * store.MsPerDay
	g.start = end - g.span
	return g
}

func channelName(i int) string { return "channel-" + strconv.Itoa(i) }

// Config is the generator's configuration, defaults filled in.
func (g *Gen) Config() Config { return g.cfg }

// Start is the oldest row's time.
func (g *Gen) Start() time.Time { return time.UnixMilli(g.start).UTC() }

// Setup makes the data set's users and their keys in st.
func (g *Gen) Setup(ctx context.Context, st store.Store) error {
	// the accounts' own random numbers: the rows are the same whether
	// Setup made the accounts or a caller set them
	r := rand.New(rand.NewPCG(g.cfg.Seed, 1))
	g.UserIDs = make([]int64, g.cfg.Users)
	g.Keys = make([][]int64, g.cfg.Users)
	for i := range g.cfg.Users {
		u := &store.User{Username: fmt.Sprintf("usagegen-%06d", i), Role: store.RoleUser,
			Status: store.UserEnabled, Quota: 1 << 50}
		if err := st.CreateUser(ctx, u); err != nil {
			return fmt.Errorf("user %d: %w", i, err)
		}
		g.UserIDs[i] = u.ID
		for k := range 1 + r.IntN(g.cfg.KeysPerUser) {
			var h [16]byte
			for j := range h {
				h[j] = byte(r.Uint32())
			}
			t := &store.Token{UserID: u.ID, Name: "key-" + strconv.Itoa(k), KeyHash: hex.EncodeToString(h[:]),
				KeyPrefix: "sk-gen", Status: store.TokenEnabled}
			if err := st.CreateToken(ctx, t); err != nil {
				return fmt.Errorf("key %d of user %d: %w", k, i, err)
			}
			g.Keys[i] = append(g.Keys[i], t.ID)
		}
	}
	return nil
}

// Done says whether every row was made.
func (g *Gen) Done() bool { return g.made >= g.cfg.Rows }

// Next makes the next batch of rows (at most Batch), oldest first.
func (g *Gen) Next() []*store.UsageLog {
	n := min(int64(g.cfg.Batch), g.cfg.Rows-g.made)
	rows := make([]*store.UsageLog, n)
	block := make([]store.UsageLog, n) // one allocation a batch
	for i := range rows {
		rows[i] = &block[i]
		g.row(rows[i], g.made)
		g.made++
	}
	return rows
}

// failures are the failed statuses and their weights (of 100) and errors.
var failures = []struct {
	status int
	weight int
	err    string
}{
	{429, 40, "upstream rate limit: retry after 20s"},
	{500, 15, "upstream error: internal server error"},
	{502, 15, "upstream connection reset"},
	{503, 10, "every channel of the model is ejected"},
	{504, 10, "upstream response header timeout"},
	{400, 10, "invalid request: messages must not be empty"},
}

// row fills l as the n-th row of the data set.
func (g *Gen) row(l *store.UsageLog, n int64) {
	r := g.rng
	// evenly spread in time, a millisecond's jitter at most: ids and
	// created_at grow together, as the writer makes them
	ms := g.ms(n)
	u := int(g.users.Uint64())
	keys := g.Keys[u]
	m := &g.Models[g.models.Uint64()]
	ch := m.Channels[0]
	if r.IntN(5) == 0 {
		ch = m.Channels[1]
	}
	*l = store.UsageLog{
		Key:       g.prefix + base36(uint64(n+1)),
		CreatedAt: time.UnixMilli(ms),
		UserID:    g.UserIDs[u],
		TokenID:   keys[r.IntN(len(keys))],
		Model:     m.Name,
		Channel:   ch,
		Endpoint:  m.Endpoint,
		Status:    200,
		Stream:    r.IntN(10) < 6,
		RequestID: requestID(r, ms),
	}
	if r.IntN(1000) < g.cfg.FailedPermille {
		w := r.IntN(100)
		for _, f := range failures {
			if w -= f.weight; w < 0 {
				l.Status, l.Error = f.status, f.err
				break
			}
		}
		l.LatencyMS = int64(5 + r.IntN(3000))
		if l.Status == 429 || l.Status == 503 {
			l.Channel = "" // refused before any channel answered
		}
		return
	}
	l.PromptTokens = int64(20 + r.ExpFloat64()*900)
	if m.Endpoint != "/v1/embeddings" {
		l.CompletionTokens = int64(5 + r.ExpFloat64()*350)
		l.TTFBMS = int64(150 + r.ExpFloat64()*400)
	}
	if r.IntN(4) == 0 {
		l.CachedTokens = l.PromptTokens / 2
	}
	l.LatencyMS = l.TTFBMS + l.CompletionTokens*8 + int64(r.IntN(50))
	l.Cost = (l.PromptTokens*m.Prompt+l.CompletionTokens*m.Complete+999_999)/1_000_000 + 1
	if m.upstreamPrefix != "" {
		l.UpstreamRequestID = m.upstreamPrefix + randomText(r, 24)
	}
}

// ms is the n-th row's time.
func (g *Gen) ms(n int64) int64 {
	return g.start + int64(float64(n)*float64(g.span)/float64(g.cfg.Rows))
}

// requestID is the gateway's id (serverside.NewRequestID) for a
// request at ms: the time in milliseconds, then 80 random bits, in hex.
func requestID(r *rand.Rand, ms int64) string {
	var b [16]byte
	hi, lo := r.Uint64(), r.Uint32()
	for i := range 6 {
		b[i] = byte(uint64(ms) >> (8 * (5 - i)))
	}
	for i := range 6 {
		b[6+i] = byte(hi >> (8 * i))
	}
	for i := range 4 {
		b[12+i] = byte(lo >> (8 * i))
	}
	return hex.EncodeToString(b[:])
}

// base36 is n zero-padded to 13 digits, as billing's rowKey writes it.
func base36(n uint64) string {
	var b [13]byte
	for i := len(b) - 1; i >= 0; i-- {
		b[i] = "0123456789abcdefghijklmnopqrstuvwxyz"[n%36]
		n /= 36
	}
	return string(b[:])
}

func randomText(r *rand.Rand, n int) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[r.IntN(len(alphabet))]
	}
	return string(b)
}

// Fill makes the users, keys and every row in st, batch by batch;
// progress, when not nil, hears the rows written after each batch.
func (g *Gen) Fill(ctx context.Context, st store.Store, progress func(written int64)) error {
	if g.UserIDs == nil {
		if err := g.Setup(ctx, st); err != nil {
			return err
		}
	}
	for !g.Done() {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := st.SettleBatch(ctx, g.Next()); err != nil {
			return fmt.Errorf("rows to %d: %w", g.made, err)
		}
		if progress != nil {
			progress(g.made)
		}
	}
	return nil
}

// DayLoader is a store that takes a whole UTC day of usage rows at once,
// by bulk load (PostgreSQL's COPY into the day's partition, its indexes
// built after, its rollups summed from it): LoadUsageDay must write what
// SettleBatch would for the same rows. FastFill uses it.
type DayLoader interface {
	LoadUsageDay(ctx context.Context, day int64, rows iter.Seq[*store.UsageLog]) (int64, error)
}

// FastFill makes the same users, keys and rows as Fill (the same seed
// gives the same rows, ids and rollups), a day at a time through st's
// LoadUsageDay: 50 million rows on PostgreSQL in minutes rather than the
// hour and a half SettleBatch takes. It fails when st has no bulk load.
func (g *Gen) FastFill(ctx context.Context, st store.Store, progress func(written int64)) error {
	dl, ok := st.(DayLoader)
	if !ok {
		return fmt.Errorf("the store (%T) has no bulk load; fill it with Fill", st)
	}
	if g.UserIDs == nil {
		if err := g.Setup(ctx, st); err != nil {
			return err
		}
	}
	var l store.UsageLog
	for !g.Done() {
		if err := ctx.Err(); err != nil {
			return err
		}
		day := g.ms(g.made) / store.MsPerDay
		rows := func(yield func(*store.UsageLog) bool) {
			for !g.Done() && g.ms(g.made)/store.MsPerDay == day {
				g.row(&l, g.made)
				g.made++
				if !yield(&l) {
					return
				}
			}
		}
		if _, err := dl.LoadUsageDay(ctx, day, rows); err != nil {
			return fmt.Errorf("rows to %d: %w", g.made, err)
		}
		if progress != nil {
			progress(g.made)
		}
	}
	return nil
}
