package gemini

import (
	"encoding/json"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// groundingTools are the tools Google runs and bills per request on top of
// tokens, by both spellings a client may use.
var groundingTools = map[string]string{
	"googleSearch": "googleSearch", "google_search": "googleSearch",
	"googleSearchRetrieval": "googleSearchRetrieval", "google_search_retrieval": "googleSearchRetrieval",
	"googleMaps": "googleMaps", "google_maps": "googleMaps",
	"urlContext": "urlContext", "url_context": "urlContext",
	"codeExecution": "codeExecution", "code_execution": "codeExecution",
}

// PricedFields implements adapters.PricedFields: grounding and other
// server-side tools.
func (Adapter) PricedFields(req *adapters.Request) (fields, betas []string) {
	if req.Dialect != Name || len(req.Raw) == 0 {
		return nil, nil
	}
	var w struct {
		Tools []map[string]json.RawMessage `json:"tools"`
	}
	if json.Unmarshal(req.Raw, &w) != nil {
		return nil, nil
	}
	for _, t := range w.Tools {
		for k := range t {
			if name, ok := groundingTools[k]; ok {
				fields = append(fields, "tools."+name)
			}
		}
	}
	return fields, nil
}

var _ adapters.PricedFields = Adapter{}
