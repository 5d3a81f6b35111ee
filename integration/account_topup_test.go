package integration

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/store"
)

// Redemption codes and top-ups: a code redeemed once, however many
// redeem it at the same moment, and what `redeem add` accepts.

func TestAccountTopup(t *testing.T) {
	g := startAccounts(t, "on", 1000)
	// no quota at all: a request without max_tokens is given what the
	// quota covers, so only an empty balance is refused outright
	c := loggedIn(t, g, "bob", 0, "user")
	codes := makeCodes(t, g, 4, 2_000_000)

	key := g.AddToken("bob")
	if s := chatOnce(t, g, key, "hello"); s != http.StatusTooManyRequests {
		t.Fatalf("with no quota a request gets %d, want 429", s)
	}
	a := c.ok(http.MethodPost, "/api/user/topup", map[string]string{"key": codes[0]})
	// the new quota is spendable at once
	if s := chatOnce(t, g, key, "hello"); s != 200 {
		t.Fatalf("right after a topup a request gets %d", s)
	}
	// what the code added and the balance after (a quota code names no plan)
	if got := strings.TrimSpace(string(a.body)); got != `{"quota":2000000,"quota_added":2000000}` {
		t.Fatalf("topup answered %s", a.body)
	}
	g.WaitUsage("bob", 2)
	if got := c.self(); got.Quota+got.UsedQuota != 2_000_000 || got.UsedQuota == 0 {
		t.Fatalf("after topup and a request: quota %d, used %d; want them to sum to 2000000", got.Quota, got.UsedQuota)
	}

	// disable one code, expire another (through the store: the API refuses
	// to create a code that is already expired)
	st := g.Store()
	ctx := context.Background()
	list, err := st.ListRedemptionCodes(ctx, store.CodeFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, rc := range list {
		if rc.Code == codes[1] {
			if err := st.SetRedemptionCodeStatus(ctx, rc.ID, store.CodeDisabled); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := st.CreateRedemptionCodes(ctx, []*store.RedemptionCode{{Code: "EXPIRED-CODE", Quota: 5, ExpiresAt: time.Now().Add(-time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	var msgs []string
	for _, key := range []string{codes[0], codes[1], "EXPIRED-CODE", "NO-SUCH-CODE"} {
		msgs = append(msgs, c.do(http.MethodPost, "/api/user/topup", map[string]string{"key": key}).apiErr(t, 400, "invalid_redemption_code"))
	}
	for _, m := range msgs[1:] {
		if m != msgs[0] {
			t.Fatalf("refusals differ, telling a guesser which codes exist: %q", msgs)
		}
	}
	c.do(http.MethodPost, "/api/user/topup", map[string]string{"key": ""}).apiErr(t, 400, "invalid_request")
	c.do(http.MethodPost, "/api/user/topup", map[string]string{"code": codes[2]}).apiErr(t, 400, "invalid_json")
	newClient(t, g).do(http.MethodPost, "/api/user/topup", map[string]string{"key": codes[2]}).apiErr(t, 401, "not_logged_in")
	if got := c.self(); got.Quota+got.UsedQuota != 2_000_000 {
		t.Fatalf("quota after refusals = %d (used %d)", got.Quota, got.UsedQuota)
	}
}

func TestAccountTopupRaceRedeemsOnce(t *testing.T) {
	g := startAccounts(t, "on", 1000)
	clients := []*client{loggedIn(t, g, "r1", 0, "user"), loggedIn(t, g, "r2", 0, "user")}
	for round, code := range makeCodes(t, g, 3, 1_000_000) {
		var (
			wg        sync.WaitGroup
			mu        sync.Mutex
			successes int
			statuses  []int
		)
		start := make(chan struct{})
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				a := clients[i%2].do(http.MethodPost, "/api/user/topup", map[string]string{"key": code})
				mu.Lock()
				defer mu.Unlock()
				statuses = append(statuses, a.status)
				if a.status == 200 {
					successes++
				}
			}()
		}
		close(start)
		wg.Wait()
		if successes != 1 {
			t.Fatalf("round %d: %d successes (statuses %v), want exactly 1", round, successes, statuses)
		}
		for _, s := range statuses {
			if s != 200 && s != 400 {
				t.Fatalf("round %d: status %d among %v", round, s, statuses)
			}
		}
	}
	if total := clients[0].self().Quota + clients[1].self().Quota; total != 3_000_000 {
		t.Fatalf("three codes of 1000000 credited %d in all", total)
	}
}

// TestRedeemAddRefusesRateLimits: a redemption code adds quota only, so
// `redeem add` refuses --rpm, --tpm and --max-parallel (it once took and
// ignored them) with where limits are set, creates no code, and its help
// no longer offers them.
func TestRedeemAddRefusesRateLimits(t *testing.T) {
	g := startAccounts(t, "off", 1000)
	ctx := context.Background()
	for _, flag := range []string{"--rpm", "--tpm", "--max-parallel"} {
		out, errOut, err := g.TryCLI("redeem", "add", "--quota", "1000", flag, "5")
		if err == nil || strings.TrimSpace(out) != "" || !strings.Contains(errOut, "adds quota only") || !strings.Contains(errOut, "caddy gateway user set") {
			t.Errorf("redeem add %s 5: err %v, stdout %q, stderr %q; want a refusal naming user set", flag, err, out, errOut)
		}
	}
	if codes, err := g.Store().ListRedemptionCodes(ctx, store.CodeFilter{Limit: 10}); err != nil || len(codes) != 0 {
		t.Fatalf("codes after refusals: %d (%v), want none", len(codes), err)
	}
	help, _, err := g.TryCLI("redeem", "add", "--help")
	if err != nil || !strings.Contains(help, "--quota") || strings.Contains(help, "--rpm") || strings.Contains(help, "--max-parallel") {
		t.Fatalf("redeem add --help (%v):\n%s", err, help)
	}
	if codes := makeCodes(t, g, 2, 1000); len(codes) != 2 {
		t.Fatalf("redeem add printed %v, want two codes", codes)
	}
}
