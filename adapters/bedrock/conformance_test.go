package bedrock_test

import (
	"bufio"
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"

	"github.com/caddy-model-gateway/gateway/adapters/adaptertest"
)

// TestConformance checks the Converse wire against every dialect: the
// bodies each dialect's requests become, Converse answers and
// ConverseStream streams back in every dialect, the errors, the refusals.
func TestConformance(t *testing.T) {
	adaptertest.RunProvider(t, adaptertest.ProviderSuite{
		Name:          "bedrock",
		UpstreamModel: "anthropic.claude-3-5-sonnet-20240620-v1:0",
		StreamExt:     ".eventstream",
		StreamWire:    eventStream,
		Check: func(t *testing.T, hr *http.Request) {
			path := hr.URL.EscapedPath()
			if path != "/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse" && path != "/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse-stream" {
				t.Errorf("path %s", path)
			}
			// a key without colons is a Bedrock API key
			if got := hr.Header.Get("Authorization"); got != "Bearer sk-upstream" {
				t.Errorf("Authorization %q", got)
			}
		},
		Refusals: []adaptertest.Refusal{
			{Name: "n", Dialect: "openai", Body: `{"model":"m","n":2,"messages":[{"role":"user","content":"hi"}]}`, Status: 400, Message: "'n' = 2 cannot be sent to a Bedrock channel"},
			{Name: "audio part", Dialect: "openai", Body: `{"model":"m","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}}]}]}`, Status: 400, Message: "cannot be sent to a Bedrock channel"},
			{Name: "seed", Dialect: "openai", Body: `{"model":"m","seed":7,"messages":[{"role":"user","content":"hi"}]}`, Status: 400, Message: "'seed' cannot be sent to a Bedrock channel"},
			{Name: "hosted tool", Dialect: "anthropic", Body: `{"model":"m","max_tokens":10,"tools":[{"type":"web_search_20250305","name":"web_search"}],"messages":[{"role":"user","content":"hi"}]}`, Status: 400, Message: "web_search"},
			{Name: "embeddings", Dialect: "openai", Op: "embedding", Body: `{"model":"amazon.titan-embed-text-v2:0","input":"hi"}`, Status: 400, Message: "is not an embedding model this gateway can call"},
		},
	})
}

// eventStream encodes a stream fixture, one frame a line ("event <type>
// <payload>" or "exception <type> <payload>", # comments), in the
// event-stream framing ConverseStream answers in.
func eventStream(t testing.TB, fixture []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	enc := eventstream.NewEncoder()
	sc := bufio.NewScanner(bytes.NewReader(fixture))
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		kind, rest, _ := strings.Cut(line, " ")
		name, payload, _ := strings.Cut(rest, " ")
		var m eventstream.Message
		m.Headers.Set(":message-type", eventstream.StringValue(kind))
		switch kind {
		case "event":
			m.Headers.Set(":event-type", eventstream.StringValue(name))
		case "exception":
			m.Headers.Set(":exception-type", eventstream.StringValue(name))
		default:
			t.Fatalf("stream fixture line %q: not event or exception", line)
		}
		m.Headers.Set(":content-type", eventstream.StringValue("application/json"))
		m.Payload = []byte(payload)
		if err := enc.Encode(&out, m); err != nil {
			t.Fatal(err)
		}
	}
	return out.Bytes()
}
