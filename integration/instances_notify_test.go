package integration

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
	"github.com/caddy-model-gateway/gateway/internal/pgtest"
)

// Changes to keys and users reach every instance on PostgreSQL at once,
// through LISTEN/NOTIFY, rather than within the key cache's TTL. The
// tests set token_cache_ttl to 10 minutes, so they can pass only through
// the announcements: the cache alone would keep serving what it has.

// heard is how long a change may take to be announced to the other
// instances and applied there: a notification's round trip, on a loaded
// machine. The TTL the tests configure is 10 minutes.
const heard = 10 * time.Second

func notifyConfig() *caddyfile {
	return accountConfig("on", 1000, 1000).option("token_cache_ttl 10m")
}

// TestInstancesHearKeyChangesAtOnce: with three instances each caching a
// user's keys, a key disabled through instance A's API is refused by B
// and C; enabled again with the CLI, it is served there again; a user's
// rpm lowered and the user disabled through A's admin API apply on B and
// C; each at once, with a 10-minute TTL.
func TestInstancesHearKeyChangesAtOnce(t *testing.T) {
	gws := gatewaytest.StartInstances(t, instances, notifyConfig().String(), nil)
	admin := loggedIn(t, gws[0], "boss", 0, "admin")
	key := gws[0].AddUser("kim", 100_000_000)
	other := gws[0].AddUser("lou", 100_000_000)
	kim := newClient(t, gws[0])
	kim.login("kim")
	st := gws[0].Store()
	ctx := context.Background()
	kimUser, err := st.UserByName(ctx, "kim")
	if err != nil {
		t.Fatal(err)
	}
	tokens, err := st.ListTokens(ctx, kimUser.ID)
	if err != nil || len(tokens) != 1 {
		t.Fatalf("kim's tokens: %v %v", tokens, err)
	}
	louUser, err := st.UserByName(ctx, "lou")
	if err != nil {
		t.Fatal(err)
	}

	// served is a request that must succeed: it also puts the key in the
	// instance's cache (again, if it had dropped it)
	served := func(when string, gw int, key string) {
		t.Helper()
		if r := chat(t, gws[gw], key, "demo", false); r.status != http.StatusOK {
			t.Fatalf("%s, instance %d: %d %s", when, gw, r.status, r.body)
		}
	}
	// on B and C (A drops its own entries itself)
	others := []int{1, 2}
	heardOn := func(what, key string, want func(status int) bool) {
		t.Helper()
		for _, i := range others {
			within(t, heard, fmt.Sprintf("%s, on instance %d", what, i), func() bool {
				return want(chat(t, gws[i], key, "demo", false).status)
			})
		}
	}
	refused := func(status int) bool { return status == http.StatusUnauthorized || status == http.StatusForbidden }
	ok := func(status int) bool { return status == http.StatusOK }

	for _, i := range others {
		served("before the changes", i, key)
		served("before the changes", i, other)
	}
	kim.ok(http.MethodPatch, fmt.Sprintf("/api/user/tokens/%d", tokens[0].ID), map[string]string{"status": "disabled"})
	heardOn("kim's key disabled on instance 0", key, refused)

	gws[0].CLI("token", "enable", "--id", fmt.Sprint(tokens[0].ID))
	heardOn("kim's key enabled again with the CLI", key, ok)

	for _, i := range others {
		served("before lou's limit", i, other)
	}
	admin.ok(http.MethodPatch, fmt.Sprintf("/api/admin/users/%d", louUser.ID), map[string]any{"limits": map[string]int{"rpm": 1}})
	// 1 rpm: once the instance has the limit, the next request is over it
	heardOn("lou's rpm of 1 set on instance 0", other, func(status int) bool { return status == http.StatusTooManyRequests })

	served("before kim is disabled", 1, key)
	served("before kim is disabled", 2, key)
	admin.ok(http.MethodPatch, fmt.Sprintf("/api/admin/users/%d", kimUser.ID), map[string]string{"status": "disabled"})
	heardOn("kim disabled on instance 0", key, refused)
}

// TestInstancesHearKeyChangesAfterReconnecting: when the database goes
// down, an instance says it no longer hears of changes; once the database
// is back its listening connection is made again, what it cached is
// dropped (announcements may have been missed), and changes are heard at
// once again.
func TestInstancesHearKeyChangesAfterReconnecting(t *testing.T) {
	cluster, err := pgtest.New() // of its own: it is restarted
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cluster.Close(); err != nil {
			t.Error(err)
		}
	})
	dsn := cluster.Database(t)
	first := gatewaytest.StartOnPostgres(t, dsn, notifyConfig().String(), nil)
	second := gatewaytest.StartOnPostgres(t, dsn, notifyConfig().String(), nil)
	key := first.AddUser("kim", 100_000_000)
	if r := chat(t, second, key, "demo", false); r.status != http.StatusOK {
		t.Fatalf("before the restart: %d %s", r.status, r.body)
	}
	if err := cluster.Stop(); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the second instance to notice it lost its listening connection", func() bool {
		return strings.Contains(second.Logs(), "not hearing of key and user changes from other instances")
	})
	if err := cluster.Restart(); err != nil {
		t.Fatal(err)
	}
	// a change made while the instance may not be listening yet: it drops
	// everything it cached once it listens again
	first.CLI("user", "disable", "--username", "kim")
	within(t, time.Minute, "kim disabled while the database restarted, on the second instance", func() bool {
		status := chat(t, second, key, "demo", false).status
		return status == http.StatusUnauthorized || status == http.StatusForbidden
	})
	first.CLI("user", "enable", "--username", "kim")
	within(t, heard, "kim enabled again, on the second instance", func() bool {
		return chat(t, second, key, "demo", false).status == http.StatusOK
	})
}

// TestInstancesSpendACreditAtOnce: a balance that ran out on every
// instance, credited through one of them (a top-up code, an
// administrator's credit), is spendable on the others at their next
// request, not at their next lease renewal (10 minutes here); and so is a
// key's own limit raised when it was spent.
func TestInstancesSpendACreditAtOnce(t *testing.T) {
	gws := gatewaytest.StartInstances(t, instances, notifyConfig().String(), nil)
	admin := loggedIn(t, gws[0], "boss", 0, "admin")
	kim := loggedIn(t, gws[0], "kim", 0, "user")
	key := gws[0].AddToken("kim")
	refusedEverywhere := func(when string) {
		t.Helper()
		for i, gw := range gws {
			if s := chatOnce(t, gw, key, "hi"); s != http.StatusTooManyRequests {
				t.Fatalf("%s, instance %d: %d, want 429", when, i, s)
			}
		}
	}
	servedOn := func(what string, on ...int) {
		t.Helper()
		for _, i := range on {
			within(t, heard, fmt.Sprintf("%s, served on instance %d", what, i), func() bool {
				return chatOnce(t, gws[i], key, "hi") == http.StatusOK
			})
		}
	}
	refusedEverywhere("with nothing on the balance")
	code := makeCodes(t, gws[0], 1, 5_000_000)[0]
	kim.ok(http.MethodPost, "/api/user/topup", map[string]string{"key": code})
	servedOn("5 USD topped up through instance 0", 1, 2)

	// another user, credited by an administrator through instance 0
	lou := loggedIn(t, gws[0], "lou", 0, "user")
	louKey := gws[0].AddToken("lou")
	for i, gw := range gws {
		if s := chatOnce(t, gw, louKey, "hi"); s != http.StatusTooManyRequests {
			t.Fatalf("lou with nothing on the balance, instance %d: %d, want 429", i, s)
		}
	}
	admin.ok(http.MethodPatch, fmt.Sprintf("/api/admin/users/%d", lou.self().ID), map[string]any{"quota_delta": 5_000_000})
	for _, i := range []int{2, 1} {
		within(t, heard, fmt.Sprintf("5 USD credited to lou by an administrator through instance 0, served on instance %d", i), func() bool {
			return chatOnce(t, gws[i], louKey, "hi") == http.StatusOK
		})
	}

	// a key of its own limit, spent to nothing, raised through instance 0
	capped := gws[0].AddToken("kim", "--quota", "1")
	for i, gw := range gws {
		// one unit may pay for a short answer: spent, the key is refused
		eventually(t, fmt.Sprintf("a key limited to one unit refused on instance %d", i), func() bool {
			return chatOnce(t, gw, capped, "hi") == http.StatusTooManyRequests
		})
	}
	var tokens struct{ Data []apiToken }
	kim.ok(http.MethodGet, "/api/user/tokens", nil).decode(t, &tokens)
	var id int64
	for _, tk := range tokens.Data {
		if tk.QuotaLimit == 1 {
			id = tk.ID
		}
	}
	kim.ok(http.MethodPatch, fmt.Sprintf("/api/user/tokens/%d", id), map[string]any{"quota_limit": 5_000_000})
	for _, i := range []int{1, 2} {
		within(t, heard, fmt.Sprintf("the key's limit raised, served on instance %d", i), func() bool {
			return chatOnce(t, gws[i], capped, "hi") == http.StatusOK
		})
	}
}
