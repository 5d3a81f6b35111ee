package integration

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/realtime"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
)

// Browsers get short-lived client secrets the gateway mints, in OpenAI's
// ephemeral-key shape, so that a page never holds a key: a secret opens
// Realtime sessions as the key that minted it (billed to it), and nothing
// else: not another endpoint, not the account API, not another secret.
// It dies at its expiry and never reaches the logs.
func TestRealtimeClientSecrets(t *testing.T) {
	s := &realtimeSetup{fake: gatewaytest.NewFakeOpenAI(t, "sk-rt-upstream")}
	s.fake.Set(func(b *gatewaytest.Behavior) { b.Reply = "Hello from the realtime fake" })
	s.fake.SetRealtimeUsage(realtimeTurn)
	claude := gatewaytest.NewFakeAnthropic(t, "claude-rt-upstream")
	s.vars = gatewaytest.Vars{"OPENAI": s.fake.BaseURL(), "CLAUDE": claude.BaseURL()}
	// secrets live at most a minute here (a reload to a second shows one
	// expire)
	s.cfg = realtimeConfig("h1 h2").option("client_secret_max_ttl 1m").withSite(logToStderr, relayRoute)
	s.gw = gatewaytest.Start(t, s.cfg.String(), s.vars)
	key := s.gw.AddUser("erin", 10_000_000)

	ctx := context.Background()
	client := openai.NewClient(option.WithBaseURL(s.gw.URL+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
	before := time.Now()
	minted, err := client.Realtime.ClientSecrets.New(ctx, realtime.ClientSecretNewParams{
		ExpiresAfter: realtime.ClientSecretNewParamsExpiresAfter{Anchor: "created_at", Seconds: openai.Int(600)},
		Session: realtime.ClientSecretNewParamsSessionUnion{OfRealtime: &realtime.RealtimeSessionCreateRequestParam{
			Model: realtime.RealtimeSessionCreateRequestModel(realtimeModel), Instructions: openai.String("Be brief.")}},
	})
	if err != nil {
		t.Fatalf("mint: %v", err)
	}
	secret := minted.Value
	if !strings.HasPrefix(secret, "ek_") || strings.Contains(secret, key) || strings.Contains(secret, "sk-rt-upstream") {
		t.Fatalf("secret %q", secret)
	}
	// asked 600 s, held to the configured minute
	if exp := time.Unix(minted.ExpiresAt, 0); exp.Before(before.Add(59*time.Second)) || exp.After(time.Now().Add(61*time.Second)) {
		t.Errorf("expires_at %v, minted at %v", exp, before)
	}
	if minted.Session.Type != "realtime" || string(minted.Session.Model) != realtimeModel || minted.Session.Instructions != "Be brief." {
		t.Errorf("session %s", minted.Session.RawJSON())
	}

	// the secret opens a session, as a Bearer token and as the browser's
	// subprotocol; the model comes from the secret
	dialSecret := func(opts *websocket.DialOptions, model string) (*websocket.Conn, *http.Response, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		u := "ws" + strings.TrimPrefix(s.gw.URL, "http") + "/v1/realtime"
		if model != "" {
			u += "?model=" + model
		}
		return websocket.Dial(ctx, u, opts)
	}
	// configured as the secret's session says
	configured := func(c *websocket.Conn) {
		t.Helper()
		readEvent(t, c) // session.created
		if ev := readEvent(t, c); ev.Type != "session.updated" || !strings.Contains(string(ev.Raw), "Be brief.") {
			t.Fatalf("got %s, want the secret's session applied", ev.Raw)
		}
	}
	c, _, err := dialSecret(&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + secret}}}, "")
	if err != nil {
		t.Fatalf("dial with the secret: %v", err)
	}
	configured(c)
	exchangeTurn(t, c, false)
	c.Close(websocket.StatusNormalClosure, "")
	c, _, err = dialSecret(&websocket.DialOptions{Subprotocols: []string{"realtime", "openai-insecure-api-key." + secret}}, realtimeModel)
	if err != nil {
		t.Fatalf("dial with the secret as a subprotocol: %v", err)
	}
	configured(c)
	exchangeTurn(t, c, false)
	c.Close(websocket.StatusNormalClosure, "")
	// billed to the key that minted it
	rows := s.gw.WaitUsage("erin", 2)
	for _, r := range rows {
		if r.Cost != realtimeTurnCost || r.Endpoint != "/v1/realtime" || r.TokenID != rows[0].TokenID {
			t.Errorf("row %+v", r)
		}
	}
	// the same key's own session bills the same token
	c = s.dialModel(t, key, realtimeModel)
	readEvent(t, c)
	exchangeTurn(t, c, false)
	c.Close(websocket.StatusNormalClosure, "")
	if rows := s.gw.WaitUsage("erin", 3); rows[2].TokenID != rows[0].TokenID {
		t.Errorf("the secret's rows went to token %d, its key's to %d", rows[0].TokenID, rows[2].TokenID)
	}

	// a secret minted for a model opens no other
	if _, resp, err := dialSecret(&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + secret}}}, "gpt-realtime-untranscribed"); err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
		t.Errorf("another model with the secret: %v %v", resp, err)
	}

	// nothing else takes it: another endpoint, the account API, minting
	withSecret := openai.NewClient(option.WithBaseURL(s.gw.URL+"/v1/"), option.WithAPIKey(secret), option.WithMaxRetries(0))
	_, err = withSecret.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: realtimeModel,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	var apiErr *openai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusUnauthorized || !strings.Contains(apiErr.Message, "opens GET /v1/realtime only") {
		t.Errorf("chat completions with the secret: %v", err)
	}
	if _, err := withSecret.Realtime.ClientSecrets.New(ctx, realtime.ClientSecretNewParams{}); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusUnauthorized {
		t.Errorf("a secret minting a secret: %v", err)
	}
	for _, call := range []struct{ method, path string }{{http.MethodGet, "/api/user/self"}, {http.MethodGet, "/api/token/"}, {http.MethodPost, "/api/user/topup"}} {
		resp, body := s.gw.Do(call.method, call.path, secret, []byte(`{"key":"x"}`), nil)
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s %s with the secret: %d %s", call.method, call.path, resp.StatusCode, body)
		}
	}
	// an unknown secret is refused before the upgrade
	if _, resp, err := dialSecret(&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer ek_not-a-secret"}}}, realtimeModel); err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("an unknown secret: %v %v", resp, err)
	}

	// minting counts toward the key's rpm
	capped := s.gw.AddUser("rpm", 10_000_000)
	s.gw.CLI("user", "set", "--username", "rpm", "--rpm", "1")
	cappedClient := openai.NewClient(option.WithBaseURL(s.gw.URL+"/v1/"), option.WithAPIKey(capped), option.WithMaxRetries(0))
	if _, err := cappedClient.Realtime.ClientSecrets.New(ctx, realtime.ClientSecretNewParams{}); err != nil {
		t.Fatalf("mint within 1 rpm: %v", err)
	}
	if _, err := cappedClient.Realtime.ClientSecrets.New(ctx, realtime.ClientSecretNewParams{}); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusTooManyRequests {
		t.Errorf("a second mint within the minute at 1 rpm: %v", err)
	}
	// a secret whose session turns on transcription the model has no
	// price for opens nothing: the socket is refused
	untranscribed, err := client.Realtime.ClientSecrets.New(ctx, realtime.ClientSecretNewParams{
		Session: realtime.ClientSecretNewParamsSessionUnion{OfRealtime: &realtime.RealtimeSessionCreateRequestParam{
			Model: "gpt-realtime-untranscribed",
			Audio: realtime.RealtimeAudioConfigParam{Input: realtime.RealtimeAudioConfigInputParam{
				Transcription: realtime.AudioTranscriptionParam{Model: "whisper-1"}}}}},
	})
	if err != nil {
		t.Fatalf("mint: %v", err)
	}
	if _, resp, err := dialSecret(&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + untranscribed.Value}}}, ""); err == nil || resp == nil || resp.StatusCode != http.StatusBadRequest {
		t.Errorf("a secret turning on unpriced transcription: %v %v", resp, err)
	}

	// a secret dies at its expiry: with secrets held to a second, one
	// opens nothing after its end (one try: each refusal counts toward
	// the address's failed authentications)
	s.gw.Reload(s.cfg.option("client_secret_max_ttl 1s").String(), s.vars)
	short, err := client.Realtime.ClientSecrets.New(ctx, realtime.ClientSecretNewParams{})
	if err != nil {
		t.Fatalf("mint: %v", err)
	}
	mintedBy := time.Now()
	if exp := time.Unix(short.ExpiresAt, 0); exp.After(mintedBy.Add(2 * time.Second)) {
		t.Errorf("a secret held to 1s expires at %v, minted by %v", exp, mintedBy)
	}
	time.Sleep(time.Until(mintedBy.Add(1100 * time.Millisecond)))
	if _, resp, err := dialSecret(&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + short.Value}}}, realtimeModel); err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("an expired secret: %v %v", resp, err)
	}
	// the first, a minute long, still opens a session
	if c, _, err := dialSecret(&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + secret}}}, realtimeModel); err != nil {
		t.Errorf("a live secret after the reload: %v", err)
	} else {
		c.Close(websocket.StatusNormalClosure, "")
	}
	if _, err := client.Realtime.ClientSecrets.New(ctx, realtime.ClientSecretNewParams{
		ExpiresAfter: realtime.ClientSecretNewParamsExpiresAfter{Anchor: "created_at", Seconds: openai.Int(99999)}}); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest {
		t.Errorf("a lifetime out of bounds: %v", err)
	}

	// the access log has the requests that carried them, not the secrets
	waitLog(t, s.gw.Logs, `"uri":"/v1/realtime?model=`+realtimeModel)
	waitLog(t, s.gw.Logs, `"uri":"/v1/realtime/client_secrets"`)
	logs := s.gw.Logs()
	for _, sec := range []string{secret, short.Value, untranscribed.Value} {
		if strings.Contains(logs, sec) || strings.Contains(logs, strings.TrimPrefix(sec, "ek_")) {
			t.Errorf("a client secret reached the logs")
		}
	}
}

// Several instances on one PostgreSQL: a secret minted on one opens a
// session on another, billed to its key, and disabling the key on one
// refuses its secret on every other at once (a secret's key is read with
// it, not cached).
func TestInstancesShareClientSecrets(t *testing.T) {
	fake := gatewaytest.NewFakeOpenAI(t, "sk-rt-upstream")
	fake.Set(func(b *gatewaytest.Behavior) { b.Reply = "Hello from the realtime fake" })
	fake.SetRealtimeUsage(realtimeTurn)
	claude := gatewaytest.NewFakeAnthropic(t, "claude-rt-upstream")
	gws := gatewaytest.StartInstances(t, 2, realtimeConfig("h1 h2").String(), gatewaytest.Vars{"OPENAI": fake.BaseURL(), "CLAUDE": claude.BaseURL()})
	key := gws[0].AddUser("ines", 10_000_000)
	ctx := context.Background()
	client := openai.NewClient(option.WithBaseURL(gws[0].URL+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
	minted, err := client.Realtime.ClientSecrets.New(ctx, realtime.ClientSecretNewParams{})
	if err != nil {
		t.Fatalf("mint: %v", err)
	}
	s := &realtimeSetup{gw: gws[1], fake: fake}
	c := s.dialModel(t, minted.Value, realtimeModel)
	readEvent(t, c)
	exchangeTurn(t, c, false)
	c.Close(websocket.StatusNormalClosure, "")
	if rows := gws[1].WaitUsage("ines", 1); rows[0].Cost != realtimeTurnCost {
		t.Errorf("row %+v", rows[0])
	}
	ines, _ := gws[0].Store().UserByName(ctx, "ines")
	tokens, err := gws[0].Store().ListTokens(ctx, ines.ID)
	if err != nil || len(tokens) != 1 {
		t.Fatalf("tokens %v %v", tokens, err)
	}
	gws[0].CLI("token", "disable", "--id", fmt.Sprint(tokens[0].ID))
	if _, resp, err := s.dial(t, minted.Value, nil); err == nil || resp == nil || (resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden) {
		t.Errorf("the secret of a disabled key: %v %v", resp, err)
	}
}
