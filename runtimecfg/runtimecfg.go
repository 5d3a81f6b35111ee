// Package runtimecfg is the runtime configuration: channels, prices and
// plans made in the console or the admin API (accountapi.Runtime), kept in
// the database beside the Caddyfile's, and the rebuild that puts them in
// the tables requests read. It imports no Caddy: the Caddy layer decodes
// and builds a channel (its configuration holds Caddy's durations and
// adapter modules) and hands those steps in as functions (Deps).
package runtimecfg

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

	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/billing"
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

// Channel is what this package reads of a channel's configuration. The
// layer above decodes its own configuration type (Deps.Decode) and builds
// it (Deps.Build); Config is that type, handed back to Build and TypeOf.
type Channel struct {
	Name     string
	BaseURL  string
	Keys     []string // the Caddyfile's, as written; a database channel's are sealed apart
	Models   []string
	ModelMap map[string]string
	Priority int
	Weight   int
	Config   any
}

// Deps is what the runtime configuration needs of the configuration it
// belongs to. The Caddyfile's parts are read, never changed.
type Deps struct {
	// Store keeps the runtime configuration.
	Store store.RuntimeStore
	// Key seals and opens channels' keys; nil: no secrets_key.
	Key *sealed.Key
	// AllowPrivateUpstreams is allow_private_upstreams: addresses,
	// prefixes or host names a channel's base URL may name.
	AllowPrivateUpstreams []string
	// Caddyfile is the Caddyfile's channels as configured, in order
	// (skipped ones included: their name is the Caddyfile's all the same).
	Caddyfile []*Channel
	// Static and StaticUpstreams are the Caddyfile's channels as built.
	Static          []*routing.Channel
	StaticUpstreams map[string]*engine.Upstream
	// Prices are the Caddyfile's prices; Plans its plans as configured.
	Prices map[string]*billing.Price
	Plans  map[string]*billing.PlanConfig
	// Budgets builds plans and takes those made at runtime; nil: none.
	Budgets *billing.Budgets
	// Channels, Upstreams and PriceTable are the tables requests read,
	// which a rebuild replaces.
	Channels   *routing.Set
	Upstreams  *engine.UpstreamTable
	PriceTable *engine.PriceTable
	// Decode reads a channel's stored configuration as the layer above
	// spells it, named name; strict refuses unknown fields.
	Decode func(name string, config []byte, strict bool) (*Channel, error)
	// TypeOf names a channel's adapter, "" when it names none.
	TypeOf func(c *Channel) string
	// Build makes a channel's routing and upstream records as the table
	// would, of its keys, refusing what the table would refuse; it does
	// not change c. The Runtime calls it one at a time.
	Build func(c *Channel, keys []string) (*routing.Channel, *engine.Upstream, error)
	Log   *zap.Logger
}

// Runtime is a configuration's share of the runtime configuration.
type Runtime struct {
	d Deps
	// mu makes one rebuild at a time, and guards built and what Build
	// changes (the Caddy layer's transports map)
	mu    sync.Mutex
	built map[string]*runtimeChannel
	key   *sealed.Key // nil: no secrets_key
	// testMu serializes keeping tests (KeepTest)
	testMu sync.Mutex
	// allowNets and allowHosts are allow_private_upstreams
	allowNets  []netip.Prefix
	allowHosts []string
	// kick asks the worker for a rebuild; stop ends it
	kick chan struct{}
	stop context.CancelFunc
	done chan struct{}
	log  *zap.Logger
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

// New reads the allowed private upstreams; Reload loads the database's
// channels.
func New(d Deps) *Runtime {
	rs := &Runtime{d: d, key: d.Key, kick: make(chan struct{}, 1), log: d.Log}
	for _, v := range d.AllowPrivateUpstreams {
		if p, err := netip.ParsePrefix(v); err == nil {
			rs.allowNets = append(rs.allowNets, p.Masked())
		} else if ip, err := netip.ParseAddr(v); err == nil {
			rs.allowNets = append(rs.allowNets, netip.PrefixFrom(ip, ip.BitLen()))
		} else {
			rs.allowHosts = append(rs.allowHosts, strings.ToLower(v))
		}
	}
	return rs
}

// Key is the secrets_key, nil when there is none.
func (rs *Runtime) Key() *sealed.Key { return rs.key }

// Lock holds off rebuilds and trial builds until Unlock: the Caddy layer
// holds it while it closes what Build shares.
func (rs *Runtime) Lock() { rs.mu.Lock() }

// Unlock ends Lock.
func (rs *Runtime) Unlock() { rs.mu.Unlock() }

// Start runs the worker that rebuilds the tables when another instance
// changed the runtime configuration.
func (rs *Runtime) Start() {
	ctx, cancel := context.WithCancel(context.Background())
	rs.stop, rs.done = cancel, make(chan struct{})
	go func() {
		defer close(rs.done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-rs.kick:
				if err := rs.Reload(ctx); err != nil && ctx.Err() == nil {
					rs.log.Error("applying a change to the channels made at runtime", zap.Error(err))
				}
			}
		}
	}()
}

// Stop ends the worker; a nil Runtime has none.
func (rs *Runtime) Stop() {
	if rs != nil && rs.stop != nil {
		rs.stop()
		<-rs.done
	}
}

// Changed asks for a rebuild; it never blocks (the listener's connection
// calls it).
func (rs *Runtime) Changed() {
	if rs == nil {
		return
	}
	select {
	case rs.kick <- struct{}{}:
	default:
	}
}

// Reload rebuilds the tables from the Caddyfile's channels, prices
// and plans and the database's, and swaps them in. A database channel that
// cannot be loaded now (its keys sealed under another secrets_key) keeps
// the record it had, if any.
func (rs *Runtime) Reload(ctx context.Context) error {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	all, err := rs.d.Store.ListRuntime(ctx, "")
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
	chans := append([]*routing.Channel(nil), rs.d.Static...)
	ups := make(map[string]*engine.Upstream, len(rs.d.StaticUpstreams)+len(items))
	for n, up := range rs.d.StaticUpstreams {
		ups[n] = up
	}
	for _, it := range items {
		if it.Disabled {
			continue
		}
		if _, taken := rs.d.StaticUpstreams[it.Name]; taken || rs.caddyfileChannel(it.Name) != nil {
			rs.log.Warn("a channel made at runtime has the name of a Caddyfile channel, which wins", zap.String("channel", it.Name))
			continue
		}
		stamp := sha256.Sum256(append([]byte(it.Config+"\x00"), it.Secret...))
		rc := rs.built[it.Name]
		if rc == nil || rc.stamp != stamp {
			cc, keys, err := rs.openChannel(it)
			if err == nil {
				var ch *routing.Channel
				var up *engine.Upstream
				if ch, up, err = rs.d.Build(cc, keys); err == nil {
					rc = &runtimeChannel{stamp: stamp, ch: ch, up: up}
				}
			}
			if err != nil {
				// keep what served before, if anything did
				rs.log.Error("a channel made at runtime cannot be loaded", zap.String("channel", it.Name), zap.Error(err))
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
	rs.d.PriceTable.Replace(rs.runtimePrices(prices))
	if rs.d.Budgets != nil {
		rs.d.Budgets.SetRuntimePlans(rs.runtimePlans(plans))
	}
	// upstreams first: a request that plans on the new table finds its records
	rs.d.Upstreams.Replace(ups)
	rs.d.Channels.Replace(chans)
	return nil
}

// caddyfileChannel is the Caddyfile's channel of that name (skipped ones
// included: their name is the Caddyfile's all the same), nil when none.
func (rs *Runtime) caddyfileChannel(name string) *Channel {
	for _, cc := range rs.d.Caddyfile {
		if cc.Name == name {
			return cc
		}
	}
	return nil
}

// openChannel decodes a stored channel and opens its keys.
func (rs *Runtime) openChannel(it *store.RuntimeItem) (*Channel, []string, error) {
	cc, err := rs.d.Decode(it.Name, []byte(it.Config), false)
	if err != nil {
		return nil, nil, fmt.Errorf("its stored configuration: %w", err)
	}
	var keys []string
	if len(it.Secret) > 0 {
		if rs.key == nil {
			return nil, nil, errors.New("its keys are sealed but this configuration has no secrets_key")
		}
		plain, err := rs.key.Open(it.Secret, it.Binding())
		if err != nil {
			return nil, nil, err
		}
		if err := json.Unmarshal(plain, &keys); err != nil {
			return nil, nil, fmt.Errorf("its keys: %w", err)
		}
	}
	return cc, keys, nil
}
