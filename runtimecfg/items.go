package runtimecfg

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"

	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/account/accountapi"
	"github.com/caddy-model-gateway/gateway/billing"
	"github.com/caddy-model-gateway/gateway/store"
)

// Prices made at runtime are stored as the JSON of billing's price type,
// as given: a field the type gains later (tiers, batch prices) flows
// through without a schema change. They join the Caddyfile's in the price
// table the request path reads (engine.PriceTable), swapped whole.

// maxModelName bounds a priced model's name.
const maxModelName = 128

// runtimePrices is the price table of the Caddyfile's prices and items,
// the Caddyfile's winning a name both have.
func (rs *Runtime) runtimePrices(items []*store.RuntimeItem) map[string]*billing.Price {
	out := make(map[string]*billing.Price, len(rs.d.Prices)+len(items))
	for _, it := range items {
		if _, taken := rs.d.Prices[it.Name]; taken || it.Disabled {
			continue
		}
		p := &billing.Price{}
		if err := json.Unmarshal([]byte(it.Config), p); err != nil {
			rs.log.Error("a price made at runtime cannot be read", zap.String("model", it.Name), zap.Error(err))
			continue
		}
		if err := p.CheckTiers(); err != nil {
			rs.log.Error("a price made at runtime has bad tiers", zap.String("model", it.Name), zap.Error(err))
			continue
		}
		out[it.Name] = p
	}
	for m, p := range rs.d.Prices {
		out[m] = p
	}
	return out
}

// Items implements accountapi.Runtime.
func (rs *Runtime) Items(ctx context.Context, kind string) ([]*accountapi.ItemSetup, error) {
	var out []*accountapi.ItemSetup
	static := rs.staticItems(kind)
	names := make([]string, 0, len(static))
	for n := range static {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		raw, err := json.Marshal(static[n])
		if err != nil {
			return nil, err
		}
		out = append(out, &accountapi.ItemSetup{Kind: kind, Name: n, Source: accountapi.SourceCaddyfile, Value: raw})
	}
	items, err := rs.d.Store.ListRuntime(ctx, kind)
	if err != nil {
		return nil, err
	}
	for _, it := range items {
		out = append(out, itemSetupOf(it))
	}
	return out, nil
}

// staticItems are the Caddyfile's prices or plans, by name.
func (rs *Runtime) staticItems(kind string) map[string]any {
	out := map[string]any{}
	switch kind {
	case store.RuntimePrice:
		for m, p := range rs.d.Prices {
			out[m] = p
		}
	case store.RuntimePlan:
		for n, p := range rs.d.Plans {
			out[n] = p
		}
	}
	return out
}

func itemSetupOf(it *store.RuntimeItem) *accountapi.ItemSetup {
	t := it.UpdatedAt
	return &accountapi.ItemSetup{Kind: it.Kind, Name: it.Name, Source: accountapi.SourceDatabase, Value: json.RawMessage(it.Config), UpdatedAt: &t}
}

// PutItem implements accountapi.Runtime.
func (rs *Runtime) PutItem(ctx context.Context, kind, name string, raw json.RawMessage, create bool) (before, after *accountapi.ItemSetup, err error) {
	what := map[string]string{store.RuntimePrice: "price", store.RuntimePlan: "plan"}[kind]
	if name == "" || len(name) > maxModelName {
		return nil, nil, refuse("invalid_"+what, "give the %s a name of at most %d characters", what, maxModelName)
	}
	if _, ok := rs.staticItems(kind)[name]; ok {
		return nil, nil, &accountapi.Refusal{Status: http.StatusConflict, Code: what + "_in_caddyfile",
			Msg: fmt.Sprintf("the %s %q is the Caddyfile's: change it there (the Caddyfile's are read-only here)", what, name)}
	}
	switch kind {
	case store.RuntimePrice:
		if _, err := checkPrice(raw); err != nil {
			return nil, nil, refuse("invalid_price", "the price of %q: %v", name, err)
		}
	case store.RuntimePlan:
		if _, err := rs.checkPlan(name, raw); err != nil {
			return nil, nil, refuse("invalid_plan", "%v", err)
		}
	}
	if !create {
		items, err := rs.d.Store.ListRuntime(ctx, kind)
		if err != nil {
			return nil, nil, err
		}
		for _, it := range items {
			if it.Name == name {
				before = itemSetupOf(it)
			}
		}
	}
	compact := &bytes.Buffer{}
	if err := json.Compact(compact, raw); err != nil {
		return nil, nil, refuse("invalid_"+what, "the %s %q is not JSON: %v", what, name, err)
	}
	it := &store.RuntimeItem{Kind: kind, Name: name, Config: compact.String()}
	if err := rs.d.Store.PutRuntime(ctx, it, !create); err != nil {
		switch {
		case errors.Is(err, store.ErrConflict):
			return nil, nil, &accountapi.Refusal{Status: http.StatusConflict, Code: what + "_exists",
				Msg: fmt.Sprintf("there is a %s %q already: change it (PATCH) or choose another name", what, name)}
		case errors.Is(err, store.ErrNotFound):
			return nil, nil, &accountapi.Refusal{Status: http.StatusNotFound, Code: "not_found", Msg: fmt.Sprintf("there is no %s %q in the database", what, name)}
		}
		return nil, nil, err
	}
	if err := rs.Reload(context.WithoutCancel(ctx)); err != nil {
		rs.log.Error("applying a change to the runtime configuration", zap.Error(err))
	}
	return before, itemSetupOf(it), nil
}

// DeleteItem implements accountapi.Runtime.
func (rs *Runtime) DeleteItem(ctx context.Context, kind, name string) (*accountapi.ItemSetup, error) {
	what := map[string]string{store.RuntimePrice: "price", store.RuntimePlan: "plan"}[kind]
	if _, ok := rs.staticItems(kind)[name]; ok {
		return nil, &accountapi.Refusal{Status: http.StatusConflict, Code: what + "_in_caddyfile",
			Msg: fmt.Sprintf("the %s %q is the Caddyfile's: remove it there (the Caddyfile's are read-only here)", what, name)}
	}
	items, err := rs.d.Store.ListRuntime(ctx, kind)
	if err != nil {
		return nil, err
	}
	var before *accountapi.ItemSetup
	for _, it := range items {
		if it.Name == name {
			before = itemSetupOf(it)
		}
	}
	if err := rs.d.Store.DeleteRuntime(ctx, kind, name); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, &accountapi.Refusal{Status: http.StatusNotFound, Code: "not_found", Msg: fmt.Sprintf("there is no %s %q in the database", what, name)}
		}
		return nil, err
	}
	if err := rs.Reload(context.WithoutCancel(ctx)); err != nil {
		rs.log.Error("applying a change to the runtime configuration", zap.Error(err))
	}
	return before, nil
}

// checkPlan reads a plan as the Caddyfile's plans are configured,
// refusing unknown fields, and builds it as the gateway would (its
// windows, its model groups known, its limits).
func (rs *Runtime) checkPlan(name string, raw json.RawMessage) (*billing.Plan, error) {
	pc := &billing.PlanConfig{}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(pc); err != nil {
		return nil, fmt.Errorf("plan %s is not as expected: give \"plan\": {\"windows\": {\"daily\": \"5\"}, \"models\": [...], \"rpm\": ...}: %v", name, err)
	}
	return rs.d.Budgets.BuildPlan(name, pc)
}

// runtimePlans builds the plans made at runtime; one that no longer
// builds (a model group gone from the Caddyfile) is left out, logged.
func (rs *Runtime) runtimePlans(items []*store.RuntimeItem) map[string]*billing.Plan {
	out := map[string]*billing.Plan{}
	for _, it := range items {
		if it.Disabled {
			continue
		}
		pl, err := rs.checkPlan(it.Name, json.RawMessage(it.Config))
		if err != nil {
			rs.log.Error("a plan made at runtime cannot be used", zap.String("plan", it.Name), zap.Error(err))
			continue
		}
		out[it.Name] = pl
	}
	return out
}

// checkPrice reads a price as billing's type, refusing unknown fields and
// negative amounts anywhere in it (so fields the type gains are checked
// too), and what the Caddyfile refuses.
func checkPrice(raw json.RawMessage) (*billing.Price, error) {
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil, errors.New("give it as \"price\": {\"input\": ..., \"output\": ...} in quota units (1,000,000 = 1 USD; token prices per million tokens), or {\"free\": true}")
	}
	p := &billing.Price{}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(p); err != nil {
		return nil, fmt.Errorf("not a price: %v", err)
	}
	var tree any
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	if err := d.Decode(&tree); err != nil {
		return nil, err
	}
	if path := negative(tree, ""); path != "" {
		return nil, fmt.Errorf("%s must not be negative", path)
	}
	// tiers as the Caddyfile's "above" blocks are checked: ascending
	// positive thresholds, each with its input and output
	if err := p.CheckTiers(); err != nil {
		return nil, err
	}
	if p.VideoSecond > 0 && p.MaxSeconds == 0 {
		return nil, errors.New("video_second needs max_seconds, the longest video the vendor makes: a task that names no duration reserves it")
	}
	if raw, _ := json.Marshal(p); string(raw) == "{}" {
		return nil, errors.New("it charges nothing: give its terms, or {\"free\": true} for a model that is free")
	}
	return p, nil
}

// negative is the path of the first negative number in v, "" for none.
func negative(v any, path string) string {
	switch x := v.(type) {
	case json.Number:
		if len(x) > 0 && x[0] == '-' {
			return path
		}
	case map[string]any:
		for k, e := range x {
			if p := negative(e, join(path, k)); p != "" {
				return p
			}
		}
	case []any:
		for i, e := range x {
			if p := negative(e, fmt.Sprintf("%s[%d]", path, i)); p != "" {
				return p
			}
		}
	}
	return ""
}

func join(path, k string) string {
	if path == "" {
		return k
	}
	return path + "." + k
}
