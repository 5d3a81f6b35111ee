package openai

import (
	"bytes"
	"encoding/json"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// PricedFields implements adapters.PricedFields: a service tier other than
// the default (priority costs more) and web search in chat completions.
func (Adapter) PricedFields(req *adapters.Request) (fields, betas []string) {
	if req.Dialect != Name || len(req.Raw) == 0 {
		return nil, nil
	}
	// most bodies name neither field: skip the parse unless a key could be
	// one of them, spelled out or escaped
	if !bytes.Contains(req.Raw, []byte("tier")) && !bytes.Contains(req.Raw, []byte("web_search")) && !bytes.Contains(req.Raw, []byte(`\u`)) {
		return nil, nil
	}
	var w struct {
		ServiceTier      string          `json:"service_tier"`
		WebSearchOptions json.RawMessage `json:"web_search_options"`
	}
	if json.Unmarshal(req.Raw, &w) != nil {
		return nil, nil
	}
	switch w.ServiceTier {
	case "", "auto", "default":
	default:
		fields = append(fields, "service_tier")
	}
	if len(w.WebSearchOptions) > 0 && string(w.WebSearchOptions) != "null" {
		fields = append(fields, "web_search_options")
	}
	return fields, nil
}

var _ adapters.PricedFields = Adapter{}
