// Package gemini is the Google Gemini family: the dialect Google's Gen AI
// SDKs speak to the gateway (generateContent, streamGenerateContent with
// alt=sse, countTokens and the model list, under /v1beta/models/ and the
// colon methods under /v1/models/) and the provider for upstreams that speak
// the Gemini API (channel type "gemini"). It registers the Caddy module
// gateway.adapters.gemini. It must not import another vendor's package,
// caddymodule or store.
package gemini

import (
	"net/http"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/adapters/caddyopts"
)

// Name is both the dialect name and the channel type.
const Name = "gemini"

func init() {
	caddy.RegisterModule(Adapter{})
}

// Adapter is the Gemini dialect and provider. It holds no state.
type Adapter struct{}

// CaddyModule returns the Caddy module information.
func (Adapter) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "gateway.adapters.gemini",
		New: func() caddy.Module { return new(Adapter) },
	}
}

// Name implements adapters.Dialect.
func (Adapter) Name() string { return Name }

// Type implements adapters.Provider.
func (Adapter) Type() string { return Name }

// WireDialect implements adapters.ChatProvider.
func (Adapter) WireDialect() string { return Name }

// methods are the colon methods the gateway serves, and their operations.
var methods = map[string]adapters.Operation{
	"generateContent":       adapters.OpChat,
	"streamGenerateContent": adapters.OpChat,
	"countTokens":           adapters.OpCountTokens,
}

// knownMethods are Gemini's model methods, served or not, so that
// /v1/models/{model}:{method} is told apart from an OpenAI model id with
// colons (ft:gpt-4o-mini:org::id).
var knownMethods = map[string]bool{
	"generateContent": true, "streamGenerateContent": true, "countTokens": true,
	"embedContent": true, "batchEmbedContents": true, "batchGenerateContent": true,
	"predict": true, "predictLongRunning": true, "asyncBatchEmbedContent": true,
}

// Route implements adapters.Dialect. Everything under /v1beta/ is
// Gemini's; under /v1/models/ only the colon methods are, so OpenAI keeps
// GET /v1/models/{id}.
func (Adapter) Route(r *http.Request) (adapters.Operation, bool) {
	p := r.URL.Path
	var rest string
	switch {
	case p == "/v1beta/models" || p == "/v1beta/models/":
		if r.Method == http.MethodGet {
			return adapters.OpListModels, true
		}
		return adapters.OpUnknown, true
	case strings.HasPrefix(p, "/v1beta/models/"):
		rest = p[len("/v1beta/models/"):]
	case strings.HasPrefix(p, "/v1beta/"), p == "/v1beta":
		return adapters.OpUnknown, true
	case strings.HasPrefix(p, "/v1/models/"):
		rest = p[len("/v1/models/"):]
		i := strings.LastIndexByte(rest, ':')
		if i < 0 || (r.Method != http.MethodPost && !knownMethods[rest[i+1:]]) {
			return "", false
		}
	default:
		return "", false
	}
	model, method := splitMethod(rest)
	if model == "" || strings.Contains(model, "/") {
		return adapters.OpUnknown, true
	}
	if method == "" {
		if r.Method == http.MethodGet && strings.HasPrefix(p, "/v1beta/") {
			return adapters.OpGetModel, true
		}
		return adapters.OpUnknown, true
	}
	if op, ok := methods[method]; ok && r.Method == http.MethodPost {
		return op, true
	}
	return adapters.OpUnknown, true
}

// splitMethod splits "gemini-2.5-flash:generateContent" at its last colon.
func splitMethod(s string) (model, method string) {
	if i := strings.LastIndexByte(s, ':'); i >= 0 {
		return s[:i], s[i+1:]
	}
	return s, ""
}

// pathModel is the model and method a request's path names.
func pathModel(r *http.Request) (model, method string) {
	if r == nil {
		return "", ""
	}
	p := r.URL.Path
	for _, prefix := range []string{"/v1beta/models/", "/v1/models/"} {
		if strings.HasPrefix(p, prefix) {
			return splitMethod(p[len(prefix):])
		}
	}
	return "", ""
}

// PeekModel implements adapters.Dialect: the model is in the path.
func (Adapter) PeekModel(_ adapters.Operation, _ []byte, r *http.Request) string {
	model, _ := pathModel(r)
	return strings.TrimPrefix(model, "models/")
}

// Credential implements adapters.Dialect: Gen AI SDKs send the key in
// x-goog-api-key, REST callers often in ?key=; a Bearer token is accepted too.
func (Adapter) Credential(r *http.Request) string {
	if strings.Contains(r.URL.RawQuery, "key=") {
		if k := strings.TrimSpace(r.URL.Query().Get("key")); k != "" {
			return k
		}
	}
	if k := strings.TrimSpace(r.Header.Get("X-Goog-Api-Key")); k != "" {
		return k
	}
	return adapters.BearerToken(r)
}

// StripCredentials implements adapters.Dialect: the key leaves the query
// and the headers, so neither the access log nor a later handler sees it.
func (Adapter) StripCredentials(r *http.Request) {
	r.Header.Del("X-Goog-Api-Key")
	if strings.Contains(r.URL.RawQuery, "key=") {
		if q := r.URL.Query(); q.Has("key") {
			q.Del("key")
			r.URL.RawQuery = q.Encode()
		}
	}
}

// UnmarshalCaddyfile implements caddyfile.Unmarshaler: the adapter takes
// no options.
func (*Adapter) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return caddyopts.UnmarshalNoOptions(d)
}

// Interface guards.
var (
	_ adapters.Dialect           = (*Adapter)(nil)
	_ adapters.Provider          = (*Adapter)(nil)
	_ adapters.ChatProvider      = (*Adapter)(nil)
	_ adapters.TokenCountEncoder = (*Adapter)(nil)
	_ adapters.StreamStep        = (*streamStep)(nil)
	_ adapters.StreamFlusher     = (*streamStep)(nil)
	_ adapters.UsageSoFar        = (*streamStep)(nil)
	_ adapters.StreamEncoder     = (*streamEncoder)(nil)
	_ adapters.CredentialHinter  = (*Adapter)(nil)
	_ adapters.RequestIDReader   = (*Adapter)(nil)
	_ caddyfile.Unmarshaler      = (*Adapter)(nil)
	_ caddy.Module               = (*Adapter)(nil)
)

// CredentialHint implements adapters.CredentialHinter.
func (Adapter) CredentialHint() string { return "'?key=sk-...' or 'x-goog-api-key: sk-...'" }
