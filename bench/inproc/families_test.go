package inproc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/bench/mock"
)

// BenchmarkFamilies prices a Bedrock request's own work against the
// OpenAI family's, per request, in one process: building the upstream
// request (the same neutral conversation, from an Anthropic client, so
// both translate; Bedrock's signed with SigV4 or sent with an API key) and
// reading its stream (the bench mock's 20 chunks and usage, as OpenAI's
// SSE passed through to an OpenAI client or translated, and the same text
// as Bedrock's event-stream frames, always translated). `make bench`
// prints the ratios (bench/cmd/bench/families.go).
func BenchmarkFamilies(b *testing.B) {
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	defer cancel()
	provider := func(name string) adapters.ChatProvider {
		mod, err := ctx.LoadModuleByID("gateway.adapters."+name, json.RawMessage(`{}`))
		if err != nil {
			b.Fatal(err)
		}
		return mod.(adapters.ChatProvider)
	}
	openaiP, bedrockP := provider("openai"), provider("bedrock")
	chat := &adapters.ChatRequest{System: []adapters.Part{{Type: adapters.PartText, Text: "You are terse."}},
		Messages: []adapters.Message{{Role: adapters.RoleUser, Parts: []adapters.Part{{Type: adapters.PartText, Text: "Say hello"}}}}}
	request := func(p adapters.ChatProvider, model, key string) func(b *testing.B) {
		return func(b *testing.B) {
			up := &adapters.Upstream{Channel: "bench", BaseURL: "https://upstream.invalid", Key: key, Model: model}
			b.ReportAllocs()
			for b.Loop() {
				req := &adapters.Request{Op: adapters.OpChat, Dialect: "anthropic", Model: "m", Stream: true, Chat: chat}
				if _, err := p.NewRequest(context.Background(), up, req); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	b.Run("request/openai", request(openaiP, "gpt-4o-mini", "sk-bench-upstream"))
	b.Run("request/bedrock-sigv4", request(bedrockP, "anthropic.claude-3-5-haiku-20241022-v1:0", "AKIDBENCH0123456789:benchSecretKey0123456789abcdefghijklmno:benchSessionToken"))
	b.Run("request/bedrock-apikey", request(bedrockP, "anthropic.claude-3-5-haiku-20241022-v1:0", "ABSKbenchApiKey0123456789"))

	var sse []byte
	for i := 0; i <= mock.StreamChunks; i++ {
		sse = append(sse, "data: "...)
		sse = mock.AppendChunk(sse, i, "chatcmpl-bench", 1, []byte(`"gpt-4o-mini"`), true)
		sse = append(sse, "\n\n"...)
	}
	sse = append(sse, "data: [DONE]\n\n"...)
	frames := bedrockStream(b, openaiP, sse)
	stream := func(p adapters.ChatProvider, dialect string, body []byte) func(b *testing.B) {
		return func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				dec := adapters.DecodeStream(p, &adapters.Request{Op: adapters.OpChat, Dialect: dialect, Stream: true}, bytes.NewReader(body))
				usage := false
				for {
					ev, err := dec.Next()
					if err != nil {
						if !errors.Is(err, io.EOF) {
							b.Fatal(err)
						}
						break
					}
					usage = usage || ev.Usage != nil
				}
				dec.Release()
				if !usage {
					b.Fatal("the stream reported no usage")
				}
			}
		}
	}
	b.Run("stream/openai-passthrough", stream(openaiP, "openai", sse))
	b.Run("stream/openai-translated", stream(openaiP, "anthropic", sse))
	b.Run("stream/bedrock", stream(bedrockP, "anthropic", frames))
}

// bedrockStream is the OpenAI stream's text as ConverseStream sends it:
// messageStart, a contentBlockDelta per chunk, contentBlockStop,
// messageStop and metadata with the usage, each with Bedrock's padding.
func bedrockStream(b *testing.B, openaiP adapters.ChatProvider, sse []byte) []byte {
	dec := adapters.DecodeStream(openaiP, &adapters.Request{Op: adapters.OpChat, Dialect: "anthropic", Stream: true}, bytes.NewReader(sse))
	defer dec.Release()
	type ev struct {
		typ     string
		payload any
	}
	evs := []ev{{"messageStart", map[string]any{"role": "assistant"}}}
	var usage *adapters.Usage
	for {
		e, err := dec.Next()
		if err != nil {
			break
		}
		switch {
		case e.Type == adapters.EventTextDelta:
			evs = append(evs, ev{"contentBlockDelta", map[string]any{"contentBlockIndex": 0, "delta": map[string]any{"text": e.Text}}})
		case e.Usage != nil:
			usage = e.Usage
		}
	}
	if usage == nil {
		b.Fatal("the OpenAI stream reported no usage")
	}
	evs = append(evs, ev{"contentBlockStop", map[string]any{"contentBlockIndex": 0}}, ev{"messageStop", map[string]any{"stopReason": "end_turn"}},
		ev{"metadata", map[string]any{"usage": map[string]any{"inputTokens": usage.PromptTokens, "outputTokens": usage.CompletionTokens,
			"totalTokens": usage.PromptTokens + usage.CompletionTokens}, "metrics": map[string]any{"latencyMs": 100}}})
	var out bytes.Buffer
	enc := eventstream.NewEncoder()
	for _, e := range evs {
		var m eventstream.Message
		m.Headers.Set(":message-type", eventstream.StringValue("event"))
		m.Headers.Set(":event-type", eventstream.StringValue(e.typ))
		m.Headers.Set(":content-type", eventstream.StringValue("application/json"))
		p := e.payload.(map[string]any)
		p["p"] = "abcdefghijklmnopqrstuvwxyz"
		m.Payload, _ = json.Marshal(p)
		if err := enc.Encode(&out, m); err != nil {
			b.Fatal(err)
		}
	}
	return out.Bytes()
}
