package adaptertest_test

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/adapters/adaptertest"
)

// The Realtime kit must be able to fail: each case breaks a copy of
// OpenAI's Realtime fixtures or wraps its provider to break one rule, and
// runs the kit in a child process, which must fail saying why.
func TestRealtimeKitFails(t *testing.T) {
	if dir := os.Getenv("ADAPTERTEST_REALTIME_CHILD"); dir != "" {
		s := adaptertest.RealtimeSuite{Name: "openai", Testdata: dir, KeyHeader: "Authorization",
			CapMembers: []string{"max_output_tokens", "max_response_output_tokens"}}
		p := openaiRealtime(t)
		switch os.Getenv("ADAPTERTEST_BREAK") {
		case "client key":
			s.Provider = forwardsClientKey{p}
		case "uncapped":
			s.Provider = uncapped{p}
		case "usage":
			s.Provider = losesPromptTokens{p}
		}
		adaptertest.RunRealtime(t, s)
		return
	}
	tests := []kitCase{
		{"intact", nil, "", ""},
		{"changed golden", func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "realtime", "dial", "ga.golden"), "GET wss://elsewhere\n")
		}, "", "ga.golden differs"},
		{"stale golden", func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "realtime", "session", "gone.golden"), "\n")
		}, "", "gone.golden: no fixture checks this golden"},
		{"no refusal", func(t *testing.T, dir string) {
			rm(t, filepath.Join(dir, "realtime", "session", "ga.json"))
			rm(t, filepath.Join(dir, "realtime", "session", "ga.golden"))
		}, "", "no session fixture reaches a refused client event"},
		{"the client's key forwarded", nil, "client key", "the client's credentials are copied to the upstream in X-Forwarded-Authorization"},
		{"caps relayed as sent", nil, "uncapped", `reaches the upstream with max_output_tokens "inf", above the limit 1000`},
		{"usage mapped wrong", nil, "usage", "usage that cannot be billed"},
	}
	runKitCases(t, "TestRealtimeKitFails", "ADAPTERTEST_REALTIME_CHILD", filepath.Join("..", "openai", "testdata"), tests)
}

func openaiRealtime(t *testing.T) adapters.RealtimeProvider {
	t.Helper()
	fs, err := adaptertest.Families()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fs {
		if p, ok := f.Provider.(adapters.RealtimeProvider); ok && f.Name == "openai" {
			return p
		}
	}
	t.Fatal("the openai family is no Realtime provider")
	return nil
}

// forwardsClientKey copies the client's Authorization to the upstream.
type forwardsClientKey struct{ adapters.RealtimeProvider }

func (p forwardsClientKey) RealtimeDial(up *adapters.Upstream, client *http.Request) (string, http.Header, error) {
	u, h, err := p.RealtimeProvider.RealtimeDial(up, client)
	if h != nil {
		h.Set("X-Forwarded-Authorization", client.Header.Get("Authorization"))
	}
	return u, h, err
}

// uncapped relays every client event as the client sent it.
type uncapped struct{ adapters.RealtimeProvider }

func (p uncapped) RealtimeSession(client *http.Request, limits adapters.RealtimeLimits) adapters.RealtimeSession {
	return relaysAsSent{p.RealtimeProvider.RealtimeSession(client, limits)}
}

type relaysAsSent struct{ adapters.RealtimeSession }

func (s relaysAsSent) ClientEvent(event []byte) ([]byte, adapters.RealtimeClientEvent, *adapters.Error) {
	_, cost, err := s.RealtimeSession.ClientEvent(event)
	return event, cost, err
}

// losesPromptTokens reads a response's usage without its prompt tokens.
type losesPromptTokens struct{ adapters.RealtimeProvider }

func (p losesPromptTokens) RealtimeSession(client *http.Request, limits adapters.RealtimeLimits) adapters.RealtimeSession {
	return promptless{p.RealtimeProvider.RealtimeSession(client, limits)}
}

type promptless struct{ adapters.RealtimeSession }

func (s promptless) ServerEvent(event []byte) adapters.RealtimeServerEvent {
	ev := s.RealtimeSession.ServerEvent(event)
	ev.Usage.PromptTokens = 0
	return ev
}
