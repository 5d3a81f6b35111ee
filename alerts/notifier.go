package alerts

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/billing"
	"github.com/caddy-model-gateway/gateway/store"
)

// Bounds of what the Notifier keeps in memory.
const (
	// maxPending bounds the users and keys waiting for a look at their
	// spend; past it a commit's are dropped (the next commit that charges
	// them looks again: crossings are judged on the total, not the step)
	maxPending = 10000
	// maxWindowIDs bounds the window ids kept per pending key
	maxWindowIDs = 64
	// maxKnown bounds the crossings remembered as claimed, so each costs
	// one insert per instance and period, not one per commit
	maxKnown = 50000
	// the rolling window is 60 five-minute buckets
	rollingBuckets = 60
	bucketSeconds  = 300
)

// Notifier finds crossings in what the usage writer committed and
// delivers their webhooks. One per configuration: Start, Stop.
type Notifier struct {
	cfg     Config
	st      store.Store
	budgets *billing.Budgets // nil: no windows configured
	log     *zap.Logger
	client  *http.Client
	now     func() time.Time

	mu      sync.Mutex
	pending map[pair]map[string]struct{}
	known   map[string]struct{}

	wake   chan struct{} // commits are pending
	outbox chan struct{} // an alert may be due
	queue  chan *store.Alert
	stop   context.CancelFunc
	ctx    context.Context
	wg     sync.WaitGroup

	claimed, dropped, sent, failed atomic.Uint64
}

type pair struct{ user, token int64 }

// New makes a Notifier for cfg on st; budgets resolves window limits.
func New(cfg Config, st store.Store, budgets *billing.Budgets, log *zap.Logger) (*Notifier, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.defaults()
	ctx, cancel := context.WithCancel(context.Background())
	return &Notifier{cfg: cfg, st: st, budgets: budgets, log: log, now: time.Now,
		client:  newClient(cfg.Timeout, cfg.AllowPrivate),
		pending: map[pair]map[string]struct{}{}, known: map[string]struct{}{},
		wake: make(chan struct{}, 1), outbox: make(chan struct{}, 1),
		queue: make(chan *store.Alert, cfg.Queue), ctx: ctx, stop: cancel}, nil
}

// Start runs the checker, the outbox poller and the delivery workers.
func (n *Notifier) Start() {
	n.wg.Add(2 + n.cfg.Workers)
	go n.checker()
	go n.poller()
	for range n.cfg.Workers {
		go n.worker()
	}
}

// Stop ends the workers; a delivery under way is abandoned (its alert
// stays pending in the outbox, leased until its lease ends).
func (n *Notifier) Stop() {
	n.stop()
	n.wg.Wait()
	n.client.CloseIdleConnections()
}

// Stats are what a Notifier did since it started.
type Stats struct {
	Claimed uint64 // crossings this instance won the claim of
	Sent    uint64 // deliveries answered 2xx
	GivenUp uint64 // alerts given up after their bounded attempts
	Dropped uint64 // users and keys a full pending set left out
	Queued  int    // alerts waiting for a delivery worker now
}

// Stats reports what the Notifier did, for metrics and tests.
func (n *Notifier) Stats() Stats {
	return Stats{Claimed: n.claimed.Load(), Sent: n.sent.Load(), GivenUp: n.failed.Load(),
		Dropped: n.dropped.Load(), Queued: len(n.queue)}
}

// Committed is the usage writer's hook (billing.Writer.OnCommitted): it
// notes whose spend the rows charged, and returns at once.
func (n *Notifier) Committed(rows []*store.UsageLog) {
	n.mu.Lock()
	for _, r := range rows {
		if r.Cost <= 0 {
			continue
		}
		k := pair{r.UserID, r.TokenID}
		ids := n.pending[k]
		if ids == nil {
			if len(n.pending) >= maxPending {
				n.dropped.Add(1)
				continue
			}
			ids = map[string]struct{}{}
			n.pending[k] = ids
		}
		for id := range strings.SplitSeq(r.Windows, ",") {
			if id != "" && len(ids) < maxWindowIDs {
				ids[id] = struct{}{}
			}
		}
	}
	n.mu.Unlock()
	nudge(n.wake)
}

func nudge(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// checker looks at the pending users' and keys' spend, at most once per
// Check.
func (n *Notifier) checker() {
	defer n.wg.Done()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-n.wake:
		}
		n.mu.Lock()
		batch := n.pending
		n.pending = map[pair]map[string]struct{}{}
		n.mu.Unlock()
		for k, ids := range batch {
			if err := n.check(n.ctx, k, ids); err != nil && n.ctx.Err() == nil {
				n.log.Warn("looking for budget alerts", zap.Int64("user_id", k.user), zap.Int64("key_id", k.token), zap.Error(err))
			}
		}
		select {
		case <-n.ctx.Done():
			return
		case <-time.After(n.cfg.Check):
		}
	}
}

// crossing is a subject's spend against one limit.
type crossing struct {
	subject, window, period string
	spent, limit            int64
}

// check judges what k's commits counted against: each window id's period
// (its spend committed by every instance), the user's balance and the
// key's limit.
func (n *Notifier) check(ctx context.Context, k pair, ids map[string]struct{}) error {
	var own []int
	if k.token != 0 {
		var err error
		if own, err = n.st.KeyAlertThresholds(ctx, k.token); err != nil {
			return err
		}
	}
	windowTs := union(n.cfg.Thresholds, own)
	balanceTs := union(n.cfg.BalanceThresholds, own)
	if len(windowTs) > 0 && len(ids) > 0 && n.budgets != nil {
		cs, err := n.windows(ctx, k, ids)
		if err != nil {
			return err
		}
		for _, c := range cs {
			if err := n.cross(ctx, k, c, windowTs); err != nil {
				return err
			}
		}
	}
	if len(balanceTs) > 0 {
		u, err := n.st.UserByID(ctx, k.user)
		if errors.Is(err, store.ErrNotFound) {
			return nil // deleted since: nothing to announce
		}
		if err != nil {
			return err
		}
		// a credit starts a new period: the thresholds are of the new total
		if total := billing.AddSat(u.Quota, u.UsedQuota); total > 0 {
			c := crossing{"user:" + strconv.FormatInt(u.ID, 10), "balance", "balance@" + strconv.FormatInt(total, 10), u.UsedQuota, total}
			if err := n.cross(ctx, k, c, balanceTs); err != nil {
				return err
			}
		}
	}
	if len(windowTs) > 0 && k.token != 0 {
		t, err := n.st.TokenByID(ctx, k.token)
		if errors.Is(err, store.ErrNotFound) {
			return nil // deleted since
		}
		if err != nil {
			return err
		}
		if t.QuotaLimit > 0 {
			c := crossing{"key:" + strconv.FormatInt(t.ID, 10), "quota", "quota@" + strconv.FormatInt(t.QuotaLimit, 10), t.UsedQuota, t.QuotaLimit}
			if err := n.cross(ctx, k, c, windowTs); err != nil {
				return err
			}
		}
	}
	return nil
}

// windows reads the committed spend of each window the ids name, with the
// limit the configuration gives it now.
func (n *Notifier) windows(ctx context.Context, k pair, ids map[string]struct{}) ([]crossing, error) {
	prof, err := n.budgets.Profile(ctx, n.now(), &store.User{ID: k.user}, &store.Token{ID: k.token})
	if err != nil {
		return nil, err
	}
	limits := map[string]billing.WindowLimits{}
	for _, b := range prof.Caps {
		limits[b.Subject] = b.Limits
	}
	if prof.Plan != nil {
		limits[prof.PlanBudget.Subject] = prof.PlanBudget.Limits
	}
	var out []crossing
	for id := range ids {
		i := strings.LastIndexByte(id, '/')
		if i < 0 {
			continue
		}
		subject, per := id[:i], id[i+1:]
		name, at, _ := strings.Cut(per, "@")
		kind, ok := billing.ParseWindowKind(name)
		lim, has := limits[subject]
		if !ok || !has || lim[kind] == 0 {
			continue
		}
		read := []string{id}
		if kind == billing.Rolling5h {
			// the rolling window is the sixty buckets up to this one; a
			// crossing is claimed once per five-hour block
			start, err := strconv.ParseInt(at, 10, 64)
			if err != nil {
				continue
			}
			read = read[:0]
			for b := range int64(rollingBuckets) {
				read = append(read, subject+"/5h@"+strconv.FormatInt(start-b*bucketSeconds, 10))
			}
			per = "5h@" + strconv.FormatInt(start-start%(rollingBuckets*bucketSeconds), 10)
		}
		spent, err := n.st.WindowSpend(ctx, read)
		if err != nil {
			return nil, err
		}
		var sum int64
		for _, v := range spent {
			sum = billing.AddSat(sum, v)
		}
		out = append(out, crossing{subject, name, per, sum, lim[kind]})
	}
	return out, nil
}

// cross claims each threshold of ts c has reached and this instance has
// not seen claimed, and queues the ones it won.
func (n *Notifier) cross(ctx context.Context, k pair, c crossing, ts []int) error {
	for _, t := range ReachedAll(c.spent, c.limit, ts) {
		key := c.subject + "|" + c.period + "|" + strconv.Itoa(t)
		n.mu.Lock()
		_, seen := n.known[key]
		n.mu.Unlock()
		if seen {
			continue
		}
		now := n.now().Truncate(time.Millisecond)
		a := &store.Alert{ID: newID(), Subject: c.subject, Window: c.window, Period: c.period, Threshold: t,
			UserID: k.user, TokenID: k.token, Spent: c.spent, Limit: c.limit, CreatedAt: now,
			LeaseUntil: now.Add(n.lease())}
		if n.cfg.Webhook == "" {
			a.LeaseUntil = time.Time{}
		}
		won, err := n.st.ClaimAlert(ctx, a)
		if err != nil {
			return err
		}
		n.mu.Lock()
		if len(n.known) >= maxKnown {
			clear(n.known) // forgetting costs a losing insert, nothing more
		}
		n.known[key] = struct{}{}
		n.mu.Unlock()
		if !won {
			continue
		}
		n.claimed.Add(1)
		n.log.Info("budget threshold crossed", zap.String("subject", c.subject), zap.String("period", c.period),
			zap.Int("threshold", t), zap.String("event_id", a.ID))
		if n.cfg.Webhook == "" {
			// nothing to deliver: the console shows it
			if err := n.st.AlertAttempted(ctx, a.ID, store.AlertSent, 0, time.Time{}, "no webhook configured"); err != nil {
				return err
			}
			continue
		}
		n.enqueue(a)
	}
	return nil
}

// lease is how long an alert is its deliverer's: an attempt's timeout and
// a wait in the queue, after which another instance may take it (a
// worker does not send an alert whose lease ran out while it waited).
func (n *Notifier) lease() time.Duration { return 2*n.cfg.Timeout + n.cfg.Poll }

// enqueue hands a to a delivery worker, or leaves it in the outbox when
// the queue is full: never waits.
func (n *Notifier) enqueue(a *store.Alert) {
	select {
	case n.queue <- a:
	default:
		n.log.Debug("alert queue full: the alert waits in the outbox", zap.String("event_id", a.ID))
	}
}

// poller leases alerts due from the outbox: retries, alerts a full queue
// left there, and those of instances that died before sending; and once
// an hour it deletes alerts older than Keep.
func (n *Notifier) poller() {
	defer n.wg.Done()
	t := time.NewTicker(n.cfg.Poll)
	defer t.Stop()
	var swept time.Time // old alerts are deleted hourly
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
		case <-n.outbox:
		}
		if now := n.now(); now.Sub(swept) >= time.Hour {
			swept = now
			if _, err := n.st.DeleteAlertsBefore(n.ctx, now.Add(-n.cfg.Keep)); err != nil && n.ctx.Err() == nil {
				n.log.Warn("deleting old alerts", zap.Error(err))
			}
		}
		if n.cfg.Webhook == "" {
			continue
		}
		room := cap(n.queue) - len(n.queue)
		if room <= 0 {
			continue
		}
		now := n.now()
		due, err := n.st.LeaseAlerts(n.ctx, now, now.Add(n.lease()), room)
		if err != nil {
			if n.ctx.Err() == nil {
				n.log.Warn("reading the alert outbox", zap.Error(err))
			}
			continue
		}
		for _, a := range due {
			n.enqueue(a)
		}
	}
}

func (n *Notifier) worker() {
	defer n.wg.Done()
	for {
		select {
		case <-n.ctx.Done():
			return
		case a := <-n.queue:
			n.deliver(a)
		}
	}
}

// deliver makes one attempt and records it: sent, failed for good, or
// pending again after its backoff.
func (n *Notifier) deliver(a *store.Alert) {
	if !a.LeaseUntil.IsZero() && n.now().Add(n.cfg.Timeout).After(a.LeaseUntil) {
		// waited so long in the queue that the attempt could outlast the
		// lease, and another instance lease and send it meanwhile: the
		// outbox has it once the lease is over
		return
	}
	err := n.post(a)
	if n.ctx.Err() != nil {
		return // stopping: the lease runs out and the outbox has it
	}
	a.Attempts++
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err == nil {
		n.sent.Add(1)
		if err := n.st.AlertAttempted(ctx, a.ID, store.AlertSent, a.Attempts, time.Time{}, ""); err != nil {
			n.log.Warn("recording a delivered alert", zap.String("event_id", a.ID), zap.Error(err))
		}
		return
	}
	now := n.now()
	wait := Backoff(a.Attempts, n.cfg.Backoff, n.cfg.MaxBackoff)
	if a.Attempts >= n.cfg.MaxAttempts || now.Add(wait).After(a.CreatedAt.Add(n.cfg.MaxAge)) {
		n.failed.Add(1)
		n.log.Warn("alert webhook given up", zap.String("event_id", a.ID), zap.Int("attempts", a.Attempts), zap.Error(err))
		if err := n.st.AlertAttempted(ctx, a.ID, store.AlertFailed, a.Attempts, time.Time{}, err.Error()); err != nil {
			n.log.Warn("recording a failed alert", zap.String("event_id", a.ID), zap.Error(err))
		}
		return
	}
	n.log.Debug("alert webhook failed; retrying", zap.String("event_id", a.ID), zap.Int("attempts", a.Attempts),
		zap.Duration("after", wait), zap.Error(err))
	if err := n.st.AlertAttempted(ctx, a.ID, store.AlertPending, a.Attempts, now.Add(wait), err.Error()); err != nil {
		n.log.Warn("recording an alert's attempt", zap.String("event_id", a.ID), zap.Error(err))
		return
	}
	time.AfterFunc(wait, func() { nudge(n.outbox) })
}

// Event is a webhook's body.
type Event struct {
	ID        string `json:"id"`
	Type      string `json:"type"` // budget.threshold_crossed
	Created   string `json:"created_at"`
	UserID    int64  `json:"user_id"`
	KeyID     int64  `json:"key_id,omitempty"`
	Subject   string `json:"subject"`
	Window    string `json:"window"`
	Period    string `json:"period"`
	Threshold int    `json:"threshold"`
	Spent     int64  `json:"spent"`
	Limit     int64  `json:"limit"`
	SpentUSD  string `json:"spent_usd"`
	LimitUSD  string `json:"limit_usd"`
}

// EventOf is a's body: the same on every attempt, so a receiver can
// deduplicate by its id.
func EventOf(a *store.Alert) Event {
	return Event{ID: a.ID, Type: "budget.threshold_crossed", Created: a.CreatedAt.UTC().Format(time.RFC3339Nano),
		UserID: a.UserID, KeyID: a.TokenID, Subject: a.Subject, Window: a.Window, Period: a.Period,
		Threshold: a.Threshold, Spent: a.Spent, Limit: a.Limit, SpentUSD: USD(a.Spent), LimitUSD: USD(a.Limit)}
}

// USD is units as exact dollars: 1500000 is "1.5".
func USD(units int64) string {
	neg := units < 0
	u := uint64(units)
	if neg {
		u = -u
	}
	s := strconv.FormatUint(u/1e6, 10)
	if frac := u % 1e6; frac != 0 {
		s += "." + strings.TrimRight(fmt.Sprintf("%06d", frac), "0")
	}
	if neg {
		s = "-" + s
	}
	return s
}

// post sends a's webhook once; an answer other than 2xx is an error.
func (n *Notifier) post(a *store.Alert) error {
	body, err := json.Marshal(EventOf(a))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(n.ctx, n.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.cfg.Webhook, bytes.NewReader(body))
	if err != nil {
		return err
	}
	ts := n.now().Unix()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "caddy-model-gateway-alerts")
	req.Header.Set(HeaderEventID, a.ID)
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	req.Header.Set(HeaderSignature, SignatureHeader(n.cfg.Secret, ts, body))
	resp, err := n.client.Do(req)
	if err != nil {
		// the URL may carry a token in its query: never in the error
		return fmt.Errorf("posting to the webhook: %w", scrub(err))
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("the webhook answered %d", resp.StatusCode)
	}
	return nil
}

// scrub drops the URL from a client error (*url.Error), keeping the cause.
func scrub(err error) error {
	var ue *url.Error
	if !errors.As(err, &ue) {
		return err
	}
	if ue.Timeout() {
		return fmt.Errorf("no answer within the timeout: %w", context.DeadlineExceeded)
	}
	return ue.Err
}

func newID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "evt_" + hex.EncodeToString(b[:])
}
