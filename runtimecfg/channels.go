package runtimecfg

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/account/accountapi"
	"github.com/caddy-model-gateway/gateway/engine"
	"github.com/caddy-model-gateway/gateway/routing"
	"github.com/caddy-model-gateway/gateway/store"
)

// The admin API's channels (accountapi.Runtime): listed with the
// Caddyfile's, made, changed and deleted in the database, their keys
// sealed and shown only masked, their tests kept.

// ChannelSetups implements accountapi.Runtime.
func (rs *Runtime) ChannelSetups(ctx context.Context) ([]*accountapi.ChannelSetup, error) {
	var out []*accountapi.ChannelSetup
	for _, cc := range rs.d.Caddyfile {
		s := &accountapi.ChannelSetup{Name: cc.Name, Source: accountapi.SourceCaddyfile, BaseURL: cc.BaseURL,
			Models: cc.Models, ModelMap: cc.ModelMap, Priority: cc.Priority, Weight: max(cc.Weight, 1), Keys: len(cc.Keys)}
		s.Type = rs.d.TypeOf(cc)
		if ch := rs.d.Channels.Channel(cc.Name); ch != nil {
			s.BaseURL = ch.BaseURL
			if len(ch.Keys) > 0 {
				s.KeyPrefix, s.Keys = maskKey(ch.Keys[0]), len(ch.Keys)
			}
		}
		out = append(out, s)
	}
	items, err := rs.d.Store.ListRuntime(ctx, store.RuntimeChannel)
	if err != nil {
		return nil, err
	}
	for _, it := range items {
		out = append(out, rs.setupOf(it))
	}
	return out, nil
}

func (rs *Runtime) setupOf(it *store.RuntimeItem) *accountapi.ChannelSetup {
	s := &accountapi.ChannelSetup{Name: it.Name, Source: accountapi.SourceDatabase, KeyPrefix: it.KeyPrefix,
		Disabled: it.Disabled, Config: json.RawMessage(it.Config)}
	if cc, err := rs.d.Decode(it.Name, []byte(it.Config), false); err == nil {
		s.Type = rs.d.TypeOf(cc)
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
func (rs *Runtime) PutChannel(ctx context.Context, name string, fields map[string]json.RawMessage, create bool) (before, after *accountapi.ChannelSetup, err error) {
	if !channelName.MatchString(name) {
		return nil, nil, refuse("invalid_channel", "a channel's name is 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit: not %q", name)
	}
	if rs.caddyfileChannel(name) != nil {
		return nil, nil, &accountapi.Refusal{Status: http.StatusConflict, Code: "channel_in_caddyfile",
			Msg: fmt.Sprintf("the channel %q is the Caddyfile's: change it there (channels from the Caddyfile are read-only here), or give this one another name", name)}
	}
	merged := map[string]json.RawMessage{}
	var old *store.RuntimeItem
	var oldKeys []string
	if !create {
		items, err := rs.d.Store.ListRuntime(ctx, store.RuntimeChannel)
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
		before = rs.setupOf(old)
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
		if _, oldKeys, err = rs.openChannel(old); err != nil {
			return nil, nil, refuse("secrets_key_mismatch", "channel %q's stored keys cannot be opened (%v): give its keys again", name, err)
		}
		keys = oldKeys
	}
	cfgJSON, err := json.Marshal(merged)
	if err != nil {
		return nil, nil, err
	}
	cc, err := rs.d.Decode(name, cfgJSON, true)
	if err != nil {
		return nil, nil, refuse("invalid_channel", "the channel is not as expected: %v", err)
	}
	if strings.Contains(cc.BaseURL, "{") {
		return nil, nil, refuse("invalid_channel", "base_url %q holds a placeholder: a channel made here is written as it is (placeholders are for the Caddyfile)", cc.BaseURL)
	}
	if len(keys) > 0 && rs.key == nil {
		return nil, nil, refuse("no_secrets_key", "this gateway has no secrets_key, so it does not keep vendor keys in its database: "+
			"set secrets_key {file./path} (or {env.NAME}) in the gateway block of the Caddyfile and reload, or define the channel in the Caddyfile")
	}
	// a trial build checks what the table would refuse, and the URL
	if _, _, err := rs.trialChannel(cc, keys); err != nil {
		return nil, nil, refuse("invalid_channel", "%v", err)
	}
	// the gateway refuses requests for a model without a price: a channel
	// serving one would look in service and answer nobody
	for _, m := range append(append([]string(nil), cc.Models...), slices.Collect(maps.Keys(cc.ModelMap))...) {
		if _, ok := rs.d.PriceTable.Get(m); !ok {
			return nil, nil, refuse("model_without_price", "the model %q has no price, and the gateway refuses requests for a model without one: "+
				"give it a price first (POST /api/admin/prices, the prices page, or the Caddyfile; {\"free\": true} for a free model)", m)
		}
	}
	if err := rs.checkBaseURL(ctx, cc.BaseURL); err != nil {
		return nil, nil, refuse("base_url_not_allowed", "%v", err)
	}
	it := &store.RuntimeItem{Kind: store.RuntimeChannel, Name: name, Config: string(cfgJSON), KeyPrefix: keyPrefix(keys), Disabled: disabled}
	if len(keys) > 0 {
		plain, _ := json.Marshal(keys)
		if it.Secret, err = rs.key.Seal(plain, it.Binding()); err != nil {
			return nil, nil, err
		}
	}
	if err := rs.d.Store.PutRuntime(ctx, it, !create); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return nil, nil, &accountapi.Refusal{Status: http.StatusConflict, Code: "channel_exists",
				Msg: fmt.Sprintf("there is a channel %q already: change it (PATCH /api/admin/channels/%s) or choose another name", name, name)}
		}
		if errors.Is(err, store.ErrNotFound) {
			return nil, nil, &accountapi.Refusal{Status: http.StatusNotFound, Code: "not_found", Msg: fmt.Sprintf("there is no channel %q in the database", name)}
		}
		return nil, nil, err
	}
	if err := rs.Reload(context.WithoutCancel(ctx)); err != nil {
		rs.log.Error("applying a change to the channels made at runtime", zap.Error(err))
	}
	after = rs.setupOf(it)
	if old != nil && old.Test != "" {
		after.LastTest = json.RawMessage(old.Test)
	}
	return before, after, nil
}

// trialChannel builds cc as the table would, without keeping it.
func (rs *Runtime) trialChannel(cc *Channel, keys []string) (*routing.Channel, *engine.Upstream, error) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.d.Build(cc, keys)
}

// DeleteChannel implements accountapi.Runtime.
func (rs *Runtime) DeleteChannel(ctx context.Context, name string) (*accountapi.ChannelSetup, error) {
	if rs.caddyfileChannel(name) != nil {
		return nil, &accountapi.Refusal{Status: http.StatusConflict, Code: "channel_in_caddyfile",
			Msg: fmt.Sprintf("the channel %q is the Caddyfile's: remove it there (channels from the Caddyfile are read-only here)", name)}
	}
	items, err := rs.d.Store.ListRuntime(ctx, store.RuntimeChannel)
	if err != nil {
		return nil, err
	}
	var before *accountapi.ChannelSetup
	for _, it := range items {
		if it.Name == name {
			before = rs.setupOf(it)
		}
	}
	if err := rs.d.Store.DeleteRuntime(ctx, store.RuntimeChannel, name); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, &accountapi.Refusal{Status: http.StatusNotFound, Code: "not_found", Msg: fmt.Sprintf("there is no channel %q in the database", name)}
		}
		return nil, err
	}
	if err := rs.Reload(context.WithoutCancel(ctx)); err != nil {
		rs.log.Error("applying a change to the channels made at runtime", zap.Error(err))
	}
	return before, nil
}

// KeepTest keeps a database channel's test on its row, beside its other
// models' last tests, for every instance's console; a Caddyfile channel
// has no row, and its tests are answered only.
func (rs *Runtime) KeepTest(ctx context.Context, t *accountapi.ChannelTest) {
	if rs == nil || rs.caddyfileChannel(t.Channel) != nil {
		return
	}
	// one read-modify-write at a time: "test all" tests a channel's models at once
	rs.testMu.Lock()
	defer rs.testMu.Unlock()
	items, err := rs.d.Store.ListRuntime(ctx, store.RuntimeChannel)
	if err != nil {
		rs.log.Warn("keeping a channel's test", zap.String("channel", t.Channel), zap.Error(err))
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
		if err := rs.d.Store.SetRuntimeTest(ctx, store.RuntimeChannel, t.Channel, string(raw)); err != nil && !errors.Is(err, store.ErrNotFound) {
			rs.log.Warn("keeping a channel's test", zap.String("channel", t.Channel), zap.Error(err))
		}
	}
}

// Interface guard.
var _ accountapi.Runtime = (*Runtime)(nil)
