package anthropic

import (
	"encoding/json"
	"strings"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// pricedBetas are the beta flags (by prefix) that change what a request
// costs: the 1M-token context window is billed at a higher rate past 200K
// tokens, and a one-hour cache write costs twice the input price.
var pricedBetas = []string{"context-1m", "extended-cache-ttl"}

// serverTools are the tool types Anthropic runs and bills itself.
var serverTools = []string{"web_search", "web_fetch", "code_execution"}

// PricedFields implements adapters.PricedFields: server tools, a one-hour
// cache_control ttl, and the betas above.
func (Adapter) PricedFields(req *adapters.Request) (fields, betas []string) {
	if req.Dialect != Name || len(req.Raw) == 0 {
		return nil, nil
	}
	if req.Header != nil {
		for _, v := range req.Header.Values("Anthropic-Beta") {
			for _, b := range strings.Split(v, ",") {
				b = strings.TrimSpace(b)
				for _, p := range pricedBetas {
					if strings.HasPrefix(b, p) {
						betas = append(betas, b)
					}
				}
			}
		}
	}
	var w struct {
		Tools []struct {
			Type string `json:"type"`
		} `json:"tools"`
	}
	if json.Unmarshal(req.Raw, &w) == nil {
		for _, t := range w.Tools {
			for _, s := range serverTools {
				if strings.HasPrefix(t.Type, s) {
					fields = append(fields, "tools."+s)
				}
			}
		}
	}
	if strings.Contains(string(req.Raw), `"ttl"`) && strings.Contains(string(req.Raw), `"1h"`) {
		fields = append(fields, adapters.FieldCacheTTL)
	}
	return fields, betas
}

var _ adapters.PricedFields = Adapter{}
