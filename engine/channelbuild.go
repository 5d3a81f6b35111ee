package engine

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/routing"
)

// ChannelSpec is a channel as configured (the Caddyfile's or one made at
// runtime), its keys and base URL resolved, its adapter loaded.
type ChannelSpec struct {
	Name, Type, BaseURL string
	Keys                []string
	Models              []string
	ModelMap            map[string]string
	Priority, Weight    int
	// Bounds are the bounds the configuration sets; those left zero take
	// DefaultBounds'.
	Bounds    Bounds
	Allowance Allowance
}

// ErrNoKey and ErrNoBaseURL say what BuildChannel misses of a channel
// that goes over the network: a Caddyfile's channel without a key is
// skipped rather than refused, and an empty base URL explained by the
// environment it was read from.
var (
	ErrNoKey     = errors.New("no key")
	ErrNoBaseURL = errors.New("no base_url")
)

// missing is a refusal for want of a key or a base URL: its message as
// the user reads it, errors.Is matching what is missing.
type missing struct {
	msg  string
	what error
}

func (e *missing) Error() string { return e.msg }
func (e *missing) Unwrap() error { return e.what }

// BuildChannel checks a channel and makes its routing record and upstream
// record: its base URL (the adapter's default if none), the adapter told
// of its settings, the HTTP client of its bounds (from transports, shared
// by channels that agree) or the adapter's own transport.
func BuildChannel(s ChannelSpec, prov adapters.Provider, transports Transports) (*routing.Channel, *Upstream, error) {
	_, local := prov.(adapters.Transporter)
	base := strings.TrimRight(s.BaseURL, "/")
	if d, ok := prov.(adapters.BaseURLDefaulter); ok && base == "" {
		base = strings.TrimRight(d.DefaultBaseURL(), "/")
	}
	if !local {
		if len(s.Keys) == 0 {
			return nil, nil, &missing{fmt.Sprintf("channel %q: give it at least one key (\"keys\": [\"...\"])", s.Name), ErrNoKey}
		}
		if base == "" {
			return nil, nil, &missing{fmt.Sprintf("channel %q: base_url is required", s.Name), ErrNoBaseURL}
		}
		if !strings.HasPrefix(base, "http://") && !strings.HasPrefix(base, "https://") {
			return nil, nil, fmt.Errorf("channel %q: base_url %q must start with http:// or https://", s.Name, base)
		}
	}
	if len(s.Models) == 0 && len(s.ModelMap) == 0 {
		return nil, nil, fmt.Errorf("channel %q: list the models it serves with 'models'", s.Name)
	}
	if cp, ok := prov.(adapters.ChannelProvisioner); ok {
		err := cp.ProvisionChannel(adapters.ChannelSettings{Name: s.Name, BaseURL: base, Keys: s.Keys, Models: UpstreamModels(s.Models, s.ModelMap)})
		if err != nil {
			return nil, nil, fmt.Errorf("channel %q: %w", s.Name, err)
		}
	}
	up := &Upstream{Provider: prov, Bounds: s.Bounds.withDefaults(), Allowance: s.Allowance}
	if t, ok := prov.(adapters.Transporter); ok {
		up.Client = &http.Client{Transport: t.Transport()}
	} else {
		up.Client = transports.Client(up.Bounds)
	}
	if w, ok := prov.(adapters.TransportWrapper); ok {
		c := *up.Client
		c.Transport = w.WrapTransport(c.Transport)
		up.Client = &c
	}
	ch := &routing.Channel{
		Name: s.Name, Type: s.Type, BaseURL: base, Keys: s.Keys,
		Models: s.Models, ModelMap: s.ModelMap,
		Priority: s.Priority, Weight: s.Weight,
	}
	return ch, up, nil
}

// withDefaults fills the bounds left zero with DefaultBounds'.
func (b Bounds) withDefaults() Bounds {
	d := DefaultBounds
	if b.Dial > 0 {
		d.Dial = b.Dial
	}
	if b.ResponseHeader > 0 {
		d.ResponseHeader = b.ResponseHeader
	}
	if b.StreamIdle > 0 {
		d.StreamIdle = b.StreamIdle
	}
	if b.Timeout > 0 {
		d.Timeout = b.Timeout
	}
	if b.MaxResponseBody > 0 {
		d.MaxResponseBody = b.MaxResponseBody
	}
	if b.MaxStreamEvent > 0 {
		d.MaxStreamEvent = b.MaxStreamEvent
	}
	return d
}

// UpstreamModels are the names a channel's upstream is asked for: its
// models as modelMap renames them, and modelMap's other targets.
func UpstreamModels(models []string, modelMap map[string]string) []string {
	var out []string
	add := func(m string) {
		if !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	for _, m := range models {
		if u, ok := modelMap[m]; ok {
			m = u
		}
		add(m)
	}
	for _, u := range modelMap {
		add(u)
	}
	return out
}

// ServedModels are the names a client may ask a channel for: its models
// and model_map's keys.
func ServedModels(ch *routing.Channel) []string {
	return append(slices.Clone(ch.Models), slices.Collect(maps.Keys(ch.ModelMap))...)
}

// PartTokens is what an image costs on the channel, by the name a client
// asks for (nil: its adapter does not say).
func PartTokens(ch *routing.Channel, prov adapters.Provider) map[string]int64 {
	it, ok := prov.(adapters.ImageTokens)
	if !ok {
		return nil
	}
	out := map[string]int64{}
	for _, m := range ch.Models {
		out[m] = max(out[m], it.ImageTokens(m))
	}
	for m, upstream := range ch.ModelMap {
		out[m] = max(out[m], it.ImageTokens(upstream))
	}
	return out
}
