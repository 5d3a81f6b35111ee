package vertex

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-model-gateway/gateway/adapters"
)

func provisioned(t *testing.T, a *Adapter) *Adapter {
	t.Helper()
	if err := a.Provision(caddy.Context{}); err != nil {
		t.Fatal(err)
	}
	return a
}

// TestEndpointByLocation: the global endpoint, a region's, placeholders
// read at load (empty: the default).
func TestEndpointByLocation(t *testing.T) {
	t.Setenv("VERTEX_TEST_LOCATION", "europe-west4")
	cases := map[string]string{
		"":                            "https://aiplatform.googleapis.com",
		"global":                      "https://aiplatform.googleapis.com",
		"us-east5":                    "https://us-east5-aiplatform.googleapis.com",
		"eu":                          "https://aiplatform.eu.rep.googleapis.com",
		"{env.VERTEX_TEST_LOCATION}":  "https://europe-west4-aiplatform.googleapis.com",
		"{env.VERTEX_UNSET_LOCATION}": "https://aiplatform.googleapis.com",
	}
	for loc, want := range cases {
		a := provisioned(t, &Adapter{Location: loc})
		if got := a.DefaultBaseURL(); got != want {
			t.Errorf("location %q: %s, want %s", loc, got, want)
		}
	}
	for _, bad := range []string{"us-east5.evil.example", "US_EAST", "a/b"} {
		if err := (&Adapter{Location: bad}).Provision(caddy.Context{}); err == nil {
			t.Errorf("location %q accepted", bad)
		}
	}
}

// TestPublisherPerChannel: a channel's models say its wire; a channel
// mixing Claude and Gemini is refused at load, and the option decides for
// names that do not follow the convention.
func TestPublisherPerChannel(t *testing.T) {
	ch := func(models ...string) adapters.ChannelSettings {
		return adapters.ChannelSettings{Name: "c", Models: models}
	}
	a := provisioned(t, &Adapter{Project: "p"})
	if err := a.ProvisionChannel(ch("claude-sonnet-4-5@20250929", "claude-haiku-4-5@20251001")); err != nil || a.WireDialect() != "anthropic" {
		t.Fatalf("claude channel: %v, wire %s", err, a.WireDialect())
	}
	a = provisioned(t, &Adapter{Project: "p"})
	if err := a.ProvisionChannel(ch("gemini-2.5-pro", "imagen-4.0-generate-001")); err != nil || a.WireDialect() != "gemini" {
		t.Fatalf("gemini channel: %v, wire %s", err, a.WireDialect())
	}
	a = provisioned(t, &Adapter{Project: "p"})
	err := a.ProvisionChannel(ch("gemini-2.5-pro", "claude-sonnet-4-5"))
	if err == nil || !strings.Contains(err.Error(), "mixes Claude") {
		t.Fatalf("a mixed channel: %v", err)
	}
	a = provisioned(t, &Adapter{Project: "p", Publisher: "anthropic"})
	if err := a.ProvisionChannel(ch("my-tuned-claude")); err != nil || a.WireDialect() != "anthropic" || a.publisherFor("my-tuned-claude") != PublisherAnthropic {
		t.Fatalf("publisher option: %v, wire %s", err, a.WireDialect())
	}
	a = provisioned(t, &Adapter{})
	if err := a.ProvisionChannel(ch("gemini-2.5-pro")); err == nil || !strings.Contains(err.Error(), "no project") {
		t.Fatalf("no project: %v", err)
	}
}

// TestWithoutMember keeps every other member's value as written (the
// space between members goes).
func TestWithoutMember(t *testing.T) {
	in := `{"model":"claude-x","messages":[{"role":"user","content":"a\"model\""}], "max_tokens" : 5 ,"metadata":{"model":1}}`
	got, err := withoutMember([]byte(in), "model")
	if err != nil {
		t.Fatal(err)
	}
	want := `{"messages":[{"role":"user","content":"a\"model\""}],"max_tokens":5,"metadata":{"model":1}}`
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	same, _ := withoutMember([]byte(`{"a":1}`), "model")
	if string(same) != `{"a":1}` {
		t.Fatalf("a body without the member changed: %s", same)
	}
}

// FuzzWithoutMember: whatever the body, a valid object comes back valid,
// without the member and with every other one.
func FuzzWithoutMember(f *testing.F) {
	for _, s := range []string{`{"model":"m","a":1}`, `{"a":{"model":2},"model":"x","b":[1,"model"]}`, `{}`, `[]`, `{"model":1,"model":2}`, `{"m\u006fdel":3}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		var before map[string]json.RawMessage
		if json.Unmarshal(in, &before) != nil {
			return
		}
		out, err := withoutMember(in, "model")
		if err != nil {
			t.Fatalf("a valid object refused: %v", err)
		}
		var after map[string]json.RawMessage
		if err := json.Unmarshal(out, &after); err != nil {
			t.Fatalf("%s became invalid: %s", in, out)
		}
		if _, ok := after["model"]; ok {
			t.Fatalf("%s kept its model: %s", in, out)
		}
		delete(before, "model")
		if len(before) != len(after) {
			t.Fatalf("%s lost members: %s", in, out)
		}
	})
}
