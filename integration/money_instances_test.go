package integration

// Money across gateway instances: three gateway processes on one
// PostgreSQL database spend one user's balance, each admitting from memory
// against a slice it leased (billing/lease.go), and together never spend
// what the balance does not hold; a SIGKILLed instance's slice comes back
// when its lease runs out, and its rows, replayed at its restart, are
// charged once.

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
)

// moneyCap is the max_tokens the money tests send: the fake answers 10
// prompt and 20 completion tokens (14 units), so every request's cost is
// within its reservation and a balance never goes below zero.
const moneyCap = 40

// moneyReserve bounds what one such request reserves: 40 completion
// tokens (24 units) and a short prompt's few.
const moneyReserve = 30

// cappedChat sends one chat request with max_tokens set and says its status
// (0: no answer).
func cappedChat(gw *gatewaytest.Gateway, key string) int {
	body := fmt.Sprintf(`{"model":"gpt-4o-mini","max_tokens":%d,"messages":[{"role":"user","content":"hi"}]}`, moneyCap)
	req, _ := http.NewRequest("POST", gw.URL+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// hammer sends requests through gw from workers until each has been
// refused for quiet without a break, and counts the answers by status.
type hammer struct {
	ok, refused, other atomic.Int64
	wg                 sync.WaitGroup
}

func (h *hammer) run(gw *gatewaytest.Gateway, key string, workers int, quiet time.Duration, stop <-chan struct{}) {
	for range workers {
		h.wg.Go(func() {
			var refusedSince time.Time
			for {
				select {
				case <-stop:
					return
				default:
				}
				switch cappedChat(gw, key) {
				case http.StatusOK:
					h.ok.Add(1)
					refusedSince = time.Time{}
					continue
				case http.StatusTooManyRequests:
					h.refused.Add(1)
				default:
					h.other.Add(1)
				}
				if refusedSince.IsZero() {
					refusedSince = time.Now()
				} else if time.Since(refusedSince) > quiet {
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}

// books checks the user's rows against the balance: their costs add up
// exactly to what left it, no row is there twice, every answered request
// has its row (and at most extra more: answered as the client was cut
// off), and the balance is at least floor.
func books(t *testing.T, gw *gatewaytest.Gateway, user string, quota, answered int64, extra int64, floor int64) int64 {
	t.Helper()
	var rows []gatewaytest.UsageRow
	var cost, ok int64
	var u struct{ quota, used int64 }
	// the writers of stopped gateways have committed: read once, settled
	eventually(t, "the books to balance", func() bool {
		rows = gw.WaitUsage(user, int(answered))
		cost, ok = 0, 0
		for _, r := range rows {
			cost += r.Cost
			if r.Status == http.StatusOK {
				ok++
			}
		}
		u.quota, u.used = gw.Quota(user)
		return u.quota == quota-cost
	})
	keys := map[string]bool{}
	for _, r := range rows {
		if keys[r.Key] {
			t.Errorf("row %s twice", r.Key)
		}
		keys[r.Key] = true
	}
	t.Logf("%d answered, %d rows (%d ok) costing %d; balance %d", answered, len(rows), ok, cost, u.quota)
	if ok < answered || ok > answered+extra || u.used != cost || u.quota != quota-cost {
		t.Fatalf("books: %d ok rows costing %d for %d answered; balance %d, used %d of %d", ok, cost, answered, u.quota, u.used, quota)
	}
	if u.quota < floor {
		t.Fatalf("balance %d, below its bound %d", u.quota, floor)
	}
	return u.quota
}

// TestMoneyAcrossInstances: one user hammered through three instances
// until the quota is spent.
func TestMoneyAcrossInstances(t *testing.T) {
	up := gatewaytest.NewFakeOpenAI(t, "sk-up")
	gws := gatewaytest.StartInstances(t, 3, billingConfig("").String(), gatewaytest.Vars{"UP": up.URL, "DSN": "{{DB}}"})
	const quota = 14*150 + 9
	key := gws[0].AddUser("hammered", quota)
	var h hammer
	for _, gw := range gws {
		// refused for three seconds: the key cache's TTL is a second, so
		// every instance has renewed and given back what it cannot spend
		h.run(gw, key, 4, 3*time.Second, nil)
	}
	h.wg.Wait()
	if h.other.Load() != 0 {
		t.Fatalf("%d answers neither 200 nor 429", h.other.Load())
	}
	for _, gw := range gws {
		gw.Stop()
	}
	left := books(t, gws[0], "hammered", quota, h.ok.Load(), 0, 0)
	if left >= moneyReserve {
		t.Fatalf("%d units left: the instances stopped short of spending the balance", left)
	}
}

// TestKilledInstanceMoneyComesBack: an instance is SIGKILLed holding a
// slice and rows not yet committed; the others are refused that slice
// until its lease runs out, then spend it; the killed instance's rows,
// replayed when it starts again, are charged once, the balance below zero
// by at most what it had in flight (answered and not yet charged, or
// still being answered).
func TestKilledInstanceMoneyComesBack(t *testing.T) {
	up := gatewaytest.NewFakeOpenAI(t, "sk-up")
	// leases of six key cache TTLs (1s): lease_ttl, not its default of twelve
	gws := gatewaytest.StartInstances(t, 3, billingConfig(block("usage", "linger 200ms")).option("lease_ttl 6s").String(),
		gatewaytest.Vars{"UP": up.URL, "DSN": "{{DB}}"})
	const quota, workers = 14 * 200, 2
	key := gws[0].AddUser("killed", quota)
	var first, rest hammer
	stop := make(chan struct{})
	first.run(gws[0], key, workers, time.Minute, stop)
	within(t, 30*time.Second, "answers from the first instance", func() bool { return first.ok.Load() >= 30 })
	gws[0].Kill() // mid-load: rows answered, not committed (a 200ms linger)
	close(stop)
	first.wg.Wait()
	killedAt := time.Now()
	// what the killed instance had in flight: answered, not yet charged
	_, charged := gws[1].Quota("killed")
	inFlight := 14*first.ok.Load() - charged + 14*workers
	// the lease runs out lease_ttl (6s) after its last renewal, at most a
	// key cache TTL (1s) before the kill: until then the others cannot
	// spend it all
	for _, gw := range gws[1:] {
		rest.run(gw, key, 4, 9*time.Second, nil)
	}
	rest.wg.Wait()
	if since := time.Since(killedAt); since < 4*time.Second {
		t.Fatalf("the balance was spent %v after the kill: the killed instance's slice was never held", since)
	}
	gws[0].Restart() // replays the rows it had not committed
	for _, gw := range gws {
		gw.Stop()
	}
	answered := first.ok.Load() + rest.ok.Load()
	t.Logf("in flight at the kill: %d units", inFlight)
	left := books(t, gws[1], "killed", quota, answered, workers, -inFlight)
	if left >= moneyReserve {
		t.Fatalf("%d units left: the killed instance's slice never came back", left)
	}
}

// TestRateLimitsAcrossInstances: a key's rpm holds in sum through three
// instances, not three times over: once each instance has served the key
// and synced (a key-cache TTL, a second here, a few times over), a burst
// through all three is admitted no more than the limit.
func TestRateLimitsAcrossInstances(t *testing.T) {
	up := gatewaytest.NewFakeOpenAI(t, "sk-up")
	gws := gatewaytest.StartInstances(t, 3, billingConfig("").String(), gatewaytest.Vars{"UP": up.URL, "DSN": "{{DB}}"})
	const rpm = 30
	gws[0].AddUser("limited", 0)
	key := gws[0].AddToken("limited", "--rpm", fmt.Sprint(rpm))
	admitted := 0
	for _, gw := range gws {
		if r := chat(t, gw, key, "free-model", false); r.status != http.StatusOK {
			t.Fatalf("the first request: %d %s", r.status, r.body)
		}
		admitted++
	}
	time.Sleep(5 * time.Second)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, gw := range gws {
		wg.Go(func() {
			counts, _ := burst(t, gw, key, "free-model", rpm)
			mu.Lock()
			admitted += counts[http.StatusOK]
			mu.Unlock()
		})
	}
	wg.Wait()
	t.Logf("%d requests admitted through three instances, rpm %d", admitted, rpm)
	if admitted > rpm || admitted < rpm-6 {
		t.Fatalf("%d requests admitted through three instances in the minute; rpm %d", admitted, rpm)
	}
}

// TestRateLimitHoldsFromAKeysFirstRequest: a new key with rpm 12, 36
// requests sent round-robin through three instances over 2.4 report
// intervals (the probe: 12 seconds at the default token_cache_ttl
// of 5s; here 2.4 seconds at 1s): the limit holds from the key's first
// request, at most one request beyond it for each instance that joins a
// key another already serves (the probe saw 18 and 19 admitted).
func TestRateLimitHoldsFromAKeysFirstRequest(t *testing.T) {
	up := gatewaytest.NewFakeOpenAI(t, "sk-up")
	// the instances report their use every token_cache_ttl
	const ttl = time.Second
	cfg := gatewayConfig().withDatabase("{{DSN}}").option("token_cache_ttl "+ttl.String()).
		channel("up", "openai", "{{UP}}", "sk-up", "free-model").free("free-model")
	gws := gatewaytest.StartInstances(t, 3, cfg.String(), gatewaytest.Vars{"UP": up.URL, "DSN": "{{DB}}"})
	const rpm = 12
	gws[0].AddUser("fresh", 0)
	key := gws[0].AddToken("fresh", "--rpm", fmt.Sprint(rpm))
	admitted := 0
	tick := time.NewTicker(ttl * 12 / 5 / (3 * rpm))
	defer tick.Stop()
	for i := range 3 * rpm {
		<-tick.C
		switch r := chat(t, gws[i%len(gws)], key, "free-model", false); r.status {
		case http.StatusOK:
			admitted++
		case http.StatusTooManyRequests:
		default:
			t.Fatalf("request %d: %d %s", i, r.status, r.body)
		}
	}
	t.Logf("%d of %d requests admitted through three instances, rpm %d", admitted, 3*rpm, rpm)
	if admitted > rpm+len(gws)-1 || admitted < len(gws) {
		t.Fatalf("%d requests admitted through three instances in 2.4 report intervals; rpm %d, so at most %d", admitted, rpm, rpm+len(gws)-1)
	}
}
