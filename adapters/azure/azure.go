// Package azure is the Azure OpenAI family (channel type "azure"): OpenAI's
// wire format served from a resource's deployments,
// {base_url}/openai/deployments/{deployment}/chat/completions?api-version=...,
// with the key in an api-key header. A channel's model names (or its
// model_map targets) are the deployment names. It is a provider only:
// OpenAI clients reach it by passthrough, the other dialects by
// translation. It registers the Caddy module gateway.adapters.azure and
// must not import caddymodule or store.
package azure

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/adapters/caddyopts"
	"github.com/caddy-model-gateway/gateway/adapters/openai"
)

// DefaultAPIVersion is the data-plane api-version sent when the channel
// sets none: the latest generally available one when this was written.
const DefaultAPIVersion = "2024-10-21"

func init() {
	caddy.RegisterModule(Adapter{})
}

// Adapter is the Azure OpenAI provider.
type Adapter struct {
	// APIVersion is the api-version query parameter of every call.
	// Default 2024-10-21.
	APIVersion string `json:"api_version,omitempty"`

	wire openai.Adapter
}

// CaddyModule returns the Caddy module information.
func (Adapter) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "gateway.adapters.azure",
		New: func() caddy.Module { return new(Adapter) },
	}
}

// Provision fills the defaults.
func (a *Adapter) Provision(caddy.Context) error {
	a.APIVersion = cmp.Or(a.APIVersion, DefaultAPIVersion)
	return nil
}

// UnmarshalCaddyfile reads the adapter's options:
//
//	type azure {
//		api_version <version>
//	}
func (a *Adapter) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return caddyopts.UnmarshalOptions(d, func(opt, v string) error {
		if opt != "api_version" {
			return d.Errf("unrecognized azure adapter option %q (it takes api_version)", opt)
		}
		a.APIVersion = v
		return nil
	})
}

// Type implements adapters.Provider.
func (Adapter) Type() string { return "azure" }

// WireDialect implements adapters.ChatProvider: the bodies are OpenAI's.
func (a Adapter) WireDialect() string { return a.wire.WireDialect() }

// operations Azure serves, with their path under a deployment.
var operations = map[adapters.Operation]string{
	adapters.OpChat:       "/chat/completions",
	adapters.OpCompletion: "/completions",
	adapters.OpEmbedding:  "/embeddings",
}

// NewRequest implements adapters.ChatProvider. OpenAI's request is built, then
// sent to the deployment's path, with the key where Azure reads it.
func (a Adapter) NewRequest(ctx context.Context, up *adapters.Upstream, req *adapters.Request) (*http.Request, error) {
	op, ok := operations[req.Op]
	if !ok {
		return nil, adapters.Unsupported("channel %q (azure) does not serve %s requests", up.Channel, req.Op)
	}
	target, err := url.Parse(strings.TrimRight(up.BaseURL, "/") + "/openai/deployments/" + url.PathEscape(up.Model) + op)
	if err != nil {
		return nil, fmt.Errorf("channel %q: base_url: %w", up.Channel, err)
	}
	target.RawQuery = url.Values{"api-version": {cmp.Or(a.APIVersion, DefaultAPIVersion)}}.Encode()
	// no key: OpenAI's wire code would put it in Authorization
	hr, err := a.wire.NewRequest(ctx, &adapters.Upstream{Channel: up.Channel, BaseURL: up.BaseURL, Model: up.Model}, req)
	if err != nil {
		return nil, err
	}
	hr.URL, hr.Host = target, target.Host
	if up.Key != "" {
		hr.Header.Set("api-key", up.Key)
	}
	return hr, nil
}

// DecodeResponse implements adapters.ChatProvider.
func (a Adapter) DecodeResponse(req *adapters.Request, body []byte) (*adapters.Response, error) {
	return a.wire.DecodeResponse(req, body)
}

// NewStreamStep implements adapters.ChatProvider. Azure's first chunks
// may carry only prompt_filter_results and no choices; OpenAI's step
// passes them through and translates them to nothing.
func (a Adapter) NewStreamStep(req *adapters.Request) adapters.StreamStep {
	return a.wire.NewStreamStep(req)
}

// DecodeError implements adapters.Provider: Azure answers in OpenAI's error
// envelope.
func (a Adapter) DecodeError(status int, body []byte) *adapters.Error {
	return a.wire.DecodeError(status, body)
}

// Interface guards.
var (
	_ caddy.Module             = (*Adapter)(nil)
	_ caddy.Provisioner        = (*Adapter)(nil)
	_ caddyfile.Unmarshaler    = (*Adapter)(nil)
	_ adapters.Provider        = (*Adapter)(nil)
	_ adapters.ChatProvider    = (*Adapter)(nil)
	_ adapters.RequestIDReader = (*Adapter)(nil)
)

// UpstreamRequestID implements adapters.RequestIDReader: Azure's gateway
// names the request in apim-request-id; the model service in x-request-id.
func (Adapter) UpstreamRequestID(h http.Header) string {
	if v := h.Get("Apim-Request-Id"); v != "" {
		return v
	}
	return h.Get("X-Request-Id")
}
