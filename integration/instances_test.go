package integration

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
	"github.com/caddy-model-gateway/gateway/store"
)

// Three gateway processes on one PostgreSQL database behave as one
// gateway for what lives in the database: sessions, redemption codes and
// invitation transfers, tasks, key and user changes, periodic work, and
// each instance's reload or restart. (The money and the rate limits
// across instances have tests of their own.)

const instances = 3

// TestInstancesShareSessions: a login on one instance works on the others;
// "log out everywhere" on one ends the session on all of them.
func TestInstancesShareSessions(t *testing.T) {
	gws := gatewaytest.StartInstances(t, instances, accountConfig("on", 1000, 1000).String(), nil)
	createUser(gws[0], "sam", 0, "user")
	first := newClient(t, gws[0])
	first.login("sam")
	// one browser: one cookie jar (cookies are per host, not per port)
	on := make([]*client, instances)
	for i, gw := range gws {
		on[i] = newClient(t, gw)
		on[i].http = first.http
		if u := on[i].self(); u.Username != "sam" {
			t.Fatalf("instance %d: self is %+v", i, u)
		}
	}
	second := newClient(t, gws[2]) // another browser
	second.login("sam")
	on[1].ok(http.MethodPost, "/api/user/logout_all", struct{}{})
	for i, gw := range gws {
		on[i].do(http.MethodGet, "/api/user/self", nil).apiErr(t, 401, "")
		other := newClient(t, gw)
		other.http = second.http
		other.do(http.MethodGet, "/api/user/self", nil).apiErr(t, 401, "")
	}
}

// TestInstancesRedeemAndTransferOnce: a code redeemed through all three
// instances at once is credited once; invitation transfers racing through
// them move exactly the invitation quota there is.
func TestInstancesRedeemAndTransferOnce(t *testing.T) {
	gws := gatewaytest.StartInstances(t, instances, accountConfig("on", 1000, 1000).String(), nil)
	users := []string{"r1", "r2", "r3"}
	var clients []*client
	for i, name := range users {
		createUser(gws[0], name, 0, "user")
		c := newClient(t, gws[i])
		c.login(name)
		clients = append(clients, c)
	}
	race := func(n int, do func(i int) apiAnswer) (successes int) {
		var (
			wg sync.WaitGroup
			mu sync.Mutex
		)
		start := make(chan struct{})
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				a := do(i)
				if a.status != 200 && a.status != 400 {
					t.Errorf("status %d %s", a.status, a.body)
				}
				if a.status == 200 {
					mu.Lock()
					successes++
					mu.Unlock()
				}
			}()
		}
		close(start)
		wg.Wait()
		return successes
	}
	for round, code := range makeCodes(t, gws[0], 3, 1_000_000) {
		if n := race(9, func(i int) apiAnswer {
			return clients[i%instances].do(http.MethodPost, "/api/user/topup", map[string]string{"key": code})
		}); n != 1 {
			t.Fatalf("round %d: the code was redeemed %d times", round, n)
		}
	}
	var total int64
	for _, c := range clients {
		total += c.self().Quota
	}
	if total != 3_000_000 {
		t.Fatalf("three codes of 1000000 credited %d in all", total)
	}

	// an inviter with 500000 of invitation quota, logged in on every instance
	inviter := inviterWith(t, gws[0], "host", 2)
	var on []*client
	for _, gw := range gws {
		c := newClient(t, gw)
		c.http = inviter.http
		on = append(on, c)
	}
	if n := race(12, func(i int) apiAnswer {
		return on[i%instances].do(http.MethodPost, "/api/user/aff_transfer", map[string]int64{"quota": 100_000})
	}); n != 5 {
		t.Fatalf("%d transfers of 100000 out of 500000 succeeded", n)
	}
	if u := on[2].self(); u.Quota != 500_000 || u.AffQuota != 0 {
		t.Fatalf("after the transfers: quota %d, aff_quota %d", u.Quota, u.AffQuota)
	}
}

// TestInstancesPollEachTaskOnce: with three instances polling, a task's
// status reads never overlap (one lease at a time); the instance holding
// the lease is killed mid-poll, another takes the task up once the lease
// runs out (3s here), and the task is settled exactly once.
func TestInstancesPollEachTaskOnce(t *testing.T) {
	s := &taskSetup{openai: gatewaytest.NewFakeOpenAI(t, "sk-up-openai"), gemini: gatewaytest.NewFakeGemini(t, "sk-up-gemini"),
		backup: gatewaytest.NewFakeOpenAI(t, "sk-up-openai-2")}
	s.vars = gatewaytest.Vars{"OPENAI": s.openai.URL, "OPENAI2": s.backup.URL, "GEMINI": s.gemini.URL}
	// each instance journals in its own directory (the default on PostgreSQL)
	s.cfg = taskOptions{}.config().without("usage").option(block("tasks",
		"poll_interval 50ms", "max_poll_interval 200ms", "poll_timeout 2s", "lease 3s", "max_file_size 1MB"))
	gws := gatewaytest.StartInstances(t, instances, s.cfg.String(), s.vars)
	key := gws[0].AddUser("ada", 5_000_000)
	s.openai.Videos.SetFaults(gatewaytest.JobFaults{HangPolls: true})
	sub := submitTask(t, gws[1], key, `{"model":"sora-2","prompt":"x","duration":4}`)
	job := s.openai.Videos.Last(t)
	// long enough for every instance to have tried the task a few times
	eventually(t, "status reads of the task", func() bool { return s.openai.Videos.Faulted() >= 2 })
	if n := s.openai.Videos.MostHanging(); n != 1 {
		t.Fatalf("%d status reads of one task at once: instances polled it beside each other", n)
	}

	// kill whichever instance holds the lease now
	st := gws[0].Store()
	task, err := st.TaskByID(context.Background(), sub.Data.TaskID)
	if err != nil || task.LeaseOwner == "" {
		t.Fatalf("no lease on the task: %+v %v", task, err)
	}
	holder := -1
	for i, gw := range gws {
		if strings.Contains(task.LeaseOwner, fmt.Sprintf("/%d/", gw.Pid())) {
			holder = i
		}
	}
	if holder < 0 {
		t.Fatalf("lease owner %q is none of the instances", task.LeaseOwner)
	}
	gws[holder].Kill()
	killed := time.Now()
	s.openai.Videos.SetFaults(gatewaytest.JobFaults{})
	s.openai.Videos.Finish(job.ID)
	other := gws[(holder+1)%instances]
	waitTask(t, other, key, sub.Data.TaskID, "finished")
	if time.Since(killed) > 30*time.Second {
		t.Fatalf("the task was taken up %s after the kill, with a lease of 3s", time.Since(killed))
	}
	time.Sleep(500 * time.Millisecond) // more polls: still once
	rows := other.WaitUsage("ada", 1)
	if q, used := other.Quota("ada"); len(rows) != 1 || rows[0].Cost != 400_000 || q != 4_600_000 || used != 400_000 {
		t.Fatalf("after the kill: quota %d used %d rows %+v", q, used, rows)
	}
}

// TestInstancesSeeKeyChanges: a key disabled, a user disabled, a user's
// limit lowered by a writer elsewhere take effect on every instance within
// the key cache's TTL (1s here) and a store read: an entry past the TTL is
// served while it is reloaded.
func TestInstancesSeeKeyChanges(t *testing.T) {
	up := gatewaytest.NewFakeOpenAI(t, "sk-up")
	gws := gatewaytest.StartInstances(t, instances, billingConfig("").String(), gatewaytest.Vars{"UP": up.URL, "DSN": "{{DB}}"})
	st := gws[0].Store()
	ctx := context.Background()
	keyA := gws[0].AddUser("kim", 100_000_000)
	keyB := gws[0].AddToken("kim")
	other := gws[0].AddUser("lou", 100_000_000)
	// every instance has the keys cached
	for _, gw := range gws {
		for _, key := range []string{keyA, keyB, other} {
			if r := chat(t, gw, key, "gpt-4o-mini", false); r.status != 200 {
				t.Fatalf("before the changes: %d %s", r.status, r.body)
			}
		}
	}
	// within means: every instance, with the bound of the TTL and a reload
	const bound = 3 * time.Second
	refused := func(status int) bool { return status == http.StatusUnauthorized || status == http.StatusForbidden }
	everywhere := func(what, key string) {
		t.Helper()
		start := time.Now()
		for i, gw := range gws {
			within(t, bound-time.Since(start), fmt.Sprintf("%s on instance %d", what, i), func() bool {
				return refused(chat(t, gw, key, "gpt-4o-mini", false).status)
			})
		}
	}

	kim, _ := st.UserByName(ctx, "kim")
	tokens, err := st.ListTokens(ctx, kim.ID)
	if err != nil || len(tokens) != 2 {
		t.Fatalf("kim's tokens: %v %v", tokens, err)
	}
	gws[0].CLI("token", "disable", "--id", fmt.Sprint(tokens[0].ID))
	gws[0].CLI("token", "disable", "--id", fmt.Sprint(tokens[1].ID))
	everywhere("kim's key disabled", keyA)
	everywhere("kim's second key disabled", keyB)

	lou, _ := st.UserByName(ctx, "lou")
	gws[1].CLI("user", "set", "--username", "lou", "--rpm", "1")
	start := time.Now()
	for i, gw := range gws {
		// 1 rpm: once the instance has the limit, the second request is over it
		within(t, bound-time.Since(start), fmt.Sprintf("lou's rpm of 1 on instance %d", i), func() bool {
			return chat(t, gw, other, "gpt-4o-mini", false).status == http.StatusTooManyRequests
		})
	}
	if err := st.SetUserStatus(ctx, lou.ID, store.UserDisabled); err != nil {
		t.Fatal(err)
	}
	everywhere("lou disabled", other)
}

// TestInstancesSweepOneAtATime: usage retention on three instances sweeps
// on one at a time: the one that takes the lock deletes every old row and
// the others skip their rounds meanwhile, instead of each deleting a share.
func TestInstancesSweepOneAtATime(t *testing.T) {
	up := gatewaytest.NewFakeOpenAI(t, "sk-up")
	dsn := gatewaytest.PostgresDatabase(t)
	vars := gatewaytest.Vars{"UP": up.URL, "DSN": "{{DB}}"}
	first := gatewaytest.StartOnPostgres(t, dsn, billingConfig("").String(), vars)
	first.AddUser("old", 100_000_000)
	user := first.User("old")
	const old = 30
	var rows []*store.UsageLog
	for i := range old {
		rows = append(rows, &store.UsageLog{UserID: user.ID, Model: "gpt-4o-mini", Cost: 1, Status: 200,
			CreatedAt: time.Now().Add(-100*24*time.Hour - time.Duration(i)*time.Second)})
	}
	if err := first.Store().SettleBatch(context.Background(), rows); err != nil {
		t.Fatal(err)
	}
	// one row a batch, 100ms apart: a sweep takes 3s, while the others
	// look every 50ms
	cfg := billingConfig(block("usage_retention 90d", "interval 50ms", "batch_size 1", "pause 100ms"))
	var gws []*gatewaytest.Gateway
	for range instances {
		gws = append(gws, gatewaytest.StartOnPostgres(t, dsn, cfg.String(), vars))
	}
	deleted := func() (per []float64, sum float64) {
		for _, gw := range gws {
			n := gw.Metrics()["gateway_usage_retention_deleted_total"]
			per = append(per, n)
			sum += n
		}
		return per, sum
	}
	eventually(t, "the old rows to be deleted", func() bool { _, sum := deleted(); return sum >= old })
	per, sum := deleted()
	sweepers := 0
	for _, n := range per {
		if n > 0 {
			sweepers++
		}
	}
	if sum != old || sweepers != 1 {
		t.Fatalf("rows deleted per instance %v: want all %d by one instance", per, old)
	}
}

// TestInstancesRollingRestart: while clients call all three instances,
// one is reloaded, then each is stopped and started again in turn; the
// others keep serving and settling, and every request served is billed
// once.
func TestInstancesRollingRestart(t *testing.T) {
	up := gatewaytest.NewFakeOpenAI(t, "sk-up")
	vars := gatewaytest.Vars{"UP": up.URL, "DSN": "{{DB}}"}
	cfg := billingConfig("")
	gws := gatewaytest.StartInstances(t, instances, cfg.String(), vars)
	const quota = 1_000_000_000
	key := gws[0].AddUser("roll", quota)
	loads := make([]*load, instances)
	for i, gw := range gws {
		loads[i] = startLoad(t, gw, key, "gpt-4o-mini", 2)
	}
	for _, l := range loads {
		l.waitSent(t, 20)
	}
	gws[0].Reload(cfg.option("max_attempts 2").String(), vars)
	for i, gw := range gws {
		// the instance goes down: its clients' requests fail to connect
		// (status 0) until it is back; the others keep serving
		gw.Stop()
		for j, l := range loads {
			if j != i {
				l.waitSent(t, 20)
			}
		}
		gw.Restart()
		loads[i].waitSent(t, 20)
	}
	served, lost := 0, 0
	for i, l := range loads {
		counts := l.finish()
		for status := range counts {
			if status != 200 && status != 0 {
				t.Fatalf("instance %d answered %v", i, counts)
			}
		}
		served, lost = served+counts[200], lost+counts[0]
	}
	// a request whose connection a stopping instance closed (status 0)
	// may or may not have been served; every one served is billed once
	gws[0].WaitUsage("roll", served)
	time.Sleep(time.Second) // rows of requests cut on the way back
	rows := len(gws[0].WaitUsage("roll", served))
	if rows > served+lost {
		t.Fatalf("%d rows for %d requests served and %d cut", rows, served, lost)
	}
	checkBooks(t, gws[0], "roll", quota, rows, rows)
}
