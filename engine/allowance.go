package engine

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/billing"
)

// Allowance is what price-changing passthrough a channel relays: its
// allow_fields and allow_betas.
type Allowance struct {
	Fields, Betas []string
}

// PricedFields are the fields and betas the request sets that prov's
// vendor prices beyond the model's price (adapters.PricedFields); they
// depend on the vendor, not the channel, so a request asks once per vendor.
func PricedFields(prov adapters.Provider, req *adapters.Request) (fields, betas []string) {
	if pf, ok := prov.(adapters.PricedFields); ok {
		return pf.PricedFields(req)
	}
	return nil, nil
}

// PricedBy leaves out of fields those price prices itself: a 1-hour cache
// write where the price has cache_write_1h.
func PricedBy(price *billing.Price, fields []string) []string {
	if price == nil || price.CacheWrite1h == nil || !slices.Contains(fields, adapters.FieldCacheTTL) {
		return fields
	}
	return slices.DeleteFunc(slices.Clone(fields), func(f string) bool { return f == adapters.FieldCacheTTL })
}

// Check refuses, with a 400 naming it, a price-changing field or beta (see
// PricedFields) the channel does not allow. The vendor names them; the
// gateway names no vendor.
func (al Allowance) Check(channel, model string, fields, betas []string) *adapters.Error {
	for _, f := range fields {
		if !allows(al.Fields, f) {
			return &adapters.Error{Status: http.StatusBadRequest, Type: adapters.ErrInvalidRequest, Code: "field_not_allowed", Param: f,
				Message: fmt.Sprintf("the request sets %s, which the vendor prices beyond this model's price, and this gateway does not relay it for model %s: remove it, or ask the operator to allow it (allow_fields %s on channel %q)", f, model, f, channel)}
		}
	}
	for _, b := range betas {
		if !allows(al.Betas, b) {
			return &adapters.Error{Status: http.StatusBadRequest, Type: adapters.ErrInvalidRequest, Code: "beta_not_allowed", Param: b,
				Message: fmt.Sprintf("the request asks for the beta %s, which the vendor prices beyond this model's price, and this gateway does not relay it for model %s: remove it, or ask the operator to allow it (allow_betas %s on channel %q)", b, model, b, channel)}
		}
	}
	return nil
}

// allows matches a name against a list, where "tools" allows every
// "tools.<x>" and a trailing * a prefix.
func allows(list []string, name string) bool {
	return slices.ContainsFunc(list, func(a string) bool {
		if a == name || strings.HasPrefix(name, a+".") {
			return true
		}
		p, ok := strings.CutSuffix(a, "*")
		return ok && strings.HasPrefix(name, p)
	})
}
