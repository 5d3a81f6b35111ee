package engine

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/adapters"
)

type buildProvider struct {
	base     string
	tokens   map[string]int64
	settings *adapters.ChannelSettings
}

func (buildProvider) Type() string                            { return "t" }
func (buildProvider) DecodeError(int, []byte) *adapters.Error { return nil }
func (p buildProvider) DefaultBaseURL() string                { return p.base }
func (p buildProvider) ImageTokens(m string) int64            { return p.tokens[m] }
func (p buildProvider) ProvisionChannel(s adapters.ChannelSettings) error {
	*p.settings = s
	return nil
}

// A channel is built with its base URL (the adapter's default when none
// is given), its bounds defaulted where unset, clients shared by channels
// of the same timeouts, and the adapter told the names it is asked for.
func TestBuildChannel(t *testing.T) {
	var got adapters.ChannelSettings
	prov := buildProvider{base: "https://api.example/v1/", tokens: map[string]int64{"up-a": 70, "b": 20}, settings: &got}
	tr := Transports{}
	spec := ChannelSpec{Name: "c", Type: "t", Keys: []string{"k1", "k2"}, Models: []string{"a", "b"},
		ModelMap: map[string]string{"a": "up-a", "x": "up-x"}, Weight: 3, Bounds: Bounds{Timeout: time.Minute}}
	ch, up, err := BuildChannel(spec, prov, tr)
	if err != nil {
		t.Fatal(err)
	}
	if ch.BaseURL != "https://api.example/v1" || ch.Weight != 3 || len(ch.Keys) != 2 {
		t.Errorf("channel = %+v", ch)
	}
	want := DefaultBounds
	want.Timeout = time.Minute
	if up.Bounds != want {
		t.Errorf("bounds = %+v, want %+v", up.Bounds, want)
	}
	if got.BaseURL != ch.BaseURL || !slices.Equal(got.Models, []string{"up-a", "b", "up-x"}) {
		t.Errorf("settings = %+v", got)
	}
	_, up2, err := BuildChannel(spec, prov, tr)
	if err != nil || up2.Client != up.Client || len(tr) != 1 {
		t.Errorf("second channel's client not shared: %v, %d transports", err, len(tr))
	}
	if pt := PartTokens(ch, prov); pt["a"] != 70 || pt["b"] != 20 || pt["x"] != 0 {
		t.Errorf("part tokens = %v", pt)
	}
	if m := ServedModels(ch); len(m) != 4 || !slices.Contains(m, "x") {
		t.Errorf("served = %v", m)
	}
}

// What a channel over the network misses is refused, the key and the base
// URL recognisably so.
func TestBuildChannelRefusals(t *testing.T) {
	var s adapters.ChannelSettings
	yes, no := true, false
	for _, tt := range []struct {
		name string
		spec ChannelSpec
		key  *bool
		msg  string
	}{
		{"no key", ChannelSpec{Name: "c", BaseURL: "https://h", Models: []string{"m"}}, &yes, `channel "c": give it at least one key ("keys": ["..."])`},
		{"no base", ChannelSpec{Name: "c", Keys: []string{"k"}, Models: []string{"m"}}, &no, `channel "c": base_url is required`},
		{"scheme", ChannelSpec{Name: "c", BaseURL: "h", Keys: []string{"k"}, Models: []string{"m"}}, nil, `channel "c": base_url "h" must start with http:// or https://`},
		{"no models", ChannelSpec{Name: "c", BaseURL: "https://h", Keys: []string{"k"}}, nil, `channel "c": list the models it serves with 'models'`},
	} {
		_, _, err := BuildChannel(tt.spec, buildProvider{settings: &s}, Transports{})
		var missing *Missing
		if err == nil || err.Error() != tt.msg || (tt.key != nil && (!errors.As(err, &missing) || missing.Key != *tt.key)) {
			t.Errorf("%s: err = %v, want %q", tt.name, err, tt.msg)
		}
	}
}
