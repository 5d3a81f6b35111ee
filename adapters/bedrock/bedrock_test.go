package bedrock_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/adapters/bedrock"
)

func load(t testing.TB, options string) *bedrock.Adapter {
	t.Helper()
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	t.Cleanup(cancel)
	mod, err := ctx.LoadModuleByID("gateway.adapters.bedrock", json.RawMessage(options))
	if err != nil {
		t.Fatal(err)
	}
	return mod.(*bedrock.Adapter)
}

func chat(text string) *adapters.Request {
	return &adapters.Request{Op: adapters.OpChat, Dialect: "openai", Chat: &adapters.ChatRequest{
		Messages: []adapters.Message{{Role: adapters.RoleUser, Parts: []adapters.Part{{Type: adapters.PartText, Text: text}}}}}}
}

// TestSigV4: a key pair with a session token is signed for the channel's
// region and service, the token in X-Amz-Security-Token, the secret
// nowhere; a key without colons is a Bearer API key; a malformed pair is
// refused without echoing it.
func TestSigV4(t *testing.T) {
	a := load(t, `{"region":"eu-central-1"}`)
	if got := a.DefaultBaseURL(); got != "https://bedrock-runtime.eu-central-1.amazonaws.com" {
		t.Errorf("default base URL %s", got)
	}
	up := &adapters.Upstream{Channel: "c", BaseURL: a.DefaultBaseURL(), Key: "AKIDEXAMPLE:wJalrXUtnFEMI/K7MDENG:SESSIONTOKEN", Model: "us.anthropic.claude-3-5-sonnet-20241022-v2:0"}
	hr, err := a.NewRequest(context.Background(), up, chat("hi"))
	if err != nil {
		t.Fatal(err)
	}
	auth := hr.Header.Get("Authorization")
	if !strings.HasPrefix(auth, "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/") || !strings.Contains(auth, "/eu-central-1/bedrock/aws4_request") ||
		!strings.Contains(auth, "x-amz-security-token") || hr.Header.Get("X-Amz-Security-Token") != "SESSIONTOKEN" || hr.Header.Get("X-Amz-Date") == "" {
		t.Errorf("Authorization %q, headers %v", auth, hr.Header)
	}
	for name, v := range hr.Header {
		if strings.Contains(strings.Join(v, ","), "wJalrXUtnFEMI") {
			t.Errorf("the secret is in %s", name)
		}
	}
	if hr.URL.EscapedPath() != "/model/us.anthropic.claude-3-5-sonnet-20241022-v2%3A0/converse" {
		t.Errorf("path %s", hr.URL.EscapedPath())
	}
	up.Key = "ABSKapikey"
	if hr, _ = a.NewRequest(context.Background(), up, chat("hi")); hr.Header.Get("Authorization") != "Bearer ABSKapikey" || hr.Header.Get("X-Amz-Date") != "" {
		t.Errorf("API key: %v", hr.Header)
	}
	up.Key = ":secretonly"
	if _, err := a.NewRequest(context.Background(), up, chat("hi")); err == nil || strings.Contains(err.Error(), "secretonly") {
		t.Errorf("malformed key: %v", err)
	}
	if err := load(t, `{}`).Validate(); err != nil {
		t.Errorf("default region: %v", err)
	}
	bad := &bedrock.Adapter{Region: "eu-central-1.evil.example/"}
	if err := bad.Validate(); err == nil {
		t.Error("a region that is no region id was accepted")
	}
}

// TestModelFields: top_k and a thinking budget go to Claude models only,
// and are refused for others with the model named.
func TestModelFields(t *testing.T) {
	a := load(t, `{}`)
	k := int64(5)
	for _, c := range []struct {
		model string
		req   func(*adapters.ChatRequest)
		want  string // body fragment, or "error: " and the message's
	}{
		{"anthropic.claude-3-7-sonnet-20250219-v1:0", func(c *adapters.ChatRequest) { c.TopK = &k }, `"additionalModelRequestFields":{"top_k":5}`},
		{"us.anthropic.claude-sonnet-4-20250514-v1:0", func(c *adapters.ChatRequest) { c.Reasoning = &adapters.Reasoning{Effort: "low"} },
			`"thinking":{"budget_tokens":2048,"type":"enabled"}`},
		// other models answer without the hints (coding agents send both)
		{"amazon.nova-pro-v1:0", func(c *adapters.ChatRequest) { c.TopK = &k }, "no fields"},
		{"meta.llama3-70b-instruct-v1:0", func(c *adapters.ChatRequest) { c.Reasoning = &adapters.Reasoning{Effort: "high"} }, "no fields"},
	} {
		req := chat("hi")
		c.req(req.Chat)
		hr, err := a.NewRequest(context.Background(), &adapters.Upstream{Channel: "c", BaseURL: "https://b.invalid", Model: c.model}, req)
		if msg, ok := strings.CutPrefix(c.want, "error: "); ok {
			var e *adapters.Error
			if !errors.As(err, &e) || e.Status != 400 || !strings.Contains(e.Message, msg) {
				t.Errorf("%s: %v, want a 400 saying %q", c.model, err, msg)
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(hr.Body)
		if c.want == "no fields" {
			if bytes.Contains(body, []byte("additionalModelRequestFields")) {
				t.Errorf("%s: %s sends model fields", c.model, body)
			}
			continue
		}
		if !bytes.Contains(body, []byte(c.want)) {
			t.Errorf("%s: %s lacks %s", c.model, body, c.want)
		}
	}
}

// TestFrameBounds: a frame longer than the channel's max_stream_event is
// refused from its prelude, before it is read; a frame with a bad CRC or
// a lying length is an error, not an event; the body's end between frames
// is io.EOF and inside one a cut-off.
func TestFrameBounds(t *testing.T) {
	a := load(t, `{}`)
	prelude := func(total, headers uint32) []byte {
		b := make([]byte, 12)
		binary.BigEndian.PutUint32(b[0:], total)
		binary.BigEndian.PutUint32(b[4:], headers)
		return b
	}
	// 1 GiB announced, 12 bytes sent: refused without waiting for the rest
	r := a.NewEventReader(bytes.NewReader(prelude(1<<30, 0)))
	r.SetMaxEvent(1 << 20)
	if _, err := r.Next(); !errors.Is(err, adapters.ErrEventTooLarge) {
		t.Errorf("oversized frame: %v", err)
	}
	r.Release()
	// unbounded by the host, still bounded by the framing's own limit
	r = a.NewEventReader(bytes.NewReader(prelude(64<<20, 0)))
	if _, err := r.Next(); !errors.Is(err, adapters.ErrEventTooLarge) {
		t.Errorf("frame past event-stream's limit: %v", err)
	}
	for name, body := range map[string][]byte{
		"bad crc":         append(prelude(16, 0), 0, 0, 0, 0),
		"headers too big": append(prelude(16, 100), make([]byte, 4)...),
	} {
		r := a.NewEventReader(bytes.NewReader(body))
		if ev, err := r.Next(); err == nil || errors.Is(err, io.EOF) {
			t.Errorf("%s: %v %v", name, ev, err)
		}
	}
	if _, err := a.NewEventReader(bytes.NewReader(nil)).Next(); err != io.EOF {
		t.Errorf("empty body: %v", err)
	}
	if _, err := a.NewEventReader(bytes.NewReader(prelude(100, 0)[:7])).Next(); err != io.ErrUnexpectedEOF {
		t.Errorf("cut prelude: %v", err)
	}
	if _, err := a.NewEventReader(bytes.NewReader(prelude(100, 0))).Next(); err != io.ErrUnexpectedEOF {
		t.Errorf("cut frame: %v", err)
	}
}

// TestErrorsRetried: Bedrock's statuses classify as the engine reads them.
func TestErrorsRetried(t *testing.T) {
	a := load(t, `{}`)
	if e := a.DecodeError(http.StatusForbidden, []byte(`{"message":"denied"}`)); e.Fault != adapters.FaultChannel {
		t.Errorf("403 is the channel's fault: %+v", e)
	}
	if e := a.DecodeError(424, []byte(`{"message":"model failed"}`)); e.Status != http.StatusBadGateway {
		t.Errorf("424 ModelErrorException: %+v", e)
	}
}
