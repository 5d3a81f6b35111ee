// Package openai is the OpenAI family: the dialect OpenAI's SDKs speak to
// the gateway (chat completions, completions, embeddings, models) and the
// provider for upstreams that speak it (channel type "openai": OpenAI itself
// and the many OpenAI-compatible servers). It registers the Caddy module
// gateway.adapters.openai.
package openai

import (
	"net/http"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/adapters/caddyopts"
)

// Name is both the dialect name and the channel type.
const Name = "openai"

func init() {
	caddy.RegisterModule(Adapter{})
}

// Adapter is the OpenAI dialect and provider. It holds no state.
type Adapter struct{}

// CaddyModule returns the Caddy module information.
func (Adapter) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "gateway.adapters.openai",
		New: func() caddy.Module { return new(Adapter) },
	}
}

// Name implements adapters.Dialect.
func (Adapter) Name() string { return Name }

// Type implements adapters.Provider.
func (Adapter) Type() string { return Name }

// WireDialect implements adapters.ChatProvider.
func (Adapter) WireDialect() string { return Name }

// Route implements adapters.Dialect: every /v1/ path the other dialects did
// not claim is OpenAI's, so unknown ones get OpenAI's 404.
func (Adapter) Route(r *http.Request) (adapters.Operation, bool) {
	p := r.URL.Path
	if !strings.HasPrefix(p, "/v1/") {
		return "", false
	}
	post := r.Method == http.MethodPost
	switch {
	case post && p == "/v1/chat/completions":
		return adapters.OpChat, true
	case post && p == "/v1/completions":
		return adapters.OpCompletion, true
	case post && p == "/v1/embeddings":
		return adapters.OpEmbedding, true
	case post && strings.HasPrefix(p, "/v1/engines/") && strings.HasSuffix(p, "/embeddings") && engineModel(p) != "":
		return adapters.OpEmbedding, true
	case r.Method == http.MethodGet && p == "/v1/models":
		return adapters.OpListModels, true
	case r.Method == http.MethodGet && strings.HasPrefix(p, "/v1/models/") && len(p) > len("/v1/models/"):
		return adapters.OpGetModel, true
	case post && p == "/v1/images/generations", post && p == "/v1/images/edits":
		return adapters.OpImage, true
	case post && p == "/v1/audio/speech":
		return adapters.OpSpeech, true
	case post && p == "/v1/audio/transcriptions":
		return adapters.OpTranscription, true
	case post && p == "/v1/rerank":
		return adapters.OpRerank, true
	case post && p == "/v1/responses":
		return adapters.OpResponses, true
	case post && p == clientSecretsPath:
		return adapters.OpRealtimeClientSecret, true
	case p == realtimePath && (r.Method == http.MethodGet || r.Method == http.MethodConnect):
		// a WebSocket: an HTTP/1.1 upgrade, or HTTP/2's extended CONNECT
		return adapters.OpRealtime, true
	case r.Method == http.MethodGet && p == "/v1/responses":
		// Codex opens a WebSocket here first; a 426 sends it to POST at once
		return adapters.OpUpgrade, true
	}
	return adapters.OpUnknown, true
}

// engineModel is the model in /v1/engines/{model}/embeddings.
func engineModel(path string) string {
	m := strings.TrimSuffix(strings.TrimPrefix(path, "/v1/engines/"), "/embeddings")
	if m == "" || strings.Contains(m, "/") {
		return ""
	}
	return m
}

// Fallback implements adapters.Fallback: OpenAI's dialect answers every
// /v1/ path the others leave, with OpenAI's 404 for unknown ones.
func (Adapter) Fallback() bool { return true }

// Credential implements adapters.Dialect: OpenAI clients send a Bearer key;
// browsers opening a Realtime socket send it as a subprotocol.
func (Adapter) Credential(r *http.Request) string {
	if k := adapters.BearerToken(r); k != "" {
		return k
	}
	return subprotocolKey(r)
}

// StripCredentials implements adapters.Dialect. Authorization is left: the
// access log redacts it and no upstream request copies it. The Realtime
// key subprotocol is removed, so it is neither logged nor ever echoed.
func (Adapter) StripCredentials(r *http.Request) {
	if r.URL.Path == realtimePath {
		stripSubprotocolKey(r)
	}
}

// UnmarshalCaddyfile implements caddyfile.Unmarshaler: the adapter takes
// no options.
func (*Adapter) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return caddyopts.UnmarshalNoOptions(d)
}

// Interface guards.
var (
	_ adapters.Dialect             = (*Adapter)(nil)
	_ adapters.Provider            = (*Adapter)(nil)
	_ adapters.ChatProvider        = (*Adapter)(nil)
	_ adapters.RerankProvider      = (*Adapter)(nil)
	_ adapters.Fallback            = (*Adapter)(nil)
	_ adapters.RealtimeProvider    = (*Adapter)(nil)
	_ adapters.RealtimeDialect     = (*Adapter)(nil)
	_ adapters.ClientSecretDialect = (*Adapter)(nil)
	_ adapters.StreamStep          = (*streamStep)(nil)
	_ adapters.StreamEncoder       = (*streamEncoder)(nil)
	_ adapters.StreamEncoder       = (*responsesEncoder)(nil)
	_ caddyfile.Unmarshaler        = (*Adapter)(nil)
	_ caddy.Module                 = (*Adapter)(nil)
)
