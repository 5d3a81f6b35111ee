package gatewaytest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-model-gateway/gateway/adapters"
	_ "github.com/caddy-model-gateway/gateway/adapters/bedrock"
)

// TestFakeBedrockChecksSignatures: the fake accepts what the bedrock
// adapter signs with the right credentials and refuses, as Bedrock does,
// a body changed after signing, a signed header changed, a wrong secret,
// a missing session token and a wrong API key.
func TestFakeBedrockChecksSignatures(t *testing.T) {
	creds := aws.Credentials{AccessKeyID: "ASIAFAKE0123456789", SecretAccessKey: "fakeSecret/abcdefghij0123456789", SessionToken: "FakeSessionToken0123"}
	f := NewFakeBedrock(t, "ap-south-1", creds, "ABSKfakeapikey0123")
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	mod, err := ctx.LoadModuleByID("gateway.adapters.bedrock", json.RawMessage(`{"region":"ap-south-1"}`))
	if err != nil {
		t.Fatal(err)
	}
	prov := mod.(adapters.ChatProvider)
	send := func(key string, change func(*http.Request)) (int, string) {
		t.Helper()
		text := "hi"
		req := &adapters.Request{Op: adapters.OpChat, Dialect: "openai", Chat: &adapters.ChatRequest{
			Messages: []adapters.Message{{Role: adapters.RoleUser, Parts: []adapters.Part{{Type: adapters.PartText, Text: text}}}}}}
		hr, err := prov.NewRequest(context.Background(), &adapters.Upstream{Channel: "c", BaseURL: f.URL, Key: key, Model: "amazon.nova-pro-v1:0"}, req)
		if err != nil {
			t.Fatal(err)
		}
		if change != nil {
			change(hr)
		}
		resp, err := http.DefaultClient.Do(hr)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("X-Amzn-Errortype") + " " + string(b)
	}
	pair := creds.AccessKeyID + ":" + creds.SecretAccessKey + ":" + creds.SessionToken
	if st, body := send(pair, nil); st != 200 {
		t.Fatalf("signed with the right credentials: %d %s", st, body)
	}
	if st, body := send("ABSKfakeapikey0123", nil); st != 200 {
		t.Fatalf("the right API key: %d %s", st, body)
	}
	for _, c := range []struct {
		name, key string
		change    func(*http.Request)
		want      string
	}{
		{"body changed", pair, func(hr *http.Request) {
			b := []byte(`{"messages":[{"role":"user","content":[{"text":"ho"}]}]}`)
			hr.Body, hr.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
		}, "InvalidSignatureException"},
		{"signed header changed", pair, func(hr *http.Request) { hr.Header.Set("Accept", "text/plain") }, "InvalidSignatureException"},
		{"wrong secret", creds.AccessKeyID + ":otherSecret0123456789:" + creds.SessionToken, nil, "InvalidSignatureException"},
		{"no session token", creds.AccessKeyID + ":" + creds.SecretAccessKey, nil, "UnrecognizedClientException"},
		{"wrong API key", "ABSKotherkey", nil, "UnrecognizedClientException"},
	} {
		if st, body := send(c.key, c.change); st != 403 || !strings.HasPrefix(body, c.want) {
			t.Errorf("%s: %d %s, want 403 %s", c.name, st, body, c.want)
		}
	}
}
