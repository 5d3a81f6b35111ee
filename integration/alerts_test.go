package integration

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
	"github.com/caddy-model-gateway/gateway/store"
)

// Budget alerts (docs/alerts.md): a threshold of a window crossed by
// requests spread over three instances is announced once, signed; a
// receiver that fails is retried with backoff, one that hangs is given up
// within the configured timeout and attempts; a user's own thresholds on
// their key.

const hookSecret = "whsec_integration"

// hookEvent is the webhook's body as a receiver reads it.
type hookEvent struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	UserID    int64  `json:"user_id"`
	KeyID     int64  `json:"key_id"`
	Subject   string `json:"subject"`
	Window    string `json:"window"`
	Period    string `json:"period"`
	Threshold int    `json:"threshold"`
	Spent     int64  `json:"spent"`
	Limit     int64  `json:"limit"`
}

// hookReceiver is a webhook endpoint that verifies each delivery as
// docs/alerts.md tells a receiver to (HMAC-SHA256 over "t.body", hex, in
// Gateway-Signature's v1), and answers per user as told.
type hookReceiver struct {
	*httptest.Server
	mu       sync.Mutex
	events   []hookEvent
	attempts map[string]int // by event id
	// failFirst fails that many attempts of each event of the user; hang
	// holds every attempt of the user's events until the test ends
	failFirst map[int64]int
	hang      map[int64]bool
	bad       []string // deliveries that did not verify
	done      chan struct{}
}

func newHookReceiver(t *testing.T) *hookReceiver {
	gatewaytest.Secret(hookSecret) // TestMain checks no log line holds it
	h := &hookReceiver{attempts: map[string]int{}, failFirst: map[int64]int{}, hang: map[int64]bool{}, done: make(chan struct{})}
	h.Server = httptest.NewServer(http.HandlerFunc(h.serve))
	t.Cleanup(func() { close(h.done); h.Close() })
	return h
}

func (h *hookReceiver) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	sig := r.Header.Get("Gateway-Signature")
	var ts, v1 string
	for part := range strings.SplitSeq(sig, ",") {
		k, v, _ := strings.Cut(part, "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			v1 = v
		}
	}
	m := hmac.New(sha256.New, []byte(hookSecret))
	m.Write([]byte(ts + "." + string(body)))
	n, err := strconv.ParseInt(ts, 10, 64)
	fresh := err == nil && time.Since(time.Unix(n, 0)).Abs() < 5*time.Minute
	var e hookEvent
	jsonErr := json.Unmarshal(body, &e)
	h.mu.Lock()
	if !hmac.Equal([]byte(v1), []byte(hex.EncodeToString(m.Sum(nil)))) || !fresh || jsonErr != nil ||
		r.Header.Get("Gateway-Timestamp") != ts || r.Header.Get("Gateway-Event-Id") != e.ID {
		h.bad = append(h.bad, sig+" "+string(body))
	}
	h.attempts[e.ID]++
	attempt := h.attempts[e.ID]
	fail, hang := attempt <= h.failFirst[e.UserID], h.hang[e.UserID]
	if !fail && !hang {
		h.events = append(h.events, e)
	}
	h.mu.Unlock()
	switch {
	case hang:
		select {
		case <-h.done:
		case <-r.Context().Done():
		}
	case fail:
		w.WriteHeader(http.StatusServiceUnavailable)
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

// of is the events received of a user, and the deliveries that failed to
// verify.
func (h *hookReceiver) of(userID int64) ([]hookEvent, []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []hookEvent
	for _, e := range h.events {
		if e.UserID == userID {
			out = append(out, e)
		}
	}
	return out, slices.Clone(h.bad)
}

// alertsConfig prices flat-1 at exactly 100 units a request, reserved and
// billed alike, so ten requests fill a $0.001 window to 100 %.
func alertsConfig(lines ...string) *caddyfile {
	return gatewayConfig().
		withSite(
			"@account path /api/user/* /api/admin/*",
			block("route @account", "gateway_account"),
			"@console path / /console /console/*",
			block("route @console", "gateway_console"),
			"@models path /v1/* /v1beta/*",
			block("route @models", "gateway_auth", "gateway_relay")).
		option("token_cache_ttl 1s").
		channel("up", "openai", "{{UP}}", "sk-up", "flat-1").
		price("flat-1", "request 0.0001").
		option(block("alerts", append([]string{"webhook {{HOOK}}", "secret " + hookSecret, "allow_private_addresses",
			"check_interval 50ms", "poll_interval 100ms", "backoff 50ms 200ms"}, lines...)...))
}

func alertChat(ctx context.Context, gw *gatewaytest.Gateway, key string) error {
	c := openai.NewClient(option.WithBaseURL(gw.URL+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
	_, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{
		Model:     "flat-1",
		MaxTokens: openai.Int(20),
		Messages:  []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")},
	})
	return err
}

func alertsOf(t *testing.T, st store.Store, userID int64) []*store.Alert {
	t.Helper()
	l, err := st.ListAlerts(context.Background(), store.AlertFilter{UserID: userID})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func settled(l []*store.Alert) bool {
	for _, a := range l {
		if a.Status == store.AlertPending {
			return false
		}
	}
	return true
}

// TestAlertsOncePerCrossingAcrossInstances: requests spread over three
// instances on PostgreSQL fill a user's daily window through 50, 80 and
// 100 %; the receiver gets exactly one signed event per threshold.
func TestAlertsOncePerCrossingAcrossInstances(t *testing.T) {
	up := gatewaytest.NewFakeOpenAI(t, "sk-up")
	hook := newHookReceiver(t)
	gws := gatewaytest.StartInstances(t, instances, alertsConfig("thresholds 50% 80% 100%", "timeout 2s").String(),
		gatewaytest.Vars{"UP": up.URL, "HOOK": hook.URL})
	key := gws[0].AddUser("spread", 100_000_000)
	gws[0].CLI("user", "budget", "--username", "spread", "--daily", "0.001")
	uid := gws[0].User("spread").ID

	// all three instances at once, until ten are answered; one refused
	// while the window's last room is claimed by another instance is sent
	// again (claims come back within token_cache_ttl)
	var mu sync.Mutex
	answered, refused := 0, 0
	var wg sync.WaitGroup
	for _, gw := range gws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				done := answered >= 10 || refused > 300
				mu.Unlock()
				if done {
					return
				}
				err := alertChat(context.Background(), gw, key)
				var e *openai.Error
				mu.Lock()
				switch {
				case err == nil:
					answered++
				case errors.As(err, &e) && e.StatusCode == 429:
					refused++
				default:
					t.Error(err)
					refused = 1000
				}
				mu.Unlock()
				if err != nil {
					time.Sleep(50 * time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	if answered != 10 {
		t.Fatalf("%d requests answered (%d refused); want the window's ten", answered, refused)
	}
	if err := alertChat(context.Background(), gws[0], key); err == nil {
		t.Fatal("an eleventh request was answered: the window was not full at ten")
	}
	st := gws[0].Store()
	eventually(t, "three alerts delivered", func() bool {
		l := alertsOf(t, st, uid)
		return len(l) == 3 && settled(l)
	})
	got, bad := hook.of(uid)
	if len(bad) > 0 {
		t.Fatalf("deliveries that do not verify: %q", bad)
	}
	var ths []int
	for _, e := range got {
		ths = append(ths, e.Threshold)
		if e.Type != "budget.threshold_crossed" || e.Window != "daily" || e.Subject != "user:"+strconv.FormatInt(uid, 10) ||
			e.Limit != 1000 || e.Spent*100 < int64(e.Threshold)*e.Limit || !strings.HasPrefix(e.Period, "daily@") {
			t.Errorf("event %+v", e)
		}
	}
	slices.Sort(ths)
	if !slices.Equal(ths, []int{50, 80, 100}) {
		t.Fatalf("thresholds received %v; want 50, 80 and 100 once each", ths)
	}
	for _, a := range alertsOf(t, st, uid) {
		if a.Status != store.AlertSent || a.Attempts != 1 {
			t.Errorf("alert %+v; want sent at the first attempt", a)
		}
	}
}

// TestAlertsDeliveryFaultsAndKeyThresholds: on one gateway, a receiver
// failing twice gets the event at the third attempt; one that hangs is
// given up after max_attempts of timeout each while the user's requests
// go on being answered; a user's own threshold on their key (set through
// the account API) is announced with the key; a reload keeps alerts on.
func TestAlertsDeliveryFaultsAndKeyThresholds(t *testing.T) {
	up := gatewaytest.NewFakeOpenAI(t, "sk-up")
	hook := newHookReceiver(t)
	gw := gatewaytest.Start(t, alertsConfig("thresholds 50% 100%", "timeout 300ms", "max_attempts 3").String(),
		gatewaytest.Vars{"UP": up.URL, "HOOK": hook.URL})
	st := gw.Store()
	users := map[string]int64{}
	keys := map[string]string{}
	for _, name := range []string{"flaky", "hung", "keyed"} {
		keys[name] = gw.AddUser(name, 100_000_000, "--management")
		gw.CLI("user", "budget", "--username", name, "--daily", "0.001")
		users[name] = gw.User(name).ID
	}
	hook.mu.Lock()
	hook.failFirst[users["flaky"]] = 2
	hook.hang[users["hung"]] = true
	hook.mu.Unlock()

	// the keyed user's own 30 %, on the key their requests use
	resp, body := gw.Do("GET", "/api/user/tokens", keys["keyed"], nil, nil)
	var toks struct {
		Data []struct{ ID int64 } `json:"data"`
	}
	if err := json.Unmarshal(body, &toks); err != nil || resp.StatusCode != 200 || len(toks.Data) != 1 {
		t.Fatalf("tokens: %d %s", resp.StatusCode, body)
	}
	keyID := toks.Data[0].ID
	path := "/api/user/tokens/" + strconv.FormatInt(keyID, 10) + "/alerts"
	if resp, body := gw.Do("PUT", path, keys["keyed"], []byte(`{"thresholds":[30]}`), nil); resp.StatusCode != 200 {
		t.Fatalf("set thresholds: %d %s", resp.StatusCode, body)
	}
	if resp, body := gw.Do("PUT", path, keys["keyed"], []byte(`{"thresholds":[130]}`), nil); resp.StatusCode != 400 || !strings.Contains(string(body), "invalid_thresholds") {
		t.Fatalf("a threshold of 130%%: %d %s", resp.StatusCode, body)
	}

	for _, name := range []string{"flaky", "hung"} {
		for range 5 { // 50 %
			if err := alertChat(context.Background(), gw, keys[name]); err != nil {
				t.Fatal(err)
			}
		}
	}
	for range 3 { // 30 %: the key's own threshold, none of the operator's
		if err := alertChat(context.Background(), gw, keys["keyed"]); err != nil {
			t.Fatal(err)
		}
	}

	eventually(t, "the flaky receiver's alert delivered", func() bool {
		l := alertsOf(t, st, users["flaky"])
		return len(l) == 1 && l[0].Status == store.AlertSent
	})
	if a := alertsOf(t, st, users["flaky"])[0]; a.Attempts != 3 || a.Threshold != 50 {
		t.Fatalf("flaky alert %+v; want 50 %% delivered at the third attempt", a)
	}
	if got, _ := hook.of(users["flaky"]); len(got) != 1 || got[0].Threshold != 50 {
		t.Fatalf("flaky receiver got %+v", got)
	}

	// the hung receiver holds every attempt: the user is still answered
	for range 2 {
		if err := alertChat(context.Background(), gw, keys["hung"]); err != nil {
			t.Fatalf("a request while the webhook hangs: %v", err)
		}
	}
	eventually(t, "the hung receiver's alert given up", func() bool {
		l := alertsOf(t, st, users["hung"])
		return len(l) == 1 && l[0].Status == store.AlertFailed
	})
	if a := alertsOf(t, st, users["hung"])[0]; a.Attempts != 3 || !strings.Contains(a.LastError, "timeout") {
		t.Fatalf("hung alert %+v; want given up after 3 attempts that timed out", a)
	}
	hook.mu.Lock()
	var hungAttempts int
	for id, n := range hook.attempts {
		if id == alertsOf(t, st, users["hung"])[0].ID {
			hungAttempts = n
		}
	}
	hook.mu.Unlock()
	if hungAttempts != 3 {
		t.Fatalf("the hung receiver saw %d attempts; want 3", hungAttempts)
	}

	eventually(t, "the key's own threshold announced", func() bool {
		l := alertsOf(t, st, users["keyed"])
		return len(l) == 1 && l[0].Status == store.AlertSent
	})
	got, bad := hook.of(users["keyed"])
	if len(bad) > 0 {
		t.Fatalf("deliveries that do not verify: %q", bad)
	}
	if len(got) != 1 || got[0].Threshold != 30 || got[0].KeyID != keyID || got[0].Window != "daily" {
		t.Fatalf("keyed events %+v; want 30 %% of the daily window with key %d", got, keyID)
	}
	m := gw.Metrics()
	if m["gateway_alerts_claimed_total"] != 3 || m["gateway_alerts_delivered_total"] != 2 || m["gateway_alerts_given_up_total"] != 1 ||
		m["gateway_alerts_dropped_total"] != 0 || m["gateway_alerts_queue_depth"] != 0 {
		t.Fatalf("alert metrics: claimed %v, delivered %v, given up %v, dropped %v, queued %v; want 3, 2, 1, 0, 0",
			m["gateway_alerts_claimed_total"], m["gateway_alerts_delivered_total"], m["gateway_alerts_given_up_total"],
			m["gateway_alerts_dropped_total"], m["gateway_alerts_queue_depth"])
	}

	// after a reload the new configuration judges the commits: a user
	// crossing 50 % then is announced (the old one let go of the writer's
	// hook without taking the new one's)
	gw.ForceReload()
	after := gw.AddUser("after", 100_000_000)
	gw.CLI("user", "budget", "--username", "after", "--daily", "0.001")
	for range 5 {
		if err := alertChat(context.Background(), gw, after); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "a crossing after the reload announced", func() bool {
		got, _ := hook.of(gw.User("after").ID)
		return len(got) == 1 && got[0].Threshold == 50
	})

	// the user sees their own alerts, not another's
	resp, body = gw.Do("GET", "/api/user/alerts", keys["keyed"], nil, nil)
	var mine struct{ Data []store.Alert }
	if err := json.Unmarshal(body, &mine); err != nil || resp.StatusCode != 200 || len(mine.Data) != 1 || mine.Data[0].Threshold != 30 {
		t.Fatalf("own alerts: %d %s", resp.StatusCode, body)
	}
}
