package engine

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

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
			return nil, nil, &Missing{Channel: s.Name, Key: true}
		}
		if base == "" {
			return nil, nil, &Missing{Channel: s.Name}
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

// Missing refuses a channel that goes over the network for want of a key
// (Key) or else of a base URL: a Caddyfile's channel without a key is
// skipped rather than refused, and its empty base URL explained by the
// environment it was read from.
type Missing struct {
	Channel string
	Key     bool
}

func (e *Missing) Error() string {
	if e.Key {
		return fmt.Sprintf("channel %q: give it at least one key (\"keys\": [\"...\"])", e.Channel)
	}
	return fmt.Sprintf("channel %q: base_url is required", e.Channel)
}

// withDefaults fills the bounds left zero with DefaultBounds'.
func (b Bounds) withDefaults() Bounds {
	d := DefaultBounds
	return Bounds{Dial: orDefault(b.Dial, d.Dial), ResponseHeader: orDefault(b.ResponseHeader, d.ResponseHeader),
		StreamIdle: orDefault(b.StreamIdle, d.StreamIdle), Timeout: orDefault(b.Timeout, d.Timeout),
		MaxResponseBody: orDefault(b.MaxResponseBody, d.MaxResponseBody), MaxStreamEvent: orDefault(b.MaxStreamEvent, d.MaxStreamEvent)}
}

func orDefault[T int | int64 | time.Duration](v, d T) T {
	if v > 0 {
		return v
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
