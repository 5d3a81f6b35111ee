package openaicompat

import (
	"bytes"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/adapters/openai"
)

// PricedFields implements adapters.PricedFields: OpenAI's own (a paid
// service tier, web search), which these vendors' bodies can carry too,
// and the vendor's members that make a request dearer than the model's
// price (OpenRouter's plugins, such as web search, and models, a fallback
// list that may answer with a dearer model).
func (a *Adapter) PricedFields(req *adapters.Request) (fields, betas []string) {
	fields, betas = openai.Adapter{}.PricedFields(req)
	if req.Dialect != openai.Name || len(req.Raw) == 0 {
		return fields, betas
	}
	for _, name := range a.preset.pricedFields {
		if !bytes.Contains(req.Raw, []byte(name)) && !bytes.Contains(req.Raw, []byte(`\u`)) {
			continue
		}
		if v, found, err := adapters.TopLevelMember(req.Raw, name); err == nil && found && !bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			fields = append(fields, name)
		}
	}
	return fields, betas
}

var _ adapters.PricedFields = (*Adapter)(nil)
