package integration

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3/option"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
)

// TestReloadKeepsInFlightStreams reloads with a changed channel table while
// a stream is running: the stream finishes on the old channel, new requests
// use the new table, and both are billed.
func TestReloadKeepsInFlightStreams(t *testing.T) {
	s := startOpenAI(t)
	key := s.gw.AddUser("rita", 1_000_000)
	reply := "slow words arriving one by one across a reload"
	s.primary.Set(func(b *gatewaytest.Behavior) { b.Reply = reply; b.ChunkDelay = 100 * time.Millisecond })

	stream := s.client(key).Chat.Completions.NewStreaming(context.Background(), chatParams("gpt-4o-mini", "go"))
	if !stream.Next() {
		t.Fatalf("no first chunk: %v", stream.Err())
	}
	// drop the primary channel: only the backup serves gpt-4o-mini now
	without := openaiConfig().channel("primary", "openai", "{{UP1}}", "{env.GATEWAY_TEST_UPSTREAM_KEY}",
		"text-embedding-3-small gpt-3.5-turbo-instruct unpriced-model", "model_map mini-alias gpt-4o-mini", "priority 10")
	s.gw.Reload(without.String(), gatewaytest.Vars{"UP1": s.primary.URL, "UP2": s.backup.URL})

	var text strings.Builder
	for stream.Next() {
		if c := stream.Current(); len(c.Choices) > 0 {
			text.WriteString(c.Choices[0].Delta.Content)
		}
	}
	if err := stream.Err(); err != nil || text.String() != reply {
		t.Fatalf("stream across the reload: %q, %v", text.String(), err)
	}
	resp, err := s.client(key, option.WithMaxRetries(0)).Chat.Completions.New(context.Background(), chatParams("gpt-4o-mini", "hi"))
	if err != nil || resp.Choices[0].Message.Content != "Hello from the backup" {
		t.Fatalf("after reload: %v %v", resp, err)
	}
	// the reload shared the open database instead of opening it again
	if n := strings.Count(s.gw.Logs(), `"msg":"database opened"`); n != 1 {
		t.Fatalf("the database was opened %d times across a reload, want once", n)
	}
	rows := s.gw.WaitUsage("rita", 2)
	if rows[0].Channel != "primary" || rows[0].Cost != 14 || rows[1].Channel != "backup" {
		t.Fatalf("rows = %+v", rows)
	}
}

// TestShutdownWritesEveryRow stops the gateway right after a burst of
// requests: every request still gets its usage row and its charge.
func TestShutdownWritesEveryRow(t *testing.T) {
	s := startOpenAI(t)
	key := s.gw.AddUser("sam", 10_000_000)
	client := s.client(key, option.WithMaxRetries(0))
	const n = 200
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := client.Chat.Completions.New(context.Background(), chatParams("gpt-4o-mini", "hi")); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	s.gw.Stop()
	ctx := context.Background()
	st := s.gw.Store()
	rows, err := st.CountUsage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var cost int64
	for _, r := range s.gw.WaitUsage("sam", n) {
		cost += r.Cost
	}
	u := s.gw.User("sam")
	used, count := u.UsedQuota, u.RequestCount
	if rows != n || cost != n*14 || used != n*14 || count != n {
		t.Fatalf("after shutdown: %d rows costing %d, used %d over %d requests; want %d rows, %d", rows, cost, used, count, n, n*14)
	}
}

// TestReloadRotatesAKeyFromAFile: a vendor key written as {file.PATH} is
// read again at every reload, so writing the new key to the file and
// running caddy reload --force (the Caddyfile is unchanged) rotates it,
// with no restart.
func TestReloadRotatesAKeyFromAFile(t *testing.T) {
	up := gatewaytest.NewFakeOpenAI(t, "sk-new-upstream-key")
	keyFile := filepath.Join(t.TempDir(), "openai.key")
	if err := os.WriteFile(keyFile, []byte("sk-old-upstream-key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	gatewaytest.Secret("sk-old-upstream-key")
	cfg := billingConfig("").channel("up", "openai", "{{UP}}", "{file."+keyFile+"}", "gpt-4o-mini free-model")
	vars := gatewaytest.Vars{"UP": up.URL, "DSN": "{{DB}}"}
	gw := gatewaytest.Start(t, cfg.String(), vars)
	key := gw.AddUser("rotating", 10_000_000)
	if r := chat(t, gw, key, "free-model", false); r.status == http.StatusOK {
		t.Fatalf("the upstream took the old key: %d %s", r.status, r.body)
	}
	if err := os.WriteFile(keyFile, []byte("sk-new-upstream-key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// the Caddyfile is unchanged: without --force, Caddy skips the reload
	if out, err := gw.TryReloadWith(cfg.String(), vars, "--force"); err != nil {
		t.Fatalf("caddy reload --force: %v\n%s", err, out)
	}
	if r := chat(t, gw, key, "free-model", false); r.status != http.StatusOK {
		t.Fatalf("after writing the new key and reloading: %d %s", r.status, r.body)
	}
}

// TestReloadNamesTheVariablesItMisses: caddy reload reads {$X} from its
// own environment, so a plain reload without the variable the gateway was
// started with gives the setting's default: it warns, naming the
// variable and the setting. And a secret written {env.X} is read from
// the gateway's own environment at a reload too: unset there, the reload
// is refused naming the variable.
func TestReloadNamesTheVariablesItMisses(t *testing.T) {
	up := gatewaytest.NewFakeOpenAI(t, "sk-up")
	vars := gatewaytest.Vars{"UP": up.URL, "DSN": "{{DB}}"}
	gw := gatewaytest.Start(t, billingConfig("registration on").String(), vars)
	out, err := gw.TryReload(billingConfig("registration {$GATEWAY_TEST_UNSET_REGISTRATION:off}").String(), vars)
	if err != nil || !strings.Contains(out, "GATEWAY_TEST_UNSET_REGISTRATION (line ") || !strings.Contains(out, `registration: its default \"off\"`) {
		t.Fatalf("a reload without the variable of registration: %v\n%s", err, out)
	}
	sso := block("sso oidc", "issuer https://127.0.0.1:9", "client_id gateway", "client_secret {env.GATEWAY_TEST_UNSET_SECRET}", "allowed_domains example.com")
	acc := gatewaytest.Start(t, accountConfig("on", 1000, 1000).String(), nil)
	out, err = acc.TryReload(accountConfig("on", 1000, 1000).option(sso).String(), nil)
	if err == nil || !strings.Contains(out, "GATEWAY_TEST_UNSET_SECRET is not set in the gateway's environment") {
		t.Fatalf("a reload with client_secret from an unset {env.X}: %v\n%s", err, out)
	}
}

// TestReloadRefusesAChannelsBadBaseURL: a Caddyfile channel's base_url
// read from a variable unset in the gateway's environment is refused
// naming the variable, and one that is not http(s) is refused saying so;
// the gateway serves on with the configuration it had.
func TestReloadRefusesAChannelsBadBaseURL(t *testing.T) {
	up := gatewaytest.NewFakeOpenAI(t, "sk-up")
	gw := gatewaytest.Start(t, billingConfig("").String(), gatewaytest.Vars{"UP": up.URL, "DSN": "{{DB}}"})
	for base, want := range map[string]string{
		"{env.GATEWAY_TEST_UNSET_BASE}": "GATEWAY_TEST_UNSET_BASE is not set in the gateway's environment",
		"ftp://upstream.example":        "must start with http:// or https://",
	} {
		out, err := gw.TryReload(billingConfig("").String(), gatewaytest.Vars{"UP": base, "DSN": "{{DB}}"})
		if err == nil || !strings.Contains(out, want) {
			t.Errorf("a reload with base_url %s: %v\n%s", base, err, out)
		}
	}
	key := gw.AddUser("ada", 10_000_000)
	if r := chat(t, gw, key, "free-model", false); r.status != http.StatusOK {
		t.Fatalf("after the refused reloads: %d %s", r.status, r.body)
	}
}
