package alerts

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/store"
	"github.com/caddy-model-gateway/gateway/store/sqlite"
)

func TestReached(t *testing.T) {
	for _, tc := range []struct {
		spent, limit int64
		pct          int
		want         bool
	}{
		{499_999, 1_000_000, 50, false},
		{500_000, 1_000_000, 50, true},
		{799_999, 1_000_000, 80, false},
		{800_000, 1_000_000, 80, true},
		{1_000_000, 1_000_000, 100, true},
		{999_999, 1_000_000, 100, false},
		{1, 3, 33, true},  // 100 >= 99
		{1, 3, 34, false}, // 100 < 102
		{0, 1_000_000, 1, false},
		{5, 0, 50, false}, // no limit: never
		{-5, 10, 50, false},
		// amounts whose product overflows 64 bits stay exact
		{math.MaxInt64 / 2, math.MaxInt64, 50, false},
		{math.MaxInt64/2 + 1, math.MaxInt64, 50, true},
		{math.MaxInt64, math.MaxInt64, 100, true},
	} {
		if got := Reached(tc.spent, tc.limit, tc.pct); got != tc.want {
			t.Errorf("Reached(%d, %d, %d) = %v; want %v", tc.spent, tc.limit, tc.pct, got, tc.want)
		}
	}
	if got := ReachedAll(850_000, 1_000_000, []int{50, 80, 100}); !slices.Equal(got, []int{50, 80}) {
		t.Errorf("ReachedAll at 85%% = %v; want [50 80]", got)
	}
}

func TestParsePercent(t *testing.T) {
	for in, want := range map[string]int{"80%": 80, "50": 50, "100%": 100, "1%": 1} {
		if got, err := ParsePercent(in); err != nil || got != want {
			t.Errorf("ParsePercent(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"0%", "101%", "80.5%", "eighty", "", "%", "80%%", " 80"} {
		if _, err := ParsePercent(bad); err == nil {
			t.Errorf("ParsePercent(%q) accepted", bad)
		}
	}
}

func TestSignAndVerify(t *testing.T) {
	body := []byte(`{"id":"evt_1","threshold":80}`)
	ts := int64(1_764_000_000)
	now := time.Unix(ts, 0)
	// a known answer, computed independently:
	// printf '1764000000.{"id":"evt_1","threshold":80}' | openssl dgst -sha256 -hmac whsec_test
	const want = "b001db2afd3ed8c0efeaeae7f713428f4008628e242d27a2a454f01019eb1012"
	got := Sign("whsec_test", ts, body)
	if got != want {
		t.Fatalf("Sign = %s; want %s (openssl's)", got, want)
	}
	h := SignatureHeader("whsec_test", ts, body)
	if err := Verify("whsec_test", h, body, 5*time.Minute, now); err != nil {
		t.Fatalf("Verify of its own signature: %v", err)
	}
	for name, tc := range map[string]struct {
		secret, header string
		body           []byte
		now            time.Time
		want           error
	}{
		"other secret":    {"whsec_other", h, body, now, ErrSignature},
		"body changed":    {"whsec_test", h, []byte(`{"id":"evt_1","threshold":100}`), now, ErrSignature},
		"replayed later":  {"whsec_test", h, body, now.Add(6 * time.Minute), ErrTooOld},
		"from the future": {"whsec_test", h, body, now.Add(-6 * time.Minute), ErrTooOld},
		"no signature":    {"whsec_test", "t=1764000000", body, now, ErrNoSignature},
		"timestamp moved": {"whsec_test", "t=1764000001,v1=" + got, body, now, ErrSignature},
	} {
		if err := Verify(tc.secret, tc.header, tc.body, 5*time.Minute, tc.now); !errors.Is(err, tc.want) {
			t.Errorf("%s: Verify = %v; want %v", name, err, tc.want)
		}
	}
}

func TestBackoff(t *testing.T) {
	base, limit := 100*time.Millisecond, time.Second
	want := []time.Duration{100, 200, 400, 800, 1000, 1000}
	for i, w := range want {
		if got := Backoff(i+1, base, limit); got != w*time.Millisecond {
			t.Errorf("Backoff(%d) = %v; want %v", i+1, got, w*time.Millisecond)
		}
	}
	if got := Backoff(1000, time.Second, 10*time.Minute); got != 10*time.Minute {
		t.Errorf("Backoff(1000) = %v; want the limit", got)
	}
}

func TestUSD(t *testing.T) {
	for units, want := range map[int64]string{0: "0", 1_500_000: "1.5", 1: "0.000001", 12_345_678: "12.345678", -2_000_000: "-2"} {
		if got := USD(units); got != want {
			t.Errorf("USD(%d) = %q; want %q", units, got, want)
		}
	}
}

// receiver is a webhook endpoint that answers as told and keeps what it
// got.
type receiver struct {
	mu     sync.Mutex
	got    []Event
	calls  int
	answer func(call int) int // status of the call-th attempt (1-based)
	hang   chan struct{}      // when set, every call waits on it
	srv    *httptest.Server
	secret string
	t      *testing.T
	seen   chan struct{}
}

func newReceiver(t *testing.T, secret string) *receiver {
	r := &receiver{secret: secret, t: t, seen: make(chan struct{}, 100)}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.calls++
		call := r.calls
		r.mu.Unlock()
		r.seen <- struct{}{}
		if r.hang != nil {
			select {
			case <-r.hang:
			case <-req.Context().Done():
			}
			return
		}
		if err := Verify(r.secret, req.Header.Get(HeaderSignature), body, time.Minute, time.Now()); err != nil {
			t.Errorf("delivery does not verify: %v", err)
		}
		status := http.StatusOK
		if r.answer != nil {
			status = r.answer(call)
		}
		if status == http.StatusOK {
			var e Event
			if err := json.Unmarshal(body, &e); err != nil {
				t.Errorf("body %s: %v", body, err)
			}
			if req.Header.Get(HeaderEventID) != e.ID {
				t.Errorf("event id header %q, body %q", req.Header.Get(HeaderEventID), e.ID)
			}
			r.mu.Lock()
			r.got = append(r.got, e)
			r.mu.Unlock()
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func openStore(t *testing.T) store.Store {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "gateway.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func testConfig(url string) Config {
	return Config{Webhook: url, Secret: "whsec_test", BalanceThresholds: []int{50, 80, 100},
		Timeout: 200 * time.Millisecond, MaxAttempts: 3, Backoff: 10 * time.Millisecond, MaxBackoff: 40 * time.Millisecond,
		Poll: 20 * time.Millisecond, Check: time.Millisecond, AllowPrivate: true}
}

// spend charges u cost through the store, as the usage writer does, and
// tells n as the writer's hook does.
func spend(t *testing.T, st store.Store, n *Notifier, u *store.User, cost int64) {
	t.Helper()
	row := &store.UsageLog{UserID: u.ID, Model: "m", Cost: cost, CreatedAt: time.Now()}
	if err := st.SettleBatch(context.Background(), []*store.UsageLog{row}); err != nil {
		t.Fatal(err)
	}
	n.Committed([]*store.UsageLog{row})
}

func newUser(t *testing.T, st store.Store, quota int64) *store.User {
	u := &store.User{Username: "ann", PasswordHash: "x", Quota: quota}
	if err := st.CreateUser(context.Background(), u); err != nil {
		t.Fatal(err)
	}
	return u
}

// waitFor waits for cond, checking after each delivery the receiver sees
// and each outbox poll (no timed assertion: the test's deadline bounds it).
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for !cond() {
		time.Sleep(5 * time.Millisecond)
	}
}

func alertsOf(t *testing.T, st store.Store) []*store.Alert {
	l, err := st.ListAlerts(context.Background(), store.AlertFilter{})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestBalanceCrossings: a balance spent through 50, 80 and 100 % is
// announced once per threshold, a jump over two thresholds announces both,
// and spend within a threshold announces nothing again.
func TestBalanceCrossings(t *testing.T) {
	st := openStore(t)
	rc := newReceiver(t, "whsec_test")
	n, err := New(testConfig(rc.srv.URL), st, nil, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	n.Start()
	defer n.Stop()
	u := newUser(t, st, 1_000_000)
	spend(t, st, n, u, 400_000) // 40 %
	spend(t, st, n, u, 150_000) // 55 %: 50
	waitFor(t, func() bool { rc.mu.Lock(); defer rc.mu.Unlock(); return len(rc.got) == 1 })
	spend(t, st, n, u, 10_000)  // 56 %: nothing new
	spend(t, st, n, u, 440_000) // 100 %: 80 and 100
	waitFor(t, func() bool { rc.mu.Lock(); defer rc.mu.Unlock(); return len(rc.got) == 3 })
	spend(t, st, n, u, 0)
	rc.mu.Lock()
	var ths []int
	for _, e := range rc.got {
		ths = append(ths, e.Threshold)
		if e.Window != "balance" || e.Subject != "user:1" || e.Limit != 1_000_000 || e.UserID != u.ID {
			t.Errorf("event %+v", e)
		}
	}
	rc.mu.Unlock()
	slices.Sort(ths)
	if !slices.Equal(ths, []int{50, 80, 100}) {
		t.Fatalf("thresholds announced %v; want 50, 80, 100 once each", ths)
	}
	waitFor(t, func() bool {
		for _, a := range alertsOf(t, st) {
			if a.Status != store.AlertSent {
				return false
			}
		}
		return true
	})
}

// TestRetriesThenDelivers: a receiver failing twice gets the alert on the
// third attempt, with the same event id and body.
func TestRetriesThenDelivers(t *testing.T) {
	st := openStore(t)
	rc := newReceiver(t, "whsec_test")
	rc.answer = func(call int) int {
		if call <= 2 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	}
	cfg := testConfig(rc.srv.URL)
	cfg.BalanceThresholds = []int{50}
	n, err := New(cfg, st, nil, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	n.Start()
	defer n.Stop()
	u := newUser(t, st, 100)
	spend(t, st, n, u, 60)
	waitFor(t, func() bool { rc.mu.Lock(); defer rc.mu.Unlock(); return len(rc.got) == 1 })
	waitFor(t, func() bool { l := alertsOf(t, st); return len(l) == 1 && l[0].Status == store.AlertSent })
	a := alertsOf(t, st)[0]
	if a.Attempts != 3 || rc.calls != 3 || rc.got[0].ID != a.ID {
		t.Fatalf("attempts %d, calls %d, event %s of alert %s; want 3 attempts, one event", a.Attempts, rc.calls, rc.got[0].ID, a.ID)
	}
}

// TestHangingReceiverIsBounded: a receiver that never answers costs each
// attempt its timeout, and the alert is given up after MaxAttempts.
func TestHangingReceiverIsBounded(t *testing.T) {
	st := openStore(t)
	rc := newReceiver(t, "whsec_test")
	rc.hang = make(chan struct{})
	defer close(rc.hang)
	cfg := testConfig(rc.srv.URL)
	cfg.BalanceThresholds = []int{50}
	cfg.MaxAttempts = 2
	n, err := New(cfg, st, nil, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	n.Start()
	defer n.Stop()
	u := newUser(t, st, 100)
	spend(t, st, n, u, 60)
	waitFor(t, func() bool { l := alertsOf(t, st); return len(l) == 1 && l[0].Status == store.AlertFailed })
	a := alertsOf(t, st)[0]
	if a.Attempts != 2 || a.LastError == "" {
		t.Fatalf("alert %+v; want 2 attempts and the timeout recorded", a)
	}
	if st := n.Stats(); st.GivenUp != 1 || st.Claimed != 1 || st.Sent != 0 {
		t.Fatalf("stats %+v; want one claimed and given up", st)
	}
}

// TestOutboxAfterCrash: a crossing claimed by an instance that died before
// sending it is sent by another once the claim's lease runs out.
func TestOutboxAfterCrash(t *testing.T) {
	st := openStore(t)
	rc := newReceiver(t, "whsec_test")
	dead := &store.Alert{ID: "evt_dead", Subject: "user:1", Window: "balance", Period: "balance@100", Threshold: 50,
		UserID: 1, Spent: 60, Limit: 100, LeaseUntil: time.Now().Add(50 * time.Millisecond)}
	if won, err := st.ClaimAlert(context.Background(), dead); err != nil || !won {
		t.Fatal(won, err)
	}
	n, err := New(testConfig(rc.srv.URL), st, nil, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	n.Start()
	defer n.Stop()
	waitFor(t, func() bool { rc.mu.Lock(); defer rc.mu.Unlock(); return len(rc.got) == 1 })
	if rc.got[0].ID != "evt_dead" || rc.got[0].Threshold != 50 {
		t.Fatalf("delivered %+v", rc.got[0])
	}
}

// TestPrivateAddressRefused: without allow_private_addresses the webhook
// may not reach a loopback address; the attempt fails, nothing is sent.
func TestPrivateAddressRefused(t *testing.T) {
	st := openStore(t)
	rc := newReceiver(t, "whsec_test")
	cfg := testConfig(rc.srv.URL)
	cfg.AllowPrivate = false
	cfg.MaxAttempts = 1
	cfg.BalanceThresholds = []int{50}
	n, err := New(cfg, st, nil, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	n.Start()
	defer n.Stop()
	u := newUser(t, st, 100)
	spend(t, st, n, u, 60)
	waitFor(t, func() bool { l := alertsOf(t, st); return len(l) == 1 && l[0].Status == store.AlertFailed })
	if l := alertsOf(t, st); rc.calls != 0 || !strings.Contains(l[0].LastError, "not allowed") {
		t.Fatalf("calls %d, last error %q", rc.calls, l[0].LastError)
	}
}

// TestFullQueueNeverBlocks: Committed returns at once however many
// crossings wait, and a full delivery queue leaves alerts in the outbox,
// from which they are all delivered.
func TestFullQueueNeverBlocks(t *testing.T) {
	st := openStore(t)
	rc := newReceiver(t, "whsec_test")
	cfg := testConfig(rc.srv.URL)
	cfg.Queue, cfg.Workers = 1, 1
	cfg.Timeout = 100 * time.Millisecond // the lease, and so the outbox's wait, follows it
	n, err := New(cfg, st, nil, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	n.Start()
	defer n.Stop()
	var users []*store.User
	for i := range 5 {
		u := &store.User{Username: "u" + string(rune('a'+i)), PasswordHash: "x", Quota: 100}
		if err := st.CreateUser(context.Background(), u); err != nil {
			t.Fatal(err)
		}
		users = append(users, u)
	}
	for _, u := range users {
		spend(t, st, n, u, 100) // 50, 80 and 100 at once: 15 alerts, queue of 1
	}
	waitFor(t, func() bool { rc.mu.Lock(); defer rc.mu.Unlock(); return len(rc.got) == 15 })
	ids := map[string]bool{}
	for _, e := range rc.got {
		if ids[e.ID] {
			t.Fatalf("event %s delivered twice", e.ID)
		}
		ids[e.ID] = true
	}
}

// TestPendingIsBounded: commits of more users and keys than maxPending
// while the checker is behind keep at most maxPending of them (the rest
// are counted dropped), and a row's window ids at most maxWindowIDs.
func TestPendingIsBounded(t *testing.T) {
	n, err := New(Config{BalanceThresholds: []int{50}}, nil, nil, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	// not started: nothing drains the set
	rows := make([]*store.UsageLog, maxPending+5)
	for i := range rows {
		rows[i] = &store.UsageLog{UserID: int64(i + 1), Cost: 1}
	}
	var ids []string
	for i := range maxWindowIDs + 10 {
		ids = append(ids, "user:1/5h@"+strconv.Itoa(i*300))
	}
	rows[0].Windows = strings.Join(ids, ",")
	n.Committed(rows)
	n.Committed([]*store.UsageLog{{UserID: 1, TokenID: 0, Cost: 1}}) // already pending: kept
	if dropped := n.Stats().Dropped; len(n.pending) != maxPending || dropped != 5 {
		t.Fatalf("pending %d, dropped %d; want %d and 5", len(n.pending), dropped, maxPending)
	}
	if got := len(n.pending[pair{1, 0}]); got != maxWindowIDs {
		t.Fatalf("a pending key holds %d window ids; want %d", got, maxWindowIDs)
	}
}

// TestNoSendPastTheLease: an alert that waited in the queue until its
// lease could end during the attempt is left to the outbox, not sent: the
// instance that leases it next would send it too.
func TestNoSendPastTheLease(t *testing.T) {
	st := openStore(t)
	rc := newReceiver(t, "whsec_test")
	n, err := New(testConfig(rc.srv.URL), st, nil, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	a := &store.Alert{ID: "evt_late", Subject: "user:1", Window: "balance", Period: "balance@100", Threshold: 50,
		UserID: 1, Spent: 60, Limit: 100, LeaseUntil: time.Now().Add(n.cfg.Timeout / 2)}
	if won, err := st.ClaimAlert(context.Background(), a); err != nil || !won {
		t.Fatal(won, err)
	}
	n.deliver(a)
	if rc.calls != 0 {
		t.Fatalf("sent with %v of its lease left, under one timeout", n.cfg.Timeout/2)
	}
	a.LeaseUntil = time.Now().Add(3 * n.cfg.Timeout)
	n.deliver(a)
	if rc.calls != 1 {
		t.Fatalf("not sent with its whole lease left: %d calls", rc.calls)
	}
}

func TestConfigValidate(t *testing.T) {
	for name, tc := range map[string]struct {
		cfg  Config
		want string
	}{
		"webhook without secret": {Config{Webhook: "https://hooks.example.com/x"}, "needs a secret"},
		"relative webhook":       {Config{Webhook: "/hooks", Secret: "s"}, "absolute http or https URL"},
		"ftp webhook":            {Config{Webhook: "ftp://hooks.example.com/", Secret: "s"}, "absolute http or https URL"},
		"threshold 0":            {Config{Thresholds: []int{0}}, "thresholds: threshold 0%"},
		"balance twice":          {Config{BalanceThresholds: []int{80, 80}}, "balance_thresholds: threshold 80% is given twice"},
		"keep a week":            {Config{Keep: 7 * 24 * time.Hour}, "a month's alerts must outlive the month"},
	} {
		if err := tc.cfg.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v; want %q", name, err, tc.want)
		}
	}
	ok := Config{Webhook: "https://hooks.example.com/x", Secret: "s", Thresholds: []int{50, 100}}
	if err := ok.Validate(); err != nil {
		t.Errorf("a good configuration: %v", err)
	}
}

// TestOldAlertsDeleted: the poller deletes alerts of windows older than
// Keep, and keeps a balance's, whose claim it is.
func TestOldAlertsDeleted(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	old := time.Now().Add(-40 * 24 * time.Hour)
	for _, a := range []*store.Alert{
		{ID: "evt_old", Subject: "user:1", Window: "daily", Period: "daily@x", Threshold: 50, UserID: 1, Spent: 5, Limit: 10, CreatedAt: old},
		{ID: "evt_bal", Subject: "user:1", Window: "balance", Period: "balance@10", Threshold: 50, UserID: 1, Spent: 5, Limit: 10, CreatedAt: old},
	} {
		if _, err := st.ClaimAlert(ctx, a); err != nil {
			t.Fatal(err)
		}
		if err := st.AlertAttempted(ctx, a.ID, store.AlertSent, 1, time.Time{}, ""); err != nil {
			t.Fatal(err)
		}
	}
	cfg := testConfig("")
	cfg.Keep = MinKeep
	n, err := New(cfg, st, nil, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	n.Start()
	defer n.Stop()
	waitFor(t, func() bool { return len(alertsOf(t, st)) == 1 })
	if l := alertsOf(t, st); l[0].ID != "evt_bal" {
		t.Fatalf("kept %s; want the balance's", l[0].ID)
	}
}

// TestErrorKeepsTheURLOut: a failed delivery's recorded error names
// neither the webhook's path nor its query, where a token may be.
func TestErrorKeepsTheURLOut(t *testing.T) {
	st := openStore(t)
	rc := newReceiver(t, "whsec_test")
	rc.srv.Close() // nothing answers there any more
	cfg := testConfig(rc.srv.URL + "/hooks/gw?token=tok_s3cret")
	cfg.BalanceThresholds, cfg.MaxAttempts = []int{50}, 1
	n, err := New(cfg, st, nil, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	n.Start()
	defer n.Stop()
	u := newUser(t, st, 100)
	spend(t, st, n, u, 60)
	waitFor(t, func() bool { l := alertsOf(t, st); return len(l) == 1 && l[0].Status == store.AlertFailed })
	if e := alertsOf(t, st)[0].LastError; e == "" || strings.Contains(e, "tok_s3cret") || strings.Contains(e, "/hooks/gw") {
		t.Fatalf("the recorded error reads %q", e)
	}
}
