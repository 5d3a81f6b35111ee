// Package anthropic is the Anthropic family: the dialect Anthropic's SDKs
// speak to the gateway (POST /v1/messages, /v1/messages/count_tokens, and
// the model list when the caller sends anthropic-version) and the provider
// for upstreams that speak the Messages API (channel type "anthropic"). It
// registers the Caddy module gateway.adapters.anthropic. It must not import
// another vendor's package, caddymodule or store.
package anthropic

import (
	"net/http"
	"strings"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// Name is both the dialect name and the channel type.
const Name = "anthropic"

// DefaultVersion is the anthropic-version sent on translated requests when
// the channel pins none, and the example a missing header's error gives.
const DefaultVersion = "2023-06-01"

func init() {
	caddy.RegisterModule(Adapter{})
}

// Adapter is the Anthropic dialect and provider. It holds no state.
type Adapter struct{}

// CaddyModule returns the Caddy module information.
func (Adapter) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "gateway.adapters.anthropic",
		New: func() caddy.Module { return new(Adapter) },
	}
}

// Name implements adapters.Dialect.
func (Adapter) Name() string { return Name }

// Type implements adapters.Provider.
func (Adapter) Type() string { return Name }

// WireDialect implements adapters.Provider.
func (Adapter) WireDialect() string { return Name }

// Route implements adapters.Dialect. /v1/messages and everything under it is
// Anthropic's; the model list is shared with OpenAI, so it is Anthropic's
// only when the caller sends anthropic-version, as Anthropic's SDKs do.
func (Adapter) Route(r *http.Request) (adapters.Operation, bool) {
	p := r.URL.Path
	post := r.Method == http.MethodPost
	switch {
	case p == "/v1/messages":
		if post {
			return adapters.OpChat, true
		}
		return adapters.OpUnknown, true
	case p == "/v1/messages/count_tokens":
		if post {
			return adapters.OpCountTokens, true
		}
		return adapters.OpUnknown, true
	case strings.HasPrefix(p, "/v1/messages/"):
		return adapters.OpUnknown, true
	case r.Method != http.MethodGet || r.Header.Get("anthropic-version") == "":
		return "", false
	case p == "/v1/models":
		return adapters.OpListModels, true
	case strings.HasPrefix(p, "/v1/models/") && modelID(p) != "":
		return adapters.OpGetModel, true
	}
	return "", false
}

// modelID is the id in /v1/models/{id}, or "".
func modelID(path string) string {
	id := strings.TrimPrefix(path, "/v1/models/")
	if id == "" || strings.Contains(id, "/") {
		return ""
	}
	return id
}

// Credential implements adapters.Dialect: Anthropic clients send the key in
// x-api-key; a Bearer token is accepted too.
func (Adapter) Credential(r *http.Request) string {
	if k := strings.TrimSpace(r.Header.Get("x-api-key")); k != "" {
		return k
	}
	return adapters.BearerToken(r)
}

// Interface guards.
var (
	_ adapters.Dialect           = (*Adapter)(nil)
	_ adapters.Provider          = (*Adapter)(nil)
	_ adapters.ModelEncoder      = (*Adapter)(nil)
	_ adapters.TokenCountEncoder = (*Adapter)(nil)
	_ adapters.PartialText       = (*streamDecoder)(nil)
	_ caddy.Module               = (*Adapter)(nil)
)

// CredentialHint implements adapters.CredentialHinter.
func (Adapter) CredentialHint() string { return "'x-api-key: sk-...'" }
