package integration

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"golang.org/x/crypto/bcrypt"

	"github.com/caddy-model-gateway/gateway/account"
	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
)

// TestExampleRunsWithoutKeys is `make run` on a fresh machine: the example
// Caddyfile starts with no vendor keys, skips those channels with a warning
// each, and the demo model answers a key made with the CLI.
func TestExampleRunsWithoutKeys(t *testing.T) {
	example, err := os.ReadFile(filepath.Join("..", "Caddyfile.example"))
	if err != nil {
		t.Fatal(err)
	}
	port := gatewaytest.FreePort(t)
	dir := t.TempDir()
	t.Setenv("GATEWAY_ADDR", fmt.Sprintf(":%d", port)) // a bare port: plain HTTP
	t.Setenv("GATEWAY_ADMIN", fmt.Sprintf("127.0.0.1:%d", gatewaytest.FreePort(t)))
	t.Setenv("GATEWAY_DB", filepath.Join(dir, "gateway.db"))
	for _, v := range []string{"OPENAI", "ANTHROPIC", "GEMINI", "COHERE", "JINA", "KLING", "VIDU", "SEEDANCE", "MINIMAX", "DEEPSEEK", "ZHIPU"} {
		t.Setenv(v+"_API_KEY", "")
	}
	t.Setenv("VERTEX_CREDENTIALS_FILE", "")
	// Bedrock's key joins three variables: empty, they make no key
	for _, v := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"} {
		t.Setenv(v, "")
	}
	// as a user runs it: passwords at bcrypt's default cost, not the
	// test harness's lowest
	t.Setenv(account.PasswordCostEnv, "")
	gw := gatewaytest.Start(t, string(example), gatewaytest.Vars{"PORT": fmt.Sprint(port)})
	gw.DBPath = os.Getenv("GATEWAY_DB")

	logs := gw.Logs()
	for _, ch := range []string{"openai", "anthropic", "gemini", "kling", "vidu", "seedance", "minimax", "bedrock", "vertex", "vertex-claude", "deepseek", "zhipu"} {
		if !strings.Contains(logs, `"channel":"`+ch+`"`) || !strings.Contains(logs, "channel skipped") {
			t.Fatalf("no warning for the keyless %s channel:\n%s", ch, logs)
		}
	}
	// the password is printed apart from the structured log, never in it
	if !strings.Contains(logs, "Username: root  Password: ") || strings.Contains(logs, `"password"`) {
		t.Fatalf("the root password must be printed once on stderr, outside the JSON log:\n%s", logs)
	}

	gw.CLI("user", "add", "--username", "me", "--password", "change-me-now", "--quota", "5000000")
	for _, name := range []string{"root", "me"} {
		if cost, err := bcrypt.Cost([]byte(gw.User(name).PasswordHash)); err != nil || cost != bcrypt.DefaultCost {
			t.Errorf("%s's password hash: cost %d, %v; want bcrypt's default %d", name, cost, err, bcrypt.DefaultCost)
		}
	}
	if strings.Contains(logs, account.PasswordCostEnv) {
		t.Errorf("a gateway at the default cost warns of a low one:\n%s", logs)
	}
	key := strings.TrimSpace(gw.CLI("token", "add", "--username", "me"))
	gatewaytest.Secret(key)
	if !strings.HasPrefix(key, "sk-") || strings.Contains(key, "\n") {
		t.Fatalf("token add printed %q, want the key alone", key)
	}
	resp, body := gw.Do(http.MethodPost, "/v1/chat/completions", key, []byte(`{"model":"demo","messages":[{"role":"user","content":"Hello, gateway!"}]}`), nil)
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"content":"Hello, gateway!"`) {
		t.Fatalf("demo answered %d %s", resp.StatusCode, body)
	}

	client := openai.NewClient(option.WithBaseURL(gw.URL+"/v1/"), option.WithAPIKey(key))
	p := openai.ChatCompletionNewParams{Model: "demo", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("stream these four words")},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}}
	stream := client.Chat.Completions.NewStreaming(context.Background(), p)
	acc := openai.ChatCompletionAccumulator{}
	deltas := 0
	for stream.Next() {
		c := stream.Current()
		acc.AddChunk(c)
		if len(c.Choices) > 0 && c.Choices[0].Delta.Content != "" {
			deltas++
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if acc.Choices[0].Message.Content != "stream these four words" || deltas != 4 {
		t.Fatalf("demo streamed %q in %d deltas", acc.Choices[0].Message.Content, deltas)
	}
	// real token counts: "stream these four words" is 4 tokens
	if acc.Usage.CompletionTokens != 4 || acc.Usage.PromptTokens == 0 {
		t.Fatalf("demo usage = %+v", acc.Usage)
	}
	rows := gw.WaitUsage("me", 2)
	if rows[1].Cost != 0 || rows[1].Channel != "demo" {
		t.Fatalf("demo row = %+v, want free", rows[1])
	}
}

// TestExampleKeysStayOutOfConfig: the example reads every vendor key as an
// {env.X} placeholder, replaced when the config loads, so neither `caddy
// adapt` nor the running gateway's admin API (and so autosave) holds a key.
// Every secret the example reads gets a distinct value; none may show.
func TestExampleKeysStayOutOfConfig(t *testing.T) {
	path := filepath.Join("..", "Caddyfile.example")
	example, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// every environment variable the example reads that holds a secret,
	// whichever placeholder form it uses; commented lines (options shown
	// off, such as alerts' secret) are not read
	active := regexp.MustCompile(`(?m)^\s*#.*$`).ReplaceAllString(string(example), "")
	names := map[string]bool{}
	for _, m := range regexp.MustCompile(`\{(?:env\.|\$)([A-Z0-9_]+)`).FindAllStringSubmatch(active, -1) {
		if regexp.MustCompile(`_API_KEY$|SECRET|TOKEN|PASSWORD`).MatchString(m[1]) {
			names[m[1]] = true
		}
	}
	if len(names) < 10 {
		t.Fatalf("found only %d secrets in the example: %v", len(names), names)
	}
	// two halves, so a key split at its colon (Kling's access:secret
	// pair) is still found
	var halves []string
	env := []string{}
	for name := range names {
		a, b := rand.Text(), rand.Text()
		value := a + ":" + b
		gatewaytest.Secret(value)
		halves = append(halves, a, b)
		env = append(env, name+"="+value)
	}
	// Vertex's key is a service account file (the fake's, never called)
	sa, _ := gatewaytest.NewFakeVertex(t, "example-project", "global").ServiceAccount(t, t.TempDir(), "example")
	env = append(env, "VERTEX_CREDENTIALS_FILE="+sa)
	// no channel may reach a real vendor
	for _, m := range regexp.MustCompile(`\{\$([A-Z0-9_]+_BASE_URL)`).FindAllStringSubmatch(string(example), -1) {
		env = append(env, m[1]+"=http://127.0.0.1:9")
	}
	leaked := func(where, text string) {
		t.Helper()
		for _, h := range halves {
			if strings.Contains(text, h) {
				t.Fatalf("%s holds a key (…%s…):\n%s", where, h, text)
			}
		}
	}

	cmd := exec.Command(gatewaytest.Binary(t), "adapt", "--config", path, "--adapter", "caddyfile")
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("caddy adapt: %v\n%s", err, out)
	}
	leaked("the adapted config", string(out))
	for name := range names {
		if !strings.Contains(string(out), "{env."+name+"}") {
			t.Fatalf("the adapted config lost the placeholder of %s:\n%s", name, out)
		}
	}

	// the running gateway, with every channel on: its admin API's config
	port := gatewaytest.FreePort(t)
	admin := fmt.Sprintf("127.0.0.1:%d", gatewaytest.FreePort(t))
	for _, e := range env {
		k, v, _ := strings.Cut(e, "=")
		t.Setenv(k, v)
	}
	t.Setenv("GATEWAY_ADDR", fmt.Sprintf(":%d", port))
	t.Setenv("GATEWAY_ADMIN", admin)
	t.Setenv("GATEWAY_DB", filepath.Join(t.TempDir(), "gateway.db"))
	gw := gatewaytest.Start(t, string(example), gatewaytest.Vars{"PORT": fmt.Sprint(port)})
	if strings.Contains(gw.Logs(), "channel skipped") {
		t.Fatalf("a channel was skipped although every key is set:\n%s", gw.Logs())
	}
	resp, err := http.Get("http://" + admin + "/config/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	_, _ = io.Copy(&b, resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(b.String(), `"gateway"`) {
		t.Fatalf("GET /config/ answered %d %s", resp.StatusCode, b.String())
	}
	leaked("the admin API's /config/", b.String())
}

// TestExampleServerTimeouts: the example bounds how long a client may take
// to send its headers and how long a kept-alive connection may sit idle,
// sets a minimum body rate that cuts a stalled body but not a slow
// phone's 25 MiB upload, and sets no read or write timeout that would cut
// an upload or a long stream.
func TestExampleServerTimeouts(t *testing.T) {
	cmd := exec.Command(gatewaytest.Binary(t), "adapt", "--config", filepath.Join("..", "Caddyfile.example"), "--adapter", "caddyfile")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("caddy adapt: %v", err)
	}
	var cfg struct {
		Apps struct {
			HTTP struct {
				Servers map[string]map[string]any `json:"servers"`
			} `json:"http"`
		} `json:"apps"`
	}
	if err := json.Unmarshal(out, &cfg); err != nil {
		t.Fatal(err)
	}
	if len(cfg.Apps.HTTP.Servers) == 0 {
		t.Fatalf("no server in the adapted example:\n%s", out)
	}
	for name, srv := range cfg.Apps.HTTP.Servers {
		for field, most := range map[string]time.Duration{"read_header_timeout": 30 * time.Second, "idle_timeout": 5 * time.Minute} {
			d, ok := srv[field].(float64) // nanoseconds
			if !ok || d <= 0 || time.Duration(d) > most {
				t.Errorf("server %s: %s = %v, want set, at most %v", name, field, srv[field], most)
			}
		}
		for _, field := range []string{"read_timeout", "write_timeout"} {
			if v, ok := srv[field]; ok {
				t.Errorf("server %s: %s = %v would cut long uploads and streams", name, field, v)
			}
		}
		// a minimum body rate: a body has the grace plus a second per
		// rate bytes sent. A stalled body is cut within a minute, and a
		// slow phone (256 kbit/s) still sends a 25 MiB upload: the rate's
		// deadline for it is later than the phone's finish at every byte
		grace, _ := srv["read_idle_timeout"].(float64)
		rate, _ := srv["read_min_rate"].(float64)
		const upload, phone = 25 << 20, 256_000 / 8 // bytes, bytes a second
		if grace <= 0 || time.Duration(grace) > time.Minute || rate <= 0 || rate >= phone {
			t.Errorf("server %s: read_body_idle %v %v, want a grace of at most a minute and a minimum rate under a slow phone's %d bytes/s",
				name, time.Duration(grace), rate, phone)
		} else if finish, allowed := float64(upload)/phone, time.Duration(grace).Seconds()+float64(upload)/rate; finish >= allowed {
			t.Errorf("server %s: a 25 MiB upload at 256 kbit/s takes %.0fs, the minimum rate allows %.0fs", name, finish, allowed)
		}
	}
}

// TestExampleKlingMakesVideoFromText: the contract's own task request, a
// model and a prompt, sent to Kling with the example as it is: it offers
// kling-v2-1-master, which makes video from text, priced, and the submit
// reaches Kling's text-to-video endpoint with that model.
func TestExampleKlingMakesVideoFromText(t *testing.T) {
	example, err := os.ReadFile(filepath.Join("..", "Caddyfile.example"))
	if err != nil {
		t.Fatal(err)
	}
	kling := gatewaytest.NewFakeKling(t, "ak-example-kling-01", "sk-example-kling-secret-01")
	port := gatewaytest.FreePort(t)
	dir := t.TempDir()
	t.Setenv("GATEWAY_ADDR", fmt.Sprintf(":%d", port))
	t.Setenv("GATEWAY_ADMIN", fmt.Sprintf("127.0.0.1:%d", gatewaytest.FreePort(t)))
	t.Setenv("GATEWAY_DB", filepath.Join(dir, "gateway.db"))
	for _, v := range []string{"OPENAI", "ANTHROPIC", "GEMINI", "COHERE", "JINA", "VIDU", "SEEDANCE", "MINIMAX"} {
		t.Setenv(v+"_API_KEY", "")
	}
	t.Setenv("KLING_BASE_URL", kling.BaseURL())
	t.Setenv("KLING_API_KEY", kling.Access+":"+kling.Secret)
	gw := gatewaytest.Start(t, string(example), gatewaytest.Vars{"PORT": fmt.Sprint(port)})
	gw.DBPath = os.Getenv("GATEWAY_DB")

	const balance = 5_000_000
	key := gw.AddUser("kai", balance)
	sub := submitTask(t, gw, key, `{"model":"kling-v2-1-master","prompt":"a fox runs through fresh snow","duration":5}`)
	job := kling.Last(t)
	if job.Path != "/v1/videos/text2video" || submitted(t, job, "model_name") != `"kling-v2-1-master"` {
		t.Fatalf("Kling got %s with model_name %s, want text2video with kling-v2-1-master", job.Path, submitted(t, job, "model_name"))
	}
	// $0.28 a second, 5 seconds, reserved at submit
	if q, _ := gw.Quota("kai"); q != balance-1_400_000 {
		t.Fatalf("quota after submit %d, want %d", q, balance-1_400_000)
	}
	if st := waitTask(t, gw, key, sub.Data.TaskID, "not_started"); st.Data.Model != "kling-v2-1-master" {
		t.Fatalf("task: %+v", st.Data)
	}
}
