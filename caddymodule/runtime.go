package caddymodule

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/account/accountapi"
	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/engine"
	"github.com/caddy-model-gateway/gateway/internal/sealed"
	"github.com/caddy-model-gateway/gateway/routing"
	"github.com/caddy-model-gateway/gateway/store"
)

// Channels made at runtime, in the console or the admin API, live in the
// database (store.RuntimeStore) beside the Caddyfile's. The request path
// reads one routing table and one upstream table, each behind an atomic
// pointer; a change rebuilds them off the request path and swaps them in:
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

// reloadRuntime rebuilds the tables from the Caddyfile's channels and the
// database's, and swaps them in.
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

// ChannelSetups implements accountapi.Runtime.
func (a *App) ChannelSetups(ctx context.Context) ([]*accountapi.ChannelSetup, error) {
	var out []*accountapi.ChannelSetup
	for _, cc := range a.Channels {
		s := &accountapi.ChannelSetup{Name: cc.Name, Source: accountapi.SourceCaddyfile, BaseURL: cc.BaseURL,
			Models: cc.Models, ModelMap: cc.ModelMap, Priority: cc.Priority, Weight: max(cc.Weight, 1), Keys: len(cc.Keys)}
		s.Type, _ = cc.adapterType()
		if ch := a.channels.Channel(cc.Name); ch != nil {
			s.BaseURL = ch.BaseURL
			if len(ch.Keys) > 0 {
				s.KeyPrefix, s.Keys = maskKey(ch.Keys[0]), len(ch.Keys)
			}
		}
		out = append(out, s)
	}
	items, err := a.db.store.ListRuntime(ctx, store.RuntimeChannel)
	if err != nil {
		return nil, err
	}
	for _, it := range items {
		out = append(out, setupOf(it))
	}
	return out, nil
}

func setupOf(it *store.RuntimeItem) *accountapi.ChannelSetup {
	s := &accountapi.ChannelSetup{Name: it.Name, Source: accountapi.SourceDatabase, KeyPrefix: it.KeyPrefix,
		Disabled: it.Disabled, Config: json.RawMessage(it.Config)}
	var cc ChannelConfig
	if json.Unmarshal([]byte(it.Config), &cc) == nil {
		s.Type, _ = cc.adapterType()
		s.BaseURL, s.Models, s.ModelMap, s.Priority, s.Weight = cc.BaseURL, cc.Models, cc.ModelMap, cc.Priority, max(cc.Weight, 1)
	}
	if it.KeyPrefix != "" {
		s.Keys = 1
		if i := strings.LastIndex(it.KeyPrefix, "… +"); i >= 0 {
			more, _ := strconv.Atoi(it.KeyPrefix[i+len("… +"):])
			s.Keys += more
		}
	}
	if it.Test != "" {
		s.LastTest = json.RawMessage(it.Test)
	}
	t := it.UpdatedAt
	s.UpdatedAt = &t
	return s
}

// maskKey is what may be shown of a key: its start, never more than a
// third of it.
func maskKey(k string) string {
	n := min(6, len(k)/3)
	return k[:n] + "…"
}

// keyPrefix is what a channel's keys show: the first masked, and how many
// more there are.
func keyPrefix(keys []string) string {
	if len(keys) == 0 {
		return ""
	}
	if len(keys) == 1 {
		return maskKey(keys[0])
	}
	return fmt.Sprintf("%s +%d", maskKey(keys[0]), len(keys)-1)
}

func refuse(code, format string, args ...any) error {
	return &accountapi.Refusal{Status: http.StatusBadRequest, Code: code, Msg: fmt.Sprintf(format, args...)}
}

// PutChannel implements accountapi.Runtime.
func (a *App) PutChannel(ctx context.Context, name string, fields map[string]json.RawMessage, create bool) (before, after *accountapi.ChannelSetup, err error) {
	if !channelName.MatchString(name) {
		return nil, nil, refuse("invalid_channel", "a channel's name is 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit: not %q", name)
	}
	if a.caddyfileChannel(name) != nil {
		return nil, nil, &accountapi.Refusal{Status: http.StatusConflict, Code: "channel_in_caddyfile",
			Msg: fmt.Sprintf("the channel %q is the Caddyfile's: change it there (channels from the Caddyfile are read-only here), or give this one another name", name)}
	}
	merged := map[string]json.RawMessage{}
	var old *store.RuntimeItem
	var oldKeys []string
	if !create {
		items, err := a.db.store.ListRuntime(ctx, store.RuntimeChannel)
		if err != nil {
			return nil, nil, err
		}
		for _, it := range items {
			if it.Name == name {
				old = it
			}
		}
		if old == nil {
			return nil, nil, &accountapi.Refusal{Status: http.StatusNotFound, Code: "not_found", Msg: fmt.Sprintf("there is no channel %q in the database", name)}
		}
		before = setupOf(old)
		if err := json.Unmarshal([]byte(old.Config), &merged); err != nil {
			return nil, nil, fmt.Errorf("channel %q's stored configuration: %w", name, err)
		}
	}
	disabled := old != nil && old.Disabled
	var keys []string
	keysGiven := false
	for k, v := range fields {
		switch k {
		case "name":
			var n string
			if json.Unmarshal(v, &n) != nil || n != name {
				return nil, nil, refuse("invalid_channel", "a channel's name cannot be changed: make another channel and delete this one")
			}
		case "disabled":
			if json.Unmarshal(v, &disabled) != nil {
				return nil, nil, refuse("invalid_channel", "\"disabled\" is true or false")
			}
		case "keys":
			if err := json.Unmarshal(v, &keys); err != nil {
				return nil, nil, refuse("invalid_channel", "\"keys\" is a list of strings")
			}
			keysGiven = true
		case "version":
			return nil, nil, refuse("invalid_channel", "\"version\" is an option of the channel's adapter: \"adapter\": {\"type\": ..., \"version\": ...}")
		default:
			if bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
				delete(merged, k)
			} else {
				merged[k] = v
			}
		}
	}
	// the short and long forms of the adapter replace each other
	if _, ok := fields["type"]; ok {
		delete(merged, "adapter")
	} else if _, ok := fields["adapter"]; ok {
		delete(merged, "type")
	}
	for i, k := range keys {
		keys[i] = strings.TrimSpace(k)
		if keys[i] == "" {
			return nil, nil, refuse("invalid_channel", "key %d is empty", i+1)
		}
	}
	if len(keys) > maxRuntimeKeys {
		return nil, nil, refuse("invalid_channel", "a channel takes at most %d keys, not %d", maxRuntimeKeys, len(keys))
	}
	if !keysGiven && old != nil {
		if _, oldKeys, err = a.openChannel(old); err != nil {
			return nil, nil, refuse("secrets_key_mismatch", "channel %q's stored keys cannot be opened (%v): give its keys again", name, err)
		}
		keys = oldKeys
	}
	cfgJSON, err := json.Marshal(merged)
	if err != nil {
		return nil, nil, err
	}
	cc := &ChannelConfig{}
	dec := json.NewDecoder(bytes.NewReader(cfgJSON))
	dec.DisallowUnknownFields()
	if err := dec.Decode(cc); err != nil {
		return nil, nil, refuse("invalid_channel", "the channel is not as expected: %v", err)
	}
	cc.Name = name
	if strings.Contains(cc.BaseURL, "{") {
		return nil, nil, refuse("invalid_channel", "base_url %q holds a placeholder: a channel made here is written as it is (placeholders are for the Caddyfile)", cc.BaseURL)
	}
	if len(keys) > 0 && a.runtime.key == nil {
		return nil, nil, refuse("no_secrets_key", "this gateway has no secrets_key, so it does not keep vendor keys in its database: "+
			"set secrets_key {file./path} (or {env.NAME}) in the gateway block of the Caddyfile and reload, or define the channel in the Caddyfile")
	}
	// a trial build checks what the table would refuse, and the URL
	if _, _, err := a.trialChannel(cc, keys); err != nil {
		return nil, nil, refuse("invalid_channel", "%v", err)
	}
	// the gateway refuses requests for a model without a price: a channel
	// serving one would look in service and answer nobody
	for _, m := range append(append([]string(nil), cc.Models...), mapKeys(cc.ModelMap)...) {
		if _, ok := a.priceTable.Get(m); !ok {
			return nil, nil, refuse("model_without_price", "the model %q has no price, and the gateway refuses requests for a model without one: "+
				"give it a price first (POST /api/admin/prices, the prices page, or the Caddyfile; {\"free\": true} for a free model)", m)
		}
	}
	if err := a.runtime.checkBaseURL(ctx, cc.BaseURL); err != nil {
		return nil, nil, refuse("base_url_not_allowed", "%v", err)
	}
	it := &store.RuntimeItem{Kind: store.RuntimeChannel, Name: name, Config: string(cfgJSON), KeyPrefix: keyPrefix(keys), Disabled: disabled}
	if len(keys) > 0 {
		plain, _ := json.Marshal(keys)
		if it.Secret, err = a.runtime.key.Seal(plain, it.Binding()); err != nil {
			return nil, nil, err
		}
	}
	if err := a.db.store.PutRuntime(ctx, it, !create); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return nil, nil, &accountapi.Refusal{Status: http.StatusConflict, Code: "channel_exists",
				Msg: fmt.Sprintf("there is a channel %q already: change it (PATCH /api/admin/channels/%s) or choose another name", name, name)}
		}
		if errors.Is(err, store.ErrNotFound) {
			return nil, nil, &accountapi.Refusal{Status: http.StatusNotFound, Code: "not_found", Msg: fmt.Sprintf("there is no channel %q in the database", name)}
		}
		return nil, nil, err
	}
	if err := a.reloadRuntime(context.WithoutCancel(ctx)); err != nil {
		a.log.Error("applying a change to the channels made at runtime", zap.Error(err))
	}
	after = setupOf(it)
	if old != nil && old.Test != "" {
		after.LastTest = json.RawMessage(old.Test)
	}
	return before, after, nil
}

// trialChannel builds cc as the table would, without keeping it.
func (a *App) trialChannel(cc *ChannelConfig, keys []string) (*routing.Channel, *engine.Upstream, error) {
	a.runtime.mu.Lock()
	defer a.runtime.mu.Unlock()
	c := *cc
	return a.buildChannel(a.runtime.ctx, &c, keys, cc.BaseURL, true)
}

// DeleteChannel implements accountapi.Runtime.
func (a *App) DeleteChannel(ctx context.Context, name string) (*accountapi.ChannelSetup, error) {
	if a.caddyfileChannel(name) != nil {
		return nil, &accountapi.Refusal{Status: http.StatusConflict, Code: "channel_in_caddyfile",
			Msg: fmt.Sprintf("the channel %q is the Caddyfile's: remove it there (channels from the Caddyfile are read-only here)", name)}
	}
	items, err := a.db.store.ListRuntime(ctx, store.RuntimeChannel)
	if err != nil {
		return nil, err
	}
	var before *accountapi.ChannelSetup
	for _, it := range items {
		if it.Name == name {
			before = setupOf(it)
		}
	}
	if err := a.db.store.DeleteRuntime(ctx, store.RuntimeChannel, name); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, &accountapi.Refusal{Status: http.StatusNotFound, Code: "not_found", Msg: fmt.Sprintf("there is no channel %q in the database", name)}
		}
		return nil, err
	}
	if err := a.reloadRuntime(context.WithoutCancel(ctx)); err != nil {
		a.log.Error("applying a change to the channels made at runtime", zap.Error(err))
	}
	return before, nil
}

// checkBaseURL refuses a base URL whose host is not public (loopback,
// private, link-local: what the image fetch policy refuses) unless
// allow_private_upstreams names it. A name is resolved now; what it
// resolves to later is the operator's DNS.
func (rs *runtimeState) checkBaseURL(ctx context.Context, raw string) error {
	if raw == "" {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return fmt.Errorf("base_url %q is not an http:// or https:// address", raw)
	}
	if u.User != nil {
		return fmt.Errorf("base_url must not hold credentials: give them as the channel's keys")
	}
	host := strings.ToLower(u.Hostname())
	for _, h := range rs.allowHosts {
		if h == host {
			return nil
		}
	}
	var addrs []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{ip}
	} else {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		addrs, err = net.DefaultResolver.LookupNetIP(rctx, "ip", host)
		cancel()
		if err != nil {
			return fmt.Errorf("base_url's host %q does not resolve: %v", host, err)
		}
	}
	for _, ip := range addrs {
		ip = ip.Unmap()
		allowed := false
		for _, p := range rs.allowNets {
			if p.Contains(ip) {
				allowed = true
			}
		}
		if allowed {
			continue
		}
		if err := adapters.CheckPublicAddr(ip); err != nil {
			return fmt.Errorf("base_url's host %s is not a public address (%v): the gateway's operator allows private upstreams with allow_private_upstreams in the Caddyfile", host, err)
		}
	}
	return nil
}

// Interface guard.
var _ accountapi.Runtime = (*App)(nil)

// keepTest keeps a database channel's test on its row, beside its other
// models' last tests, for every instance's console; a Caddyfile channel
// has no row, and its tests are answered only.
func (a *App) keepTest(ctx context.Context, t *accountapi.ChannelTest) {
	if a.runtime == nil || a.caddyfileChannel(t.Channel) != nil {
		return
	}
	// one read-modify-write at a time: "test all" tests a channel's models at once
	a.runtime.testMu.Lock()
	defer a.runtime.testMu.Unlock()
	items, err := a.db.store.ListRuntime(ctx, store.RuntimeChannel)
	if err != nil {
		a.log.Warn("keeping a channel's test", zap.String("channel", t.Channel), zap.Error(err))
		return
	}
	for _, it := range items {
		if it.Name != t.Channel {
			continue
		}
		var kept []*accountapi.ChannelTest
		_ = json.Unmarshal([]byte(it.Test), &kept)
		out := []*accountapi.ChannelTest{t}
		for _, k := range kept {
			if k != nil && k.Model != t.Model {
				out = append(out, k)
			}
		}
		raw, _ := json.Marshal(out)
		if err := a.db.store.SetRuntimeTest(ctx, store.RuntimeChannel, t.Channel, string(raw)); err != nil && !errors.Is(err, store.ErrNotFound) {
			a.log.Warn("keeping a channel's test", zap.String("channel", t.Channel), zap.Error(err))
		}
	}
}
