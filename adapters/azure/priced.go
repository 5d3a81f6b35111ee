package azure

import "github.com/caddy-model-gateway/gateway/adapters"

// PricedFields implements adapters.PricedFields: Azure takes OpenAI's
// bodies, and prices the same fields beyond the deployment's rate.
func (a Adapter) PricedFields(req *adapters.Request) (fields, betas []string) {
	return a.wire.PricedFields(req)
}

var _ adapters.PricedFields = Adapter{}
