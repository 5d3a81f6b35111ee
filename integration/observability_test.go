package integration

import (
	"context"
	"database/sql"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3" // a second connection that holds the write lock
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
	"github.com/caddy-model-gateway/gateway/store"
)

// observedConfig is two channels for gpt-4o-mini (primary first) with
// the health endpoints, the access log on stderr and the extra gateway
// option ("" for none).
func observedConfig(extra string) *caddyfile {
	return gatewayConfig().
		option("token_cache_ttl 200ms").
		option(extra).
		channel("primary", "openai", "{{UP1}}", "sk-up-1", "gpt-4o-mini", "priority 10").
		channel("backup", "openai", "{{UP2}}", "sk-up-2", "gpt-4o-mini").
		price("gpt-4o-mini", "input 0.15", "output 0.60", "cached_input 0.075").
		withSite(
			logToStderr,
			block("handle /livez", "gateway_health live"),
			block("handle /readyz", "gateway_health ready"),
			block("route /v1/*", "gateway_auth", "gateway_relay"))
}

type observed struct {
	gw              *gatewaytest.Gateway
	primary, backup *gatewaytest.FakeOpenAI
	vars            gatewaytest.Vars
}

func startObserved(t *testing.T, extra string) *observed {
	t.Helper()
	o := &observed{primary: gatewaytest.NewFakeOpenAI(t, "sk-up-1"), backup: gatewaytest.NewFakeOpenAI(t, "sk-up-2")}
	o.vars = gatewaytest.Vars{"UP1": o.primary.URL, "UP2": o.backup.URL}
	o.gw = gatewaytest.Start(t, observedConfig(extra).String(), o.vars)
	return o
}

func (o *observed) client(key string, opts ...option.RequestOption) openai.Client {
	return openai.NewClient(append([]option.RequestOption{option.WithBaseURL(o.gw.URL + "/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0)}, opts...)...)
}

// series spells a sample's key as the exposition does: labels by name.
func series(name string, labels ...string) string {
	var pairs []string
	for i := 0; i < len(labels); i += 2 {
		pairs = append(pairs, fmt.Sprintf("%s=%q", labels[i], labels[i+1]))
	}
	sort.Strings(pairs)
	return name + "{" + strings.Join(pairs, ",") + "}"
}

// genaiSeries labels a gen_ai_* series of chat on gpt-4o-mini on a channel,
// with the labels sorted as the exposition sorts them.
func genaiSeries(name, channel, lastLabel, lastValue string) string {
	return series(name, "channel", channel, "gen_ai_operation_name", "chat", "gen_ai_provider_name", "openai",
		"gen_ai_request_model", "gpt-4o-mini", lastLabel, lastValue)
}

func requestsSeries(model, channel, class string) string {
	return series("gateway_requests_total", "channel", channel, "dialect", "openai", "model", model, "status_class", class)
}

func TestMetricsCountKnownTraffic(t *testing.T) {
	o := startObserved(t, "")
	key := o.gw.AddUser("alice", 10_000_000)
	o.primary.Set(func(b *gatewaytest.Behavior) { b.PromptTokens, b.CompletionTokens, b.CachedTokens = 10, 20, 4 })
	o.backup.Set(func(b *gatewaytest.Behavior) { b.PromptTokens, b.CompletionTokens = 7, 3 })
	c := o.client(key)
	ctx := context.Background()

	for range 3 {
		if _, err := c.Chat.Completions.New(ctx, chatParams("gpt-4o-mini", "hi")); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		p := chatParams("gpt-4o-mini", "count")
		p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		s := c.Chat.Completions.NewStreaming(ctx, p)
		for s.Next() {
		}
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Chat.Completions.New(ctx, chatParams("no-such-model", "hi")); err == nil {
		t.Fatal("an unknown model was served")
	}
	// primary fails: one failover to backup
	o.primary.Set(func(b *gatewaytest.Behavior) { b.FailStatus = http.StatusInternalServerError })
	if _, err := c.Chat.Completions.New(ctx, chatParams("gpt-4o-mini", "hi")); err != nil {
		t.Fatal(err)
	}
	rows := o.gw.WaitUsage("alice", 7)

	// each primary answer: 6 uncached*0.15 + 4 cached*0.075 + 20*0.60 = 13.2 -> 14
	// the backup's: 7*0.15 + 3*0.60 = 2.85 -> 3
	var cost int64
	for _, r := range rows {
		cost += r.Cost
	}
	if cost != 5*14+3 {
		t.Fatalf("usage rows cost %d, want %d", cost, 5*14+3)
	}
	m := o.gw.Metrics()
	want := map[string]float64{
		requestsSeries("gpt-4o-mini", "primary", "2xx"):                                          5,
		requestsSeries("gpt-4o-mini", "backup", "2xx"):                                           1,
		requestsSeries("_other", "", "4xx"):                                                      1,
		series("gateway_cost_units_total", "model", "gpt-4o-mini"):                               float64(cost),
		series("gateway_failovers_total", "from_channel", "primary", "reason", "upstream_error"): 1,
		series("gateway_failovers_total", "from_channel", "backup", "reason", "upstream_error"):  0,

		genaiSeries("gen_ai_client_token_usage_sum", "primary", "gen_ai_token_type", "input"):          50,
		genaiSeries("gen_ai_client_token_usage_count", "primary", "gen_ai_token_type", "input"):        5,
		genaiSeries("gen_ai_client_token_usage_sum", "primary", "gen_ai_token_type", "output"):         100,
		genaiSeries("gen_ai_client_token_usage_sum", "primary", "gen_ai_token_type", "cached_input"):   20,
		genaiSeries("gen_ai_client_token_usage_count", "primary", "gen_ai_token_type", "cached_input"): 5,
		genaiSeries("gen_ai_client_token_usage_sum", "backup", "gen_ai_token_type", "input"):           7,
		genaiSeries("gen_ai_client_token_usage_sum", "backup", "gen_ai_token_type", "output"):          3,
		genaiSeries("gen_ai_client_token_usage_count", "backup", "gen_ai_token_type", "output"):        1,

		genaiSeries("gen_ai_server_request_duration_seconds_count", "primary", "error_type", ""): 5,
		genaiSeries("gen_ai_server_request_duration_seconds_count", "backup", "error_type", ""):  1,
		series("gen_ai_server_request_duration_seconds_count", "channel", "", "error_type", "404", "gen_ai_operation_name", "chat",
			"gen_ai_provider_name", "", "gen_ai_request_model", "_other"): 1,
		// only the two streams have a first token and a time per token
		series("gen_ai_server_time_to_first_token_seconds_count", "channel", "primary", "gen_ai_operation_name", "chat",
			"gen_ai_provider_name", "openai", "gen_ai_request_model", "gpt-4o-mini"): 2,
		series("gen_ai_server_time_per_output_token_seconds_count", "channel", "primary", "gen_ai_operation_name", "chat",
			"gen_ai_provider_name", "openai", "gen_ai_request_model", "gpt-4o-mini"): 2,
		series("gateway_channel_consecutive_failures", "channel", "primary"): 1,
		series("gateway_channel_consecutive_failures", "channel", "backup"):  0,
		"gateway_reserved_units":    0,
		"gateway_usage_queue_depth": 0,
	}
	for s, v := range want {
		got, ok := m[s]
		if !ok || got != v {
			t.Errorf("%s = %v (present %v), want %v", s, got, ok, v)
		}
	}
	// each of the seven requests looks its key up once: a miss, then hits
	// while the entry lives (token_cache_ttl 200ms: on a loaded machine the
	// seven can take longer, and the entry is looked up anew; CI: misses 2,
	// hits 5)
	if misses, hits := m["gateway_key_cache_misses_total"], m["gateway_key_cache_hits_total"]; m["gateway_usage_commit_seconds_count"] < 1 ||
		misses < 1 || hits < 1 || misses+hits < 7 {
		t.Errorf("commits %v, key cache misses %v hits %v: want at least 1 commit, a miss and a hit, and 7 lookups",
			m["gateway_usage_commit_seconds_count"], misses, hits)
	}
	// Caddy's own metrics are in the same registry
	if _, ok := m["caddy_config_last_reload_successful"]; !ok {
		t.Error("Caddy's own metrics are missing from /metrics")
	}
	for s := range m {
		if strings.Contains(s, "alice") || strings.Contains(s, "user") && !strings.Contains(s, "gen_ai") {
			t.Errorf("a per-user series without the per_user option: %s", s)
		}
	}
}

func TestMetricsPerUserOption(t *testing.T) {
	o := startObserved(t, block("metrics", "per_user"))
	key := o.gw.AddUser("bob", 10_000_000)
	c := o.client(key)
	for range 2 {
		if _, err := c.Chat.Completions.New(context.Background(), chatParams("gpt-4o-mini", "hi")); err != nil {
			t.Fatal(err)
		}
	}
	rows := o.gw.WaitUsage("bob", 2)
	uid := fmt.Sprint(rows[0].UserID)
	m := o.gw.Metrics()
	s := series("gateway_requests_total", "channel", "primary", "dialect", "openai", "model", "gpt-4o-mini", "status_class", "2xx", "user_id", uid)
	if m[s] != 2 {
		t.Fatalf("%s = %v, want 2", s, m[s])
	}
	if c := series("gateway_cost_units_total", "model", "gpt-4o-mini", "user_id", uid); m[c] != float64(rows[0].Cost+rows[1].Cost) {
		t.Fatalf("%s = %v, want %d", c, m[c], rows[0].Cost+rows[1].Cost)
	}
}

// TestMetricsAcrossReload: the relay's series belong to the configuration
// and restart at zero on a reload, as Caddy's caddy_http_* do; the shared
// database's (usage writer, key cache) carry on, as Caddy's admin and
// config counters do. A reload registers nothing twice.
func TestMetricsAcrossReload(t *testing.T) {
	o := startObserved(t, "")
	key := o.gw.AddUser("carol", 10_000_000)
	c := o.client(key)
	for range 3 {
		if _, err := c.Chat.Completions.New(context.Background(), chatParams("gpt-4o-mini", "hi")); err != nil {
			t.Fatal(err)
		}
	}
	o.gw.WaitUsage("carol", 3)
	before := o.gw.Metrics()
	primary := requestsSeries("gpt-4o-mini", "primary", "2xx")
	if before[primary] != 3 {
		t.Fatalf("before the reload %s = %v, want 3", primary, before[primary])
	}

	for i := range 2 {
		// a real change: Caddy skips an identical config
		o.gw.Reload(observedConfig(fmt.Sprintf("max_attempts %d", 3+i)).String(), o.vars)
	}
	after := o.gw.Metrics()
	if v, ok := after[primary]; ok && v != 0 {
		t.Fatalf("after the reload %s = %v: the relay's counters should restart", primary, v)
	}
	for _, s := range []string{"gateway_usage_commit_seconds_count", "gateway_key_cache_hits_total", "gateway_key_cache_misses_total"} {
		if after[s] < before[s] || before[s] == 0 {
			t.Errorf("%s went from %v to %v across the reload: the database's series should carry on", s, before[s], after[s])
		}
	}
	if _, err := c.Chat.Completions.New(context.Background(), chatParams("gpt-4o-mini", "hi")); err != nil {
		t.Fatal(err)
	}
	o.gw.WaitUsage("carol", 4)
	if got := o.gw.Metrics()[primary]; got != 1 {
		t.Fatalf("after the reload and one request %s = %v, want 1", primary, got)
	}
	if strings.Contains(o.gw.Logs(), "duplicate metrics collector registration") {
		t.Fatal("a reload registered a collector twice")
	}
}

func TestRequestIDRoundTrip(t *testing.T) {
	o := startObserved(t, "")
	key := o.gw.AddUser("dave", 10_000_000)
	c := o.client(key)
	ctx := context.Background()
	send := func(id string) string {
		t.Helper()
		var resp *http.Response
		opts := []option.RequestOption{option.WithResponseInto(&resp)}
		if id != "" {
			opts = append(opts, option.WithHeader("X-Request-Id", id))
		}
		if _, err := c.Chat.Completions.New(ctx, chatParams("gpt-4o-mini", "hi"), opts...); err != nil {
			t.Fatal(err)
		}
		return resp.Header.Get("X-Request-Id")
	}
	given := "trace-42.abc:7"
	if got := send(given); got != given {
		t.Fatalf("X-Request-Id out = %q, want the caller's %q", got, given)
	}
	hexID := regexp.MustCompile(`^[0-9a-f]{32}$`)
	fresh := send("")
	malformed := send("two words\"")
	if !hexID.MatchString(fresh) || !hexID.MatchString(malformed) || fresh == malformed {
		t.Fatalf("new ids %q and %q: want two different 32-hex-digit ids", fresh, malformed)
	}
	// refused before any channel: the id is there too
	resp, _ := o.gw.Do("POST", "/v1/chat/completions", "sk-wrong", []byte(`{}`), http.Header{"X-Request-Id": {"refused-1"}})
	if got := resp.Header.Get("X-Request-Id"); got != "refused-1" {
		t.Fatalf("a 401 carried X-Request-Id %q", got)
	}

	rows := o.gw.WaitUsage("dave", 3)
	up := o.primary.Requests()
	for i, want := range []string{given, fresh, malformed} {
		if rows[i].RequestID != want || rows[i].UpstreamRequestID != up[i].RequestID || up[i].RequestID == "" {
			t.Errorf("row %d: request id %q upstream %q; want %q and the upstream's %q", i, rows[i].RequestID, rows[i].UpstreamRequestID, want, up[i].RequestID)
		}
	}
	// access lines are written as each handler returns, after the answer
	logs := waitLog(t, o.gw.Logs, `"request_id":"refused-1"`)
	for _, id := range []string{given, fresh, malformed, "refused-1"} {
		if !strings.Contains(logs, `"request_id":"`+id+`"`) {
			t.Errorf("the access log has no request_id %q", id)
		}
	}
}

func TestUsageExport(t *testing.T) {
	o := startObserved(t, "")
	key := o.gw.AddUser("erin", 10_000_000)
	c := o.client(key)
	for i := range 3 {
		if _, err := c.Chat.Completions.New(context.Background(), chatParams("gpt-4o-mini", "hi"),
			option.WithHeader("X-Request-Id", fmt.Sprintf("export-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	rows := o.gw.WaitUsage("erin", 3)

	recs, err := csv.NewReader(strings.NewReader(o.gw.CLI("usage", "export", "--format", "csv", "--since", "1h"))).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 4 || recs[0][0] != "id" || recs[0][2] != "request_id" {
		t.Fatalf("csv = %v, want a header and 3 rows", recs)
	}
	for i, r := range recs[1:] {
		if r[2] != fmt.Sprintf("export-%d", i) || r[3] != rows[i].UpstreamRequestID || r[13] != fmt.Sprint(rows[i].Cost) {
			t.Errorf("csv row %d = %v, want request id export-%d, upstream id %q, cost %d", i, r, i, rows[i].UpstreamRequestID, rows[i].Cost)
		}
	}

	lines := strings.Split(strings.TrimSpace(o.gw.CLI("usage", "export", "--format", "jsonl")), "\n")
	if len(lines) != 3 {
		t.Fatalf("jsonl has %d lines, want 3", len(lines))
	}
	for i, line := range lines {
		var r store.UsageLog
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		if r.ID != rows[i].ID || r.RequestID != rows[i].RequestID || r.Cost != rows[i].Cost {
			t.Errorf("jsonl row %d = %+v, want %+v", i, r, rows[i])
		}
	}
	future := time.Now().Add(48 * time.Hour).Format(time.DateOnly)
	if out := strings.TrimSpace(o.gw.CLI("usage", "export", "--format", "csv", "--since", future)); strings.Contains(out, "\n") {
		t.Fatalf("export since %s = %q, want the header alone", future, out)
	}
	if _, _, err := o.gw.TryCLI("usage", "export", "--format", "xml"); err == nil {
		t.Fatal("--format xml was accepted")
	}
}

type readyAnswer struct {
	Status string `json:"status"`
	Store  struct {
		OK bool `json:"ok"`
	} `json:"store"`
	UsageWriter struct {
		OK bool `json:"ok"`
	} `json:"usage_writer"`
	Channels []struct {
		Name string `json:"name"`
		Type string `json:"type"`
	} `json:"channels"`
}

func (o *observed) ready(t *testing.T) (int, readyAnswer, string) {
	t.Helper()
	resp, body := o.gw.Do("GET", "/readyz", "", nil, nil)
	var a readyAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		t.Fatalf("readyz answered %s: %v", body, err)
	}
	return resp.StatusCode, a, string(body)
}

// TestHealthWhenTheStoreRefusesWrites holds SQLite's write lock from a
// second connection (BEGIN IMMEDIATE), as another process could: running
// as root, file permissions would not stop the gateway.
func TestHealthWhenTheStoreRefusesWrites(t *testing.T) {
	o := startObserved(t, "")
	code, a, body := o.ready(t)
	if code != http.StatusOK || a.Status != "ok" || !a.Store.OK || !a.UsageWriter.OK || len(a.Channels) != 2 ||
		a.Channels[0].Name != "primary" || a.Channels[0].Type != "openai" {
		t.Fatalf("readyz = %d %s", code, body)
	}
	for _, secret := range []string{o.gw.DBPath, "sk-up-", o.primary.URL} {
		if strings.Contains(body, secret) {
			t.Fatalf("readyz tells %q: %s", secret, body)
		}
	}

	db, err := sql.Open("sqlite3", o.gw.DBPath+"?_busy_timeout=5000")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(context.Background(), "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	waitReady := func(want int) string {
		t.Helper()
		var body string
		eventually(t, fmt.Sprintf("readyz to answer %d", want), func() bool {
			var code int
			code, _, body = o.ready(t)
			return code == want
		})
		return body
	}
	body = waitReady(http.StatusServiceUnavailable)
	if !strings.Contains(body, `"store":{"ok":false`) || strings.Contains(body, o.gw.DBPath) {
		t.Fatalf("readyz while locked = %s", body)
	}
	if resp, _ := o.gw.Do("GET", "/livez", "", nil, nil); resp.StatusCode != http.StatusOK {
		t.Fatalf("livez = %d while the store is locked: the process is alive", resp.StatusCode)
	}
	if _, err := conn.ExecContext(context.Background(), "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	waitReady(http.StatusOK)
}

// TestRetentionDeletesInBatchesWhileServing seeds rows past the window,
// then reloads with usage_retention on while clients keep calling: the
// old rows go (a day dropped whole on SQLite, batches on PostgreSQL's
// default partition), the rest and the daily totals stay, no request
// fails.
func TestRetentionDeletesInBatchesWhileServing(t *testing.T) {
	o := startObserved(t, "")
	key := o.gw.AddUser("frank", 100_000_000)
	frank := o.gw.User("frank")
	st := o.gw.Store()
	ctx := context.Background()
	now := time.Now()
	const old, kept = 2500, 300
	seed := func(n int, age time.Duration) {
		var batch []*store.UsageLog
		for i := range n {
			batch = append(batch, &store.UsageLog{UserID: frank.ID, Model: "gpt-4o-mini", Cost: 2, PromptTokens: 5,
				Status: 200, CreatedAt: now.Add(-age - time.Duration(i)*time.Second)})
		}
		if err := st.SettleBatch(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	seed(old, 100*24*time.Hour)
	seed(kept, 89*24*time.Hour)
	oldDay := now.Add(-101 * 24 * time.Hour)
	daysBefore, err := st.DailyUsageByModel(ctx, frank.ID, oldDay)
	if err != nil {
		t.Fatal(err)
	}

	// retention comes on with a reload; clients call while it deletes (not
	// through the reload itself, which may close an idle keep-alive
	// connection under a client's POST, as any Caddy reload can)
	o.gw.Reload(observedConfig(block("usage_retention 90d", "batch_size 100", "pause 50ms")).String(), o.vars)
	var served, failed atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	c := o.client(key)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := c.Chat.Completions.New(ctx, chatParams("gpt-4o-mini", "hi")); err != nil {
					failed.Add(1)
					t.Error(err)
					return
				}
				served.Add(1)
			}
		}()
	}
	var servedWhileDeleting int64
	eventually(t, fmt.Sprintf("retention to delete %d rows", old), func() bool {
		if o.gw.Metrics()["gateway_usage_retention_deleted_total"] >= old {
			return true
		}
		servedWhileDeleting = served.Load()
		time.Sleep(40 * time.Millisecond)
		return false
	})
	// a day dropped whole is gone before a client is answered: serve a few
	// after it too
	eventually(t, "requests served", func() bool { return served.Load() >= 5 })
	close(stop)
	wg.Wait()
	t.Logf("%d requests answered while retention was still deleting, %d in all", servedWhileDeleting, served.Load())
	if failed.Load() != 0 || served.Load() == 0 {
		t.Fatalf("%d requests served, %d failed during retention", served.Load(), failed.Load())
	}

	// SQLite keeps each day's rows in a table of its own, and drops the
	// old days whole: one count; PostgreSQL keeps a day that old in its
	// default partition (it makes partitions for the days around now), and
	// deletes its rows in batches
	m := o.gw.Metrics()
	batches := float64(old / 100)
	if o.gw.DSN == "" {
		batches = 1
	}
	if m["gateway_usage_retention_deleted_total"] != old || m["gateway_usage_retention_batches_total"] != batches {
		t.Fatalf("retention deleted %v rows in %v batches, want %d in %v",
			m["gateway_usage_retention_deleted_total"], m["gateway_usage_retention_batches_total"], old, batches)
	}
	rows := o.gw.WaitUsage("frank", kept+int(served.Load()))
	var older, seededKept, fresh int
	for _, r := range rows {
		switch age := now.Sub(r.CreatedAt); {
		case age > 90*24*time.Hour:
			older++
		case age > 24*time.Hour:
			seededKept++
		default:
			fresh++
		}
	}
	if older != 0 || seededKept != kept || fresh != int(served.Load()) {
		t.Fatalf("rows left: %d past the window, %d seeded within it, %d served; want 0, %d, %d", older, seededKept, fresh, kept, served.Load())
	}
	// spend history survives: the deleted rows' days are intact
	daysAfter, err := st.DailyUsageByModel(ctx, frank.ID, oldDay)
	if err != nil {
		t.Fatal(err)
	}
	var reqBefore, reqAfter, costBefore, costAfter int64
	for _, d := range daysBefore {
		reqBefore, costBefore = reqBefore+d.Requests, costBefore+d.Cost
	}
	for _, d := range daysAfter {
		if now.Sub(d.Day) > 24*time.Hour+time.Minute {
			reqAfter, costAfter = reqAfter+d.Requests, costAfter+d.Cost
		}
	}
	if reqBefore != old+kept || reqAfter != reqBefore || costAfter != costBefore {
		t.Fatalf("daily totals before retention %d requests %d units, after %d and %d; want %d requests kept",
			reqBefore, costBefore, reqAfter, costAfter, old+kept)
	}
}

// TestMetricsCountBadInputUnderItsModel: a request refused for bad input
// whose model is known is counted under that model with its status class,
// and still gets its usage row, costing nothing.
func TestMetricsCountBadInputUnderItsModel(t *testing.T) {
	o := startObserved(t, "")
	key := o.gw.AddUser("bea", 10_000_000)
	for _, body := range []string{
		`{"model":"gpt-4o-mini","messages":"not a list"}`,
		`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"temperature":"hot"}`,
	} {
		resp, b := o.gw.Do("POST", "/v1/chat/completions", key, []byte(body), nil)
		if resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("%s: %d %s, want 400", body, resp.StatusCode, b)
		}
	}
	rows := o.gw.WaitUsage("bea", 2)
	for _, r := range rows {
		if r.Model != "gpt-4o-mini" || r.Status != http.StatusBadRequest || r.Cost != 0 {
			t.Errorf("row %+v: want model gpt-4o-mini, status 400, cost 0", r)
		}
	}
	m := o.gw.Metrics()
	if got := m[requestsSeries("gpt-4o-mini", "", "4xx")]; got != 2 {
		t.Errorf("%s = %v, want 2", requestsSeries("gpt-4o-mini", "", "4xx"), got)
	}
	if got, ok := m[requestsSeries("_other", "", "4xx")]; ok && got != 0 {
		t.Errorf("bad input on a known model counted under _other: %v", got)
	}
}
