// Package anthropic is the Anthropic family: the dialect Anthropic's SDKs
// speak to the gateway (POST /v1/messages, /v1/messages/count_tokens, and
// the model list when the caller sends anthropic-version) and the provider
// for upstreams that speak the Messages API (channel type "anthropic"). It
// registers the Caddy module gateway.adapters.anthropic. It must not import
// another vendor's package, caddymodule or store.
package anthropic

import (
	"cmp"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/adapters/caddyopts"
)

// Name is both the dialect name and the channel type.
const Name = "anthropic"

// DefaultVersion is the anthropic-version sent on translated requests when
// the channel pins none, and the example a missing header's error gives.
const DefaultVersion = "2023-06-01"

func init() {
	caddy.RegisterModule(Adapter{})
}

// Adapter is the Anthropic dialect and provider. Its options apply to the
// requests the gateway translates for a channel; a client speaking
// Anthropic's dialect sends its own version and limits.
type Adapter struct {
	// Version is the anthropic-version sent on translated requests.
	// Default 2023-06-01.
	Version string `json:"version,omitempty"`
	// MaxTokens is the max_tokens a translated request gets when its client
	// set no limit (Anthropic requires one). Default 4096.
	MaxTokens int64 `json:"max_tokens,omitempty"`
	// AutoCache marks prompt cache breakpoints on requests that carry
	// none (autocache.go). Off by default.
	AutoCache bool `json:"auto_cache,omitempty"`
}

// CaddyModule returns the Caddy module information.
func (Adapter) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "gateway.adapters.anthropic",
		New: func() caddy.Module { return new(Adapter) },
	}
}

// Provision fills the defaults. (An Adapter used without provisioning,
// as a dialect, applies them where they are read.)
func (a *Adapter) Provision(caddy.Context) error {
	if a.MaxTokens < 0 {
		return fmt.Errorf("anthropic adapter: max_tokens must be positive, not %d", a.MaxTokens)
	}
	a.Version = cmp.Or(a.Version, DefaultVersion)
	a.MaxTokens = cmp.Or(a.MaxTokens, DefaultMaxTokens)
	return nil
}

// UnmarshalCaddyfile reads the adapter's options:
//
//	type anthropic {
//		version <anthropic-version>
//		max_tokens <n>
//		auto_cache on|off
//	}
func (a *Adapter) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return caddyopts.UnmarshalOptions(d, func(opt, v string) error {
		switch opt {
		case "version":
			a.Version = v
		case "max_tokens":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n <= 0 {
				return d.Errf("max_tokens must be a positive integer, not %q", v)
			}
			a.MaxTokens = n
		case "auto_cache":
			if v != "on" && v != "off" {
				return d.Errf("auto_cache is on or off, not %q", v)
			}
			a.AutoCache = v == "on"
		default:
			return d.Errf("unrecognized anthropic adapter option %q (it takes version, max_tokens and auto_cache)", opt)
		}
		return nil
	})
}

// Name implements adapters.Dialect.
func (Adapter) Name() string { return Name }

// Type implements adapters.Provider.
func (Adapter) Type() string { return Name }

// WireDialect implements adapters.ChatProvider.
func (Adapter) WireDialect() string { return Name }

// PeekModel implements adapters.Dialect.
func (Adapter) PeekModel(_ adapters.Operation, body []byte, _ *http.Request) string {
	return adapters.PeekModel(body)
}

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
	case r.Method != http.MethodGet || r.Header.Get("Anthropic-Version") == "":
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
	if k := strings.TrimSpace(r.Header.Get("X-Api-Key")); k != "" {
		return k
	}
	return adapters.BearerToken(r)
}

// StripCredentials implements adapters.Dialect.
func (Adapter) StripCredentials(r *http.Request) { r.Header.Del("X-Api-Key") }

// Interface guards.
var (
	_ adapters.Dialect           = (*Adapter)(nil)
	_ adapters.Provider          = (*Adapter)(nil)
	_ adapters.ChatProvider      = (*Adapter)(nil)
	_ adapters.TokenCountEncoder = (*Adapter)(nil)
	_ adapters.StreamStep        = (*streamStep)(nil)
	_ adapters.StreamEncoder     = (*streamEncoder)(nil)
	_ adapters.CredentialHinter  = (*Adapter)(nil)
	_ adapters.RequestIDReader   = (*Adapter)(nil)
	_ caddy.Module               = (*Adapter)(nil)
	_ caddy.Provisioner          = (*Adapter)(nil)
	_ caddyfile.Unmarshaler      = (*Adapter)(nil)
)

// CredentialHint implements adapters.CredentialHinter.
func (Adapter) CredentialHint() string { return "'x-api-key: sk-...'" }
