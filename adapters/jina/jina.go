// Package jina is the Jina AI family (channel type "jina"): Jina's rerank
// API, POST {base_url}/v1/rerank with the key as a Bearer token, in the
// widely used rerank shape Jina defined (adapters.RerankBody), billed by
// the tokens its usage.total_tokens reports. It is a provider of rerank
// only: chat and the other operations are refused. It registers the Caddy
// module gateway.adapters.jina and must not import caddymodule or store.
package jina

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/adapters/caddyopts"
)

// Name is the channel type.
const Name = "jina"

func init() {
	caddy.RegisterModule(Adapter{})
}

// Adapter is the Jina provider. It holds no state.
type Adapter struct{}

// CaddyModule returns the Caddy module information.
func (Adapter) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "gateway.adapters.jina",
		New: func() caddy.Module { return new(Adapter) },
	}
}

// UnmarshalCaddyfile implements caddyfile.Unmarshaler: the adapter takes
// no options.
func (*Adapter) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return caddyopts.UnmarshalNoOptions(d)
}

// Type implements adapters.Provider.
func (Adapter) Type() string { return Name }

// NewRequest implements adapters.RerankProvider. Documents are not asked back
// (return_documents false): the gateway has them.
func (Adapter) NewRequest(ctx context.Context, up *adapters.Upstream, req *adapters.Request) (*http.Request, error) {
	if req.Op != adapters.OpRerank || req.Rerank == nil {
		return nil, adapters.Unsupported("channel %q (jina) serves only /v1/rerank, not %s requests: use a model of another channel", up.Channel, req.Op)
	}
	hr, err := adapters.NewRerankRequest(ctx, up, req.Rerank)
	if err != nil {
		return nil, err
	}
	hr.Header.Set("Accept", "application/json")
	return hr, nil
}

// DecodeRerankResponse implements adapters.RerankProvider.
func (Adapter) DecodeRerankResponse(req *adapters.Request, body []byte) (*adapters.Response, error) {
	return adapters.DecodeRerankAnswer(req, body)
}

// errorBody is Jina's error envelope: {"detail": "..."}, where detail is a
// string, or a list of {"msg": ...} for a body its validation refused.
type errorBody struct {
	Detail json.RawMessage `json:"detail"`
}

// DecodeError implements adapters.Provider. A 401 or 402 is the channel's
// key or its balance of tokens.
func (Adapter) DecodeError(status int, body []byte) *adapters.Error {
	e := &adapters.Error{Status: status, Type: adapters.ErrorTypeForStatus(status)}
	var w errorBody
	if json.Unmarshal(body, &w) == nil && len(w.Detail) > 0 {
		var s string
		var list []struct {
			Msg string `json:"msg"`
		}
		switch {
		case json.Unmarshal(w.Detail, &s) == nil && s != "":
			e.Message = s
		case json.Unmarshal(w.Detail, &list) == nil && len(list) > 0:
			msgs := make([]string, len(list))
			for i, m := range list {
				msgs[i] = m.Msg
			}
			e.Message = strings.Join(msgs, "; ")
		}
	}
	if e.Message == "" {
		e.Message = fmt.Sprintf("upstream answered HTTP %d", status)
	}
	if status == http.StatusUnauthorized || status == http.StatusPaymentRequired {
		e.Fault = adapters.FaultChannel
	}
	return e
}

// Interface guards.
var (
	_ adapters.Provider       = (*Adapter)(nil)
	_ adapters.RerankProvider = (*Adapter)(nil)
	_ caddyfile.Unmarshaler   = (*Adapter)(nil)
	_ caddy.Module            = (*Adapter)(nil)
)
