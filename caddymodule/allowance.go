package caddymodule

import (
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// allowance is what price-changing passthrough a channel relays.
type allowance struct {
	fields, betas []string
}

func newAllowance(cc *ChannelConfig) allowance {
	return allowance{fields: cc.AllowFields, betas: cc.AllowBetas}
}

// check refuses, with a 400 naming it, a price-changing field or beta the
// channel's vendor would bill beyond the model's price and the channel does
// not allow. The vendor names them (adapters.PricedFields); the gateway
// names no vendor.
func (al allowance) check(channel string, prov adapters.Provider, req *adapters.Request) *adapters.Error {
	pf, ok := prov.(adapters.PricedFields)
	if !ok {
		return nil
	}
	fields, betas := pf.PricedFields(req)
	for _, f := range fields {
		if !allows(al.fields, f) {
			return &adapters.Error{Status: http.StatusBadRequest, Type: adapters.ErrInvalidRequest, Code: "field_not_allowed", Param: f,
				Message: fmt.Sprintf("the request sets %s, which the vendor prices beyond this model's price, and this gateway does not relay it for model %s: remove it, or ask the operator to allow it (allow_fields %s on channel %q)", f, req.Model, f, channel)}
		}
	}
	for _, b := range betas {
		if !allows(al.betas, b) {
			return &adapters.Error{Status: http.StatusBadRequest, Type: adapters.ErrInvalidRequest, Code: "beta_not_allowed", Param: b,
				Message: fmt.Sprintf("the request asks for the beta %s, which the vendor prices beyond this model's price, and this gateway does not relay it for model %s: remove it, or ask the operator to allow it (allow_betas %s on channel %q)", b, req.Model, b, channel)}
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
