// Package openaicompat holds the presets of the OpenAI-compatible vendors
// whose wire differs from OpenAI's in what the gateway must do: a path
// without /v1 (Zhipu, Volcengine Ark), an output limit they read only as
// max_tokens, thinking they need back in the history (DeepSeek, Moonshot),
// their own error envelopes and codes (DashScope, Zhipu, Ark, OpenRouter,
// Mistral), a stream error OpenAI never sends (OpenRouter). Each preset is
// a guest module of its own, gateway.adapters.<preset> (channel type
// deepseek, qwen, ...), with the chat capability only; a vendor that
// differs in nothing but its address is a channel of type openai with its
// base_url (see the README's table).
//
// The reasoning and cache-read fields these vendors add to OpenAI's
// answers are read by the openai family itself (adapters/openai/compat.go),
// so a channel of type openai pointed at them reads them too; a preset
// adds what cannot be shared. One package holds every preset because they
// are the same code with different tables: a vendor whose shape departs
// further gets a package of its own. It must not import caddymodule or
// store.
package openaicompat

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/adapters/caddyopts"
	"github.com/caddy-model-gateway/gateway/adapters/openai"
)

func init() {
	for _, p := range presets {
		caddy.RegisterModule(Adapter{preset: p})
	}
}

// Adapter is one vendor's preset: OpenAI's wire at the vendor's path,
// with the vendor's request options and error envelope.
type Adapter struct {
	// StreamOptions "off" leaves stream_options out of a streamed request,
	// for a server (an older local one) that refuses it; the stream is then
	// billed on the usage the server sends unasked, or counted.
	StreamOptions string `json:"stream_options,omitempty"`

	preset *preset
}

// CaddyModule returns the Caddy module information.
func (a Adapter) CaddyModule() caddy.ModuleInfo {
	p := a.preset
	return caddy.ModuleInfo{
		ID:  caddy.ModuleID("gateway.adapters." + p.name),
		New: func() caddy.Module { return &Adapter{preset: p} },
	}
}

// UnmarshalCaddyfile reads the preset's options:
//
//	type <preset> {
//		stream_options off
//	}
func (a *Adapter) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return caddyopts.UnmarshalOptions(d, func(opt, v string) error {
		if opt != "stream_options" || (v != "off" && v != "on") {
			return d.Errf("unrecognized %s adapter option %q %q (it takes stream_options off|on)", a.preset.name, opt, v)
		}
		a.StreamOptions = v
		return nil
	})
}

// Validate implements caddy.Validator.
func (a *Adapter) Validate() error {
	if a.StreamOptions != "" && a.StreamOptions != "off" && a.StreamOptions != "on" {
		return fmt.Errorf("%s adapter: stream_options is off or on, not %q", a.preset.name, a.StreamOptions)
	}
	return nil
}

// Type implements adapters.Provider.
func (a *Adapter) Type() string { return a.preset.name }

// WireDialect implements adapters.ChatProvider: the bodies are OpenAI's,
// so OpenAI clients' requests pass through.
func (a *Adapter) WireDialect() string { return openai.Name }

// DefaultBaseURL implements adapters.BaseURLDefaulter: a channel of the
// preset may leave base_url out.
func (a *Adapter) DefaultBaseURL() string { return a.preset.baseURL }

func (a *Adapter) wire() openai.WireOptions {
	o := a.preset.wire
	switch a.StreamOptions {
	case "off":
		o.NoStreamOptions = true
	case "on":
		o.NoStreamOptions = false
	}
	return o
}

// NewRequest implements adapters.ChatProvider: an OpenAI client's body
// passes through, another dialect's is translated, and either goes to the
// vendor's path with the key as a Bearer token.
func (a *Adapter) NewRequest(ctx context.Context, up *adapters.Upstream, req *adapters.Request) (*http.Request, error) {
	p := a.preset
	path, ok := p.paths[req.Op]
	if !ok {
		return nil, adapters.Unsupported("channel %q (%s) does not serve %s requests", up.Channel, p.name, req.Op)
	}
	var body []byte
	var err error
	switch {
	case req.Dialect == openai.Name:
		body, err = openai.PassthroughBodyWith(req, up.Model, a.wire())
	case req.Op == adapters.OpChat:
		body, err = openai.EncodeChatRequestWith(req, up.Model, a.wire())
	default:
		return nil, adapters.Unsupported("%s requests cannot be translated to channel type %s", req.Op, p.name)
	}
	if err != nil {
		return nil, err
	}
	hr, err := adapters.NewJSONRequest(ctx, joinRoot(up.BaseURL, p.root)+path, body, req.Stream)
	if err != nil {
		return nil, err
	}
	if up.Key != "" {
		hr.Header.Set("Authorization", "Bearer "+up.Key)
	}
	return hr, nil
}

// joinRoot appends the vendor's API root to a base URL, once: a base_url
// written with part or all of the root already (the address the vendor's
// own docs give, such as .../compatible-mode or .../openai/v1) gets only
// the rest.
func joinRoot(base, root string) string {
	base = strings.TrimRight(base, "/")
	for i := len(root); i > 0; i-- {
		if (i == len(root) || root[i] == '/') && strings.HasSuffix(base, root[:i]) {
			return base + root[i:]
		}
	}
	return base + root
}

// DecodeResponse implements adapters.ChatProvider: OpenAI's, whose
// decoder reads the compatible vendors' reasoning and usage fields.
func (a *Adapter) DecodeResponse(req *adapters.Request, body []byte) (*adapters.Response, error) {
	return openai.Adapter{}.DecodeResponse(req, body)
}

// NewStreamStep implements adapters.ChatProvider.
func (a *Adapter) NewStreamStep(req *adapters.Request) adapters.StreamStep {
	step := openai.Adapter{}.NewStreamStep(req)
	if a.preset.streamErrors {
		return &errorChunkStep{StreamStep: step, decode: a.DecodeError}
	}
	return step
}

// DecodeError implements adapters.Provider: the vendor's envelope, its
// codes mapped to whose fault the error is.
func (a *Adapter) DecodeError(status int, body []byte) *adapters.Error {
	return a.preset.decodeError(status, body)
}

// UpstreamRequestID implements adapters.RequestIDReader: the header the
// vendor names its request id in.
func (a *Adapter) UpstreamRequestID(h http.Header) string {
	for _, name := range a.preset.requestID {
		if v := h.Get(name); v != "" {
			return v
		}
	}
	return h.Get("X-Request-Id")
}

// Interface guards.
var (
	_ caddy.Module              = (*Adapter)(nil)
	_ caddy.Validator           = (*Adapter)(nil)
	_ caddyfile.Unmarshaler     = (*Adapter)(nil)
	_ adapters.Provider         = (*Adapter)(nil)
	_ adapters.ChatProvider     = (*Adapter)(nil)
	_ adapters.RequestIDReader  = (*Adapter)(nil)
	_ adapters.BaseURLDefaulter = (*Adapter)(nil)
	_ adapters.StreamStep       = (*errorChunkStep)(nil)
)
