package caddymodule

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/billing"
	"github.com/caddy-model-gateway/gateway/engine"
	"github.com/caddy-model-gateway/gateway/internal/sealed"
	"github.com/caddy-model-gateway/gateway/routing"
	"github.com/caddy-model-gateway/gateway/runtimecfg"
)

// Channels, prices and plans made at runtime live in the database beside
// the Caddyfile's; package runtimecfg keeps them and rebuilds the tables
// requests read. Here are the Caddy parts: the Caddyfile's options, the
// secrets_key's placeholder, and decoding and building a channel (its
// configuration holds Caddy's durations and adapter modules).

// parseRuntimeOption reads secrets_key and allow_private_upstreams.
func (a *App) parseRuntimeOption(d *caddyfile.Dispenser) error {
	switch d.Val() {
	case "secrets_key":
		if !d.NextArg() {
			return d.ArgErr()
		}
		a.SecretsKey = d.Val()
		if d.NextArg() {
			return d.ArgErr()
		}
	case "allow_private_upstreams":
		args := d.RemainingArgs()
		if len(args) == 0 {
			return d.ArgErr()
		}
		a.AllowPrivateUpstreams = append(a.AllowPrivateUpstreams, args...)
	}
	return nil
}

// provisionRuntime reads secrets_key and the allowed private upstreams,
// and loads the database's channels before the first request.
func (a *App) provisionRuntime(ctx caddy.Context, repl *caddy.Replacer) error {
	var key *sealed.Key
	if a.SecretsKey != "" {
		if !strings.Contains(a.SecretsKey, "{") {
			a.log.Warn("secrets_key is written in the configuration, which the admin API serves: give it as {file./path} or {env.NAME}")
		}
		material := repl.ReplaceAll(a.SecretsKey, "")
		if material == "" {
			return fmt.Errorf("secrets_key %s is empty: the file or environment variable it names is missing or empty", a.SecretsKey)
		}
		k, err := sealed.NewKey(material)
		if err != nil {
			return err
		}
		key = k
	}
	caddyfile := make([]*runtimecfg.Channel, 0, len(a.Channels))
	for _, cc := range a.Channels {
		caddyfile = append(caddyfile, channelOf(cc))
	}
	var plans map[string]*billing.PlanConfig
	if a.Budgets != nil {
		plans = a.Budgets.Plans
	}
	a.runtime = runtimecfg.New(runtimecfg.Deps{
		Store: a.db.Store, Key: key, AllowPrivateUpstreams: a.AllowPrivateUpstreams,
		Caddyfile: caddyfile, Static: a.static, StaticUpstreams: a.staticUpstreams,
		Prices: a.prices, Plans: plans, Budgets: a.gate.Budgets,
		Channels: a.channels, Upstreams: a.upstreams, PriceTable: a.priceTable,
		Decode: decodeChannel,
		TypeOf: func(c *runtimecfg.Channel) string {
			typ, _ := c.Config.(*ChannelConfig).adapterType()
			return typ
		},
		Build: func(c *runtimecfg.Channel, keys []string) (*routing.Channel, *engine.Upstream, error) {
			// a copy: loading the adapter takes its options out of the configuration
			cc := *c.Config.(*ChannelConfig)
			return a.buildChannel(ctx, &cc, keys, cc.BaseURL, true)
		},
		Log: a.log,
	})
	if err := a.runtime.Reload(context.Background()); err != nil {
		// the Caddyfile's channels serve; the database's come with the
		// next change or restart
		a.log.Error("loading the channels made at runtime", zap.Error(err))
	}
	a.db.WatchRuntime(a, a.runtimeChanged)
	return nil
}

// runtimeChanged asks for a rebuild; it never blocks (the listener's
// connection calls it).
func (a *App) runtimeChanged() { a.runtime.Changed() }

// channelOf is what package runtimecfg reads of a channel.
func channelOf(cc *ChannelConfig) *runtimecfg.Channel {
	return &runtimecfg.Channel{Name: cc.Name, BaseURL: cc.BaseURL, Keys: cc.Keys, Models: cc.Models, ModelMap: cc.ModelMap,
		Priority: cc.Priority, Weight: cc.Weight, Config: cc}
}

// decodeChannel reads a channel made at runtime, as stored (strict: as
// given to the admin API, refusing unknown fields).
func decodeChannel(name string, config []byte, strict bool) (*runtimecfg.Channel, error) {
	cc := &ChannelConfig{}
	if strict {
		dec := json.NewDecoder(bytes.NewReader(config))
		dec.DisallowUnknownFields()
		if err := dec.Decode(cc); err != nil {
			return nil, err
		}
	} else if err := json.Unmarshal(config, cc); err != nil {
		return nil, err
	}
	cc.Name = name
	return channelOf(cc), nil
}
