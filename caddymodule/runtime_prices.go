package caddymodule

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
func (a *App) runtimePrices(items []*store.RuntimeItem) map[string]*billing.Price {
	out := make(map[string]*billing.Price, len(a.prices)+len(items))
	for _, it := range items {
		if _, taken := a.prices[it.Name]; taken || it.Disabled {
			continue
		}
		p := &billing.Price{}
		if err := json.Unmarshal([]byte(it.Config), p); err != nil {
			a.log.Error("a price made at runtime cannot be read", zap.String("model", it.Name), zap.Error(err))
			continue
		}
		out[it.Name] = p
	}
	for m, p := range a.prices {
		out[m] = p
	}
	return out
}

// PriceSetups implements accountapi.Runtime.
func (a *App) PriceSetups(ctx context.Context) ([]*accountapi.PriceSetup, error) {
	var out []*accountapi.PriceSetup
	models := make([]string, 0, len(a.prices))
	for m := range a.prices {
		models = append(models, m)
	}
	sort.Strings(models)
	for _, m := range models {
		raw, err := json.Marshal(a.prices[m])
		if err != nil {
			return nil, err
		}
		out = append(out, &accountapi.PriceSetup{Model: m, Source: accountapi.SourceCaddyfile, Price: raw})
	}
	items, err := a.db.store.ListRuntime(ctx, store.RuntimePrice)
	if err != nil {
		return nil, err
	}
	for _, it := range items {
		out = append(out, priceSetupOf(it))
	}
	return out, nil
}

func priceSetupOf(it *store.RuntimeItem) *accountapi.PriceSetup {
	t := it.UpdatedAt
	return &accountapi.PriceSetup{Model: it.Name, Source: accountapi.SourceDatabase, Price: json.RawMessage(it.Config), UpdatedAt: &t}
}

// PutPrice implements accountapi.Runtime.
func (a *App) PutPrice(ctx context.Context, model string, raw json.RawMessage, create bool) (before, after *accountapi.PriceSetup, err error) {
	if model == "" || len(model) > maxModelName {
		return nil, nil, refuse("invalid_price", "give the model its price is for: \"model\", at most %d characters", maxModelName)
	}
	if _, ok := a.prices[model]; ok {
		return nil, nil, &accountapi.Refusal{Status: http.StatusConflict, Code: "price_in_caddyfile",
			Msg: fmt.Sprintf("the price of %q is the Caddyfile's: change it there (prices from the Caddyfile are read-only here)", model)}
	}
	if _, err := checkPrice(raw); err != nil {
		return nil, nil, refuse("invalid_price", "the price of %q: %v", model, err)
	}
	if !create {
		items, err := a.db.store.ListRuntime(ctx, store.RuntimePrice)
		if err != nil {
			return nil, nil, err
		}
		for _, it := range items {
			if it.Name == model {
				before = priceSetupOf(it)
			}
		}
	}
	compact := &bytes.Buffer{}
	if err := json.Compact(compact, raw); err != nil {
		return nil, nil, refuse("invalid_price", "the price of %q is not JSON: %v", model, err)
	}
	it := &store.RuntimeItem{Kind: store.RuntimePrice, Name: model, Config: compact.String()}
	if err := a.db.store.PutRuntime(ctx, it, !create); err != nil {
		switch {
		case errors.Is(err, store.ErrConflict):
			return nil, nil, &accountapi.Refusal{Status: http.StatusConflict, Code: "price_exists",
				Msg: fmt.Sprintf("%q has a price already: change it (PATCH /api/admin/prices/%s)", model, model)}
		case errors.Is(err, store.ErrNotFound):
			return nil, nil, &accountapi.Refusal{Status: http.StatusNotFound, Code: "not_found", Msg: fmt.Sprintf("there is no price of %q in the database", model)}
		}
		return nil, nil, err
	}
	if err := a.reloadRuntime(ctx); err != nil {
		a.log.Error("applying a change to the prices made at runtime", zap.Error(err))
	}
	return before, priceSetupOf(it), nil
}

// DeletePrice implements accountapi.Runtime.
func (a *App) DeletePrice(ctx context.Context, model string) (*accountapi.PriceSetup, error) {
	if _, ok := a.prices[model]; ok {
		return nil, &accountapi.Refusal{Status: http.StatusConflict, Code: "price_in_caddyfile",
			Msg: fmt.Sprintf("the price of %q is the Caddyfile's: remove it there (prices from the Caddyfile are read-only here)", model)}
	}
	items, err := a.db.store.ListRuntime(ctx, store.RuntimePrice)
	if err != nil {
		return nil, err
	}
	var before *accountapi.PriceSetup
	for _, it := range items {
		if it.Name == model {
			before = priceSetupOf(it)
		}
	}
	if err := a.db.store.DeleteRuntime(ctx, store.RuntimePrice, model); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, &accountapi.Refusal{Status: http.StatusNotFound, Code: "not_found", Msg: fmt.Sprintf("there is no price of %q in the database", model)}
		}
		return nil, err
	}
	if err := a.reloadRuntime(ctx); err != nil {
		a.log.Error("applying a change to the prices made at runtime", zap.Error(err))
	}
	return before, nil
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
