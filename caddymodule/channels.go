package caddymodule

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/engine"
	"github.com/caddy-model-gateway/gateway/routing"
)

// The Caddyfile's channels: each one's adapter loaded and its channel and
// upstream record built (those made at runtime are built here too, by
// runtimecfg through runtime.go).

// provisionChannels loads each channel's adapter and builds the channel
// table (a.channels) and each channel's upstream record, by name; a channel
// without a key is skipped, with a warning. These are the Caddyfile's
// channels; those made at runtime join them (runtimecfg).
func (a *App) provisionChannels(ctx caddy.Context, repl *caddy.Replacer) (map[string]*engine.Upstream, error) {
	a.partTokens = &engine.ImageParts{Fixed: a.PartTokens}
	a.transports = engine.Transports{}
	upstreams := map[string]*engine.Upstream{}
	var chans []*routing.Channel
	seen := map[string]bool{}
	for i, cc := range a.Channels {
		if cc.Name == "" {
			cc.Name = fmt.Sprintf("channel%d", i+1)
		}
		if seen[cc.Name] {
			return nil, fmt.Errorf("channel %q is defined twice", cc.Name)
		}
		seen[cc.Name] = true
		var keys []string
		for _, k := range cc.Keys {
			// a key pair joined from two empty variables ("{env.A}:{env.B}") is no key
			if k = strings.TrimSpace(repl.ReplaceAll(k, "")); strings.Trim(k, ":") != "" {
				keys = append(keys, k)
			}
		}
		ch, up, err := a.buildChannel(ctx, cc, keys, repl.ReplaceAll(cc.BaseURL, ""), false)
		if err != nil {
			return nil, err
		}
		if ch == nil {
			continue
		}
		upstreams[cc.Name] = up
		chans = append(chans, ch)
	}
	a.channels = routing.NewSet(chans)
	a.static = chans
	a.staticUpstreams = upstreams
	return upstreams, nil
}

// buildChannel loads a channel's adapter and makes its routing record and
// upstream record, of its keys and base URL as resolved. A Caddyfile
// channel without a key is skipped with a warning (nil, nil, nil); one
// made at runtime (runtime) is refused instead, and its models' image
// allowances are not noted (the table the request path reads is the
// Caddyfile's alone: a model served only at runtime reserves the default).
func (a *App) buildChannel(ctx caddy.Context, cc *ChannelConfig, keys []string, base string, runtime bool) (*routing.Channel, *engine.Upstream, error) {
	typ, err := cc.adapterType()
	if err != nil {
		return nil, nil, err
	}
	if _, err := caddy.GetModule("gateway.adapters." + typ); err != nil {
		return nil, nil, fmt.Errorf("channel %q: unknown type %q (known: %s)", cc.Name, typ, strings.Join(knownAdapters(), ", "))
	}
	mod, err := ctx.LoadModule(cc, "AdapterRaw")
	if err != nil {
		return nil, nil, fmt.Errorf("channel %q: loading its %s adapter: %w", cc.Name, typ, err)
	}
	prov, ok := mod.(adapters.Provider)
	if !ok {
		return nil, nil, fmt.Errorf("channel %q: type %q cannot serve as an upstream", cc.Name, typ)
	}
	ch, up, err := engine.BuildChannel(engine.ChannelSpec{
		Name: cc.Name, Type: typ, BaseURL: base, Keys: keys,
		Models: cc.Models, ModelMap: cc.ModelMap, Priority: cc.Priority, Weight: cc.Weight,
		Bounds: cc.bounds(), Allowance: engine.Allowance{Fields: cc.AllowFields, Betas: cc.AllowBetas},
	}, prov, a.transports)
	var missing *engine.Missing
	switch {
	case runtime:
		return ch, up, err
	case errors.As(err, &missing) && missing.Key:
		a.log.Warn("channel skipped: it has no key (set its key, e.g. from the environment, to enable it)", zap.String("channel", cc.Name), zap.String("type", typ),
			// {env.X} is the gateway's own environment, at a reload too
			zap.Strings("unset_in_gateway_environment", unsetEnv(cc.Keys...)))
		return nil, nil, nil
	case missing != nil && len(unsetEnv(cc.BaseURL)) > 0:
		return nil, nil, fmt.Errorf("channel %q: base_url %s is empty: %s is not set in the gateway's environment (where {env.X} is read, at a reload too)",
			cc.Name, cc.BaseURL, strings.Join(unsetEnv(cc.BaseURL), ", "))
	case err != nil:
		return nil, nil, err
	}
	for _, m := range engine.ServedModels(ch) {
		if _, ok := a.prices[m]; !ok {
			a.log.Warn("model has no price: requests for it will be refused until it gets one or is marked free", zap.String("model", m), zap.String("channel", cc.Name))
		}
	}
	for m, n := range engine.PartTokens(ch, prov) {
		a.partTokens.Note(m, n)
	}
	return ch, up, nil
}

// adapterType names the channel's adapter, turning the short form ("type"
// alone) into the adapter object, and refuses options of the older flat
// form with what to write instead.
func (cc *ChannelConfig) adapterType() (string, error) {
	if len(cc.AdapterRaw) == 0 {
		if cc.Type == "" {
			return "", fmt.Errorf("channel %q: its adapter is required, e.g. \"adapter\": {\"type\": \"openai\"} (or type openai in the Caddyfile)", cc.Name)
		}
		cc.AdapterRaw, _ = json.Marshal(map[string]string{"type": cc.Type})
	} else if cc.Type != "" {
		return "", fmt.Errorf("channel %q: give its type once, inside \"adapter\", not also as \"type\"", cc.Name)
	}
	var head struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(cc.AdapterRaw, &head); err != nil || head.Type == "" {
		return "", fmt.Errorf("channel %q: its adapter needs a \"type\" naming a gateway.adapters module", cc.Name)
	}
	if cc.Version != "" {
		return "", fmt.Errorf("channel %q: \"version\" is now an option of the channel's adapter: write \"adapter\": {\"type\": %q, \"version\": %q} (in the Caddyfile: type %s { version %s })",
			cc.Name, head.Type, cc.Version, head.Type, cc.Version)
	}
	return head.Type, nil
}
