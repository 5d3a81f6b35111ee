package caddymodule

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"strings"
	"sync"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/engine"
	"github.com/caddy-model-gateway/gateway/internal/sealed"
	"github.com/caddy-model-gateway/gateway/routing"
	"github.com/caddy-model-gateway/gateway/store"
)

// Channels, prices and plans made at runtime, in the console or the admin
// API, live in the database (store.RuntimeStore) beside the Caddyfile's.
// The request path reads one routing table, one upstream table, one price
// table and the plans, each behind an atomic pointer; a change rebuilds
// them off the request path and swaps them in:
// on this instance when it makes the change, on the others when
// PostgreSQL announces it (store/postgres/notify.go). A channel that did
// not change keeps its record, so its health and key rotation carry over.

// runtimeState is the app's share of the runtime configuration.
type runtimeState struct {
	ctx caddy.Context
	// mu makes one rebuild at a time, and guards built and the app's
	// transports map
	mu    sync.Mutex
	built map[string]*runtimeChannel
	key   *sealed.Key // nil: no secrets_key
	// testMu serializes keeping tests (keepTest)
	testMu sync.Mutex
	// allowNets and allowHosts are allow_private_upstreams
	allowNets  []netip.Prefix
	allowHosts []string
	// kick asks the worker for a rebuild; stop ends it
	kick chan struct{}
	stop context.CancelFunc
	done chan struct{}
}

// runtimeChannel is a database channel as the table holds it.
type runtimeChannel struct {
	stamp [32]byte // of its configuration and sealed keys
	ch    *routing.Channel
	up    *engine.Upstream
}

// maxRuntimeKeys bounds the keys one channel takes through the API.
const maxRuntimeKeys = 64

var channelName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

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
	rs := &runtimeState{ctx: ctx, kick: make(chan struct{}, 1)}
	a.runtime = rs
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
		rs.key = k
	}
	for _, v := range a.AllowPrivateUpstreams {
		if p, err := netip.ParsePrefix(v); err == nil {
			rs.allowNets = append(rs.allowNets, p.Masked())
		} else if ip, err := netip.ParseAddr(v); err == nil {
			rs.allowNets = append(rs.allowNets, netip.PrefixFrom(ip, ip.BitLen()))
		} else {
			rs.allowHosts = append(rs.allowHosts, strings.ToLower(v))
		}
	}
	if err := a.reloadRuntime(context.Background()); err != nil {
		// the Caddyfile's channels serve; the database's come with the
		// next change or restart
		a.log.Error("loading the channels made at runtime", zap.Error(err))
	}
	a.db.watchRuntime(a)
	return nil
}

// startRuntime runs the worker that rebuilds the tables when another
// instance changed the runtime configuration.
func (a *App) startRuntime() {
	rs := a.runtime
	ctx, cancel := context.WithCancel(context.Background())
	rs.stop, rs.done = cancel, make(chan struct{})
	go func() {
		defer close(rs.done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-rs.kick:
				if err := a.reloadRuntime(ctx); err != nil && ctx.Err() == nil {
					a.log.Error("applying a change to the channels made at runtime", zap.Error(err))
				}
			}
		}
	}()
}

func (a *App) stopRuntime() {
	if rs := a.runtime; rs != nil && rs.stop != nil {
		rs.stop()
		<-rs.done
	}
}

// runtimeChanged asks for a rebuild; it never blocks (the listener's
// connection calls it).
func (a *App) runtimeChanged() {
	if a.runtime == nil {
		return
	}
	select {
	case a.runtime.kick <- struct{}{}:
	default:
	}
}

// reloadRuntime rebuilds the tables from the Caddyfile's channels, prices
// and plans and the database's, and swaps them in. A database channel that
// cannot be loaded now (its keys sealed under another secrets_key) keeps
// the record it had, if any.
func (a *App) reloadRuntime(ctx context.Context) error {
	rs := a.runtime
	rs.mu.Lock()
	defer rs.mu.Unlock()
	all, err := a.db.store.ListRuntime(ctx, "")
	if err != nil {
		return err
	}
	var items, prices, plans []*store.RuntimeItem
	for _, it := range all {
		switch it.Kind {
		case store.RuntimeChannel:
			items = append(items, it)
		case store.RuntimePrice:
			prices = append(prices, it)
		case store.RuntimePlan:
			plans = append(plans, it)
		}
	}
	built := map[string]*runtimeChannel{}
	chans := append([]*routing.Channel(nil), a.static...)
	ups := make(map[string]*engine.Upstream, len(a.staticUpstreams)+len(items))
	for n, up := range a.staticUpstreams {
		ups[n] = up
	}
	for _, it := range items {
		if it.Disabled {
			continue
		}
		if _, taken := a.staticUpstreams[it.Name]; taken || a.caddyfileChannel(it.Name) != nil {
			a.log.Warn("a channel made at runtime has the name of a Caddyfile channel, which wins", zap.String("channel", it.Name))
			continue
		}
		stamp := sha256.Sum256(append([]byte(it.Config+"\x00"), it.Secret...))
		rc := rs.built[it.Name]
		if rc == nil || rc.stamp != stamp {
			cc, keys, err := a.openChannel(it)
			if err == nil {
				var ch *routing.Channel
				var up *engine.Upstream
				if ch, up, err = a.buildChannel(rs.ctx, cc, keys, cc.BaseURL, true); err == nil {
					rc = &runtimeChannel{stamp: stamp, ch: ch, up: up}
				}
			}
			if err != nil {
				// keep what served before, if anything did
				a.log.Error("a channel made at runtime cannot be loaded", zap.String("channel", it.Name), zap.Error(err))
				if rc == nil {
					continue
				}
			}
		}
		built[it.Name] = rc
		chans = append(chans, rc.ch)
		ups[it.Name] = rc.up
	}
	rs.built = built
	a.priceTable.Replace(a.runtimePrices(prices))
	if a.gate != nil && a.gate.Budgets != nil {
		a.gate.Budgets.SetRuntimePlans(a.runtimePlans(plans))
	}
	// upstreams first: a request that plans on the new table finds its records
	a.upstreams.Replace(ups)
	a.channels.Replace(chans)
	return nil
}

// caddyfileChannel is the Caddyfile's channel of that name (skipped ones
// included: their name is the Caddyfile's all the same), nil when none.
func (a *App) caddyfileChannel(name string) *ChannelConfig {
	for _, cc := range a.Channels {
		if cc.Name == name {
			return cc
		}
	}
	return nil
}

// openChannel decodes a stored channel and opens its keys.
func (a *App) openChannel(it *store.RuntimeItem) (*ChannelConfig, []string, error) {
	cc := &ChannelConfig{}
	if err := json.Unmarshal([]byte(it.Config), cc); err != nil {
		return nil, nil, fmt.Errorf("its stored configuration: %w", err)
	}
	cc.Name = it.Name
	var keys []string
	if len(it.Secret) > 0 {
		if a.runtime.key == nil {
			return nil, nil, errors.New("its keys are sealed but this configuration has no secrets_key")
		}
		plain, err := a.runtime.key.Open(it.Secret, it.Binding())
		if err != nil {
			return nil, nil, err
		}
		if err := json.Unmarshal(plain, &keys); err != nil {
			return nil, nil, fmt.Errorf("its keys: %w", err)
		}
	}
	return cc, keys, nil
}
