package openai_test

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/adapters/openai"
)

// A passthrough stream watched with a second step relays every frame as
// it came and tells the watcher what the frames meant (a traced request's
// finish reason and text).
func TestWatchedPassthroughStream(t *testing.T) {
	body := "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt-4o-mini\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hi\"}}]}\n\n" +
		"data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":\"gpt-4o-mini\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n" +
		"data: [DONE]\n\n"
	req := &adapters.Request{Op: adapters.OpChat, Dialect: "openai", Stream: true, Model: "gpt-4o-mini"}
	var p openai.Adapter
	dec := adapters.DecodeStream(p, req, strings.NewReader(body))
	defer dec.Release()
	var seen []adapters.EventType
	var text strings.Builder
	var finish adapters.StopReason
	dec.Watch(p.NewStreamStep(req), func(ev *adapters.StreamEvent) {
		seen = append(seen, ev.Type)
		text.WriteString(ev.Text)
		if ev.Type == adapters.EventFinish {
			finish = ev.StopReason
		}
	})
	var relayed bytes.Buffer
	for {
		ev, err := dec.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if ev.Type != adapters.EventPassthrough {
			t.Fatalf("a watched passthrough stream gave a %s event", ev.Type)
		}
		relayed.Write(ev.Raw)
	}
	if !strings.HasPrefix(body, relayed.String()) || relayed.Len() == 0 {
		t.Errorf("relayed %q, want the upstream's frames", relayed.String())
	}
	if text.String() != "Hi" || finish != adapters.StopEnd {
		t.Errorf("watcher saw %v: text %q finish %q", seen, text.String(), finish)
	}
}
