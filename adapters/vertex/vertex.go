// Package vertex is the Google Cloud Vertex AI family (channel type
// "vertex"): Gemini models through generateContent and
// streamGenerateContent under
// {base_url}/v1/projects/{project}/locations/{location}/publishers/google/models/{model},
// and Claude through publishers/anthropic/models/{model}:rawPredict and
// :streamRawPredict (Anthropic's Messages body without its model, with
// anthropic_version vertex-2023-10-16). Its bodies are Gemini's and
// Anthropic's: it calls those packages' wire code and changes only the
// path, the version and the credential. The channel's key is a service
// account's JSON key file, from which it signs its own assertions,
// exchanges them for access tokens and caches them (auth.go). It is a
// provider only, registered as gateway.adapters.vertex, and must not
// import caddymodule or store.
package vertex

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/adapters/anthropic"
	"github.com/caddy-model-gateway/gateway/adapters/caddyopts"
	"github.com/caddy-model-gateway/gateway/adapters/gemini"
)

// AnthropicVersion is the anthropic_version Vertex requires in a Claude
// body, in place of Anthropic's header.
const AnthropicVersion = "vertex-2023-10-16"

// Publishers: whose models a channel serves.
const (
	PublisherGoogle    = "google"
	PublisherAnthropic = "anthropic"
)

// DefaultLocation is the location of a channel that names none: the
// global endpoint, which serves both publishers' current models.
const DefaultLocation = "global"

// DefaultTokenTimeout bounds one token exchange.
const DefaultTokenTimeout = 30 * time.Second

func init() {
	caddy.RegisterModule(Adapter{})
}

// Adapter is the Vertex AI provider.
type Adapter struct {
	// Project is the Google Cloud project id; default the service
	// account's own project_id. It and Location may be placeholders
	// ({env.VERTEX_PROJECT}), empty ones meaning the default.
	Project string `json:"project,omitempty"`
	// Location is the region (us-east5, europe-west1, ...), a
	// multi-region (us, eu) or "global". Default global.
	Location string `json:"location,omitempty"`
	// Publisher is whose models the channel serves: google or anthropic.
	// Unset, a model named claude-* is Anthropic's and any other Google's,
	// and one channel holds one publisher's models.
	Publisher string `json:"publisher,omitempty"`
	// MaxTokens is the max_tokens a request translated to Claude gets
	// when its client set no limit. Default 4096.
	MaxTokens int64 `json:"max_tokens,omitempty"`
	// TokenTimeout bounds one token exchange. Default 30s.
	TokenTimeout caddy.Duration `json:"token_timeout,omitempty"`

	gem    gemini.Adapter
	claude anthropic.Adapter
	// wire is the channel's publisher, known once its models are
	// (ProvisionChannel); "" before.
	wire string
	// sources are the token sources of the channel's keys, by key; built
	// at load, read-only after.
	sources map[string]*tokenSource
	client  *http.Client
	now     func() time.Time
}

// CaddyModule returns the Caddy module information.
func (Adapter) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "gateway.adapters.vertex",
		New: func() caddy.Module { return new(Adapter) },
	}
}

// locationName is what a location may be: it becomes a host name.
var locationName = regexp.MustCompile(`^[a-z0-9]+(-[a-z0-9]+)*$`)

// Provision fills the defaults and checks the options. The project may
// still be unset: the service account names one.
func (a *Adapter) Provision(caddy.Context) error {
	// {env.*} and {file.*} placeholders, read at each load
	repl := caddy.NewReplacer()
	a.Project = strings.TrimSpace(repl.ReplaceAll(a.Project, ""))
	a.Location = cmp.Or(strings.TrimSpace(repl.ReplaceAll(a.Location, "")), DefaultLocation)
	if !locationName.MatchString(a.Location) {
		return fmt.Errorf("vertex adapter: location %q is not a Google Cloud location (us-central1, europe-west4, global)", a.Location)
	}
	switch a.Publisher {
	case "", PublisherGoogle, PublisherAnthropic:
	default:
		return fmt.Errorf("vertex adapter: publisher %q: want google or anthropic", a.Publisher)
	}
	if a.MaxTokens < 0 {
		return fmt.Errorf("vertex adapter: max_tokens must be positive, not %d", a.MaxTokens)
	}
	a.claude = anthropic.Adapter{Version: AnthropicVersion, MaxTokens: cmp.Or(a.MaxTokens, anthropic.DefaultMaxTokens)}
	if a.TokenTimeout <= 0 {
		a.TokenTimeout = caddy.Duration(DefaultTokenTimeout)
	}
	a.client = &http.Client{Timeout: time.Duration(a.TokenTimeout)}
	a.now = time.Now
	return nil
}

// UnmarshalCaddyfile reads the adapter's options:
//
//	type vertex {
//		project <id>
//		location <region>|global
//		publisher google|anthropic
//		max_tokens <n>
//		token_timeout <duration>
//	}
func (a *Adapter) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	return caddyopts.UnmarshalOptions(d, func(opt, v string) error {
		switch opt {
		case "project":
			a.Project = v
		case "location":
			a.Location = v
		case "publisher":
			a.Publisher = v
		case "max_tokens":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return d.Errf("max_tokens %q: %v", v, err)
			}
			a.MaxTokens = n
		case "token_timeout":
			t, err := caddy.ParseDuration(v)
			if err != nil {
				return d.Errf("token_timeout %q: %v", v, err)
			}
			a.TokenTimeout = caddy.Duration(t)
		default:
			return d.Errf("unrecognized vertex adapter option %q (it takes project, location, publisher, max_tokens, token_timeout)", opt)
		}
		return nil
	})
}

// DefaultBaseURL implements adapters.BaseURLDefaulter: the location's
// regional endpoint, the global one, or a multi-region's (us, eu).
func (a *Adapter) DefaultBaseURL() string {
	switch loc := cmp.Or(a.Location, DefaultLocation); loc {
	case "global":
		return "https://aiplatform.googleapis.com"
	case "us", "eu":
		return "https://aiplatform." + loc + ".rep.googleapis.com"
	default:
		return "https://" + loc + "-aiplatform.googleapis.com"
	}
}

// ProvisionChannel implements adapters.ChannelProvisioner: every key must
// be a service account's JSON key file (refused here, at load, with what
// is wrong and never a byte of it), the project is known, and the
// channel's models are one publisher's, since its stream passthrough
// (WireDialect) is one dialect.
func (a *Adapter) ProvisionChannel(ch adapters.ChannelSettings) error {
	if a.now == nil {
		a.now = time.Now
	}
	if a.client == nil {
		a.client = &http.Client{Timeout: DefaultTokenTimeout}
	}
	a.sources = make(map[string]*tokenSource, len(ch.Keys))
	for i, k := range ch.Keys {
		sa, err := parseServiceAccount(k)
		if err != nil {
			return fmt.Errorf("vertex key %d: %w", i+1, err)
		}
		if a.Project == "" {
			a.Project = sa.projectID
		}
		a.sources[k] = &tokenSource{sa: sa, client: a.client, timeout: time.Duration(cmp.Or(a.TokenTimeout, caddy.Duration(DefaultTokenTimeout))), now: a.now}
	}
	if a.Project == "" {
		return errors.New("vertex: no project: set the adapter's project option (its service account file names none)")
	}
	if a.Publisher != "" {
		a.wire = a.Publisher
		return nil
	}
	for _, m := range ch.Models {
		p := publisherOf(m)
		if a.wire != "" && p != a.wire {
			return fmt.Errorf("vertex: the channel mixes Claude (publisher anthropic) and Gemini (publisher google) models (%s): give each publisher's models a channel of their own", m)
		}
		a.wire = p
	}
	return nil
}

// publisherOf is the publisher a model's name says: Claude's are
// Anthropic's, the rest Google's.
func publisherOf(model string) string {
	if strings.HasPrefix(model, "claude-") {
		return PublisherAnthropic
	}
	return PublisherGoogle
}

// publisherFor is the publisher model is asked of on this channel.
func (a *Adapter) publisherFor(model string) string {
	return cmp.Or(a.Publisher, a.wire, publisherOf(model))
}

// Type implements adapters.Provider.
func (*Adapter) Type() string { return "vertex" }

// WireDialect implements adapters.ChatProvider: the dialect of the
// channel's publisher (one per channel, see ProvisionChannel), Gemini's
// until its models are known.
func (a *Adapter) WireDialect() string {
	if cmp.Or(a.Publisher, a.wire) == PublisherAnthropic {
		return anthropic.Name
	}
	return gemini.Name
}

// WrapTransport implements adapters.TransportWrapper: each call gets its
// channel key's access token (transport in auth.go).
func (a *Adapter) WrapTransport(base http.RoundTripper) http.RoundTripper {
	return &transport{base: base}
}

// NewRequest implements adapters.ChatProvider: the publisher's wire
// builds the body, which goes to Vertex's path for the model; the access
// token is added by the transport, so no key is in the request built.
func (a *Adapter) NewRequest(ctx context.Context, up *adapters.Upstream, req *adapters.Request) (*http.Request, error) {
	publisher := a.publisherFor(up.Model)
	switch {
	case req.Op == adapters.OpChat, req.Op == adapters.OpResponses, req.Op == adapters.OpCountTokens:
	case req.Op == adapters.OpImage && req.Media != nil && publisher == PublisherGoogle:
		// Imagen's :predict and Gemini's image models, as Gemini's wire
		// builds them
	default:
		return nil, adapters.Unsupported("channel %q (vertex, publisher %s) does not serve %s requests", up.Channel, publisher, req.Op)
	}
	if src := a.sources[up.Key]; src != nil {
		ctx = context.WithValue(ctx, sourceKey{}, src)
	}
	wireUp := &adapters.Upstream{Channel: up.Channel, BaseURL: up.BaseURL, Model: up.Model}
	if publisher == PublisherAnthropic {
		return a.claudeRequest(ctx, wireUp, req)
	}
	return a.geminiRequest(ctx, wireUp, req)
}

// modelPath is the model's path under the channel's project and location.
func (a *Adapter) modelPath(base, publisher, model string) string {
	return strings.TrimRight(base, "/") + "/v1/projects/" + url.PathEscape(a.Project) +
		"/locations/" + url.PathEscape(cmp.Or(a.Location, DefaultLocation)) +
		"/publishers/" + publisher + "/models/" + url.PathEscape(model)
}

// geminiRequest is Gemini's request at Vertex's path: the same method
// and query (alt=sse), the model in the path.
func (a *Adapter) geminiRequest(ctx context.Context, up *adapters.Upstream, req *adapters.Request) (*http.Request, error) {
	hr, err := a.gem.NewRequest(ctx, up, req)
	if err != nil {
		return nil, err
	}
	_, method, _ := strings.Cut(hr.URL.Path[strings.LastIndexByte(hr.URL.Path, '/')+1:], ":")
	model := strings.TrimPrefix(up.Model, "models/")
	if req.Op == adapters.OpCountTokens && hr.GetBody != nil {
		body, err := readBody(hr)
		if err != nil {
			return nil, err
		}
		if body, err = vertexCount(body); err != nil {
			return nil, err
		}
		withBody(hr, body)
	}
	return retarget(hr, a.modelPath(up.BaseURL, PublisherGoogle, model)+":"+method, hr.URL.RawQuery, up)
}

// vertexCount is a countTokens body as Vertex takes it: the Gemini API's
// generateContentRequest form has its contents, instructions, tools and
// generation config lifted to the top (Vertex's CountTokensRequest has
// no such member) and its model left out (the path names it).
func vertexCount(body []byte) ([]byte, error) {
	inner, found, err := adapters.TopLevelMember(body, "generateContentRequest")
	if err == nil && !found {
		inner, found, err = adapters.TopLevelMember(body, "generate_content_request")
	}
	if err != nil || !found {
		return body, nil //nolint:nilerr // not that form: as the client wrote it
	}
	return withoutMember(inner, "model")
}

// readBody reads a built request's body (bytes, resendable).
func readBody(hr *http.Request) ([]byte, error) {
	rc, err := hr.GetBody()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// claudeRequest is Anthropic's request as Vertex takes it: the body
// without its model (the path names it) and with anthropic_version, no
// version header.
func (a *Adapter) claudeRequest(ctx context.Context, up *adapters.Upstream, req *adapters.Request) (*http.Request, error) {
	hr, err := a.claude.NewRequest(ctx, up, req)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(hr.Body)
	if err != nil {
		return nil, err
	}
	target := a.modelPath(up.BaseURL, PublisherAnthropic, up.Model) + ":rawPredict"
	switch {
	case req.Op == adapters.OpCountTokens:
		// counting has a model of its own in the path; the body names the
		// model counted for
		target = a.modelPath(up.BaseURL, PublisherAnthropic, "count-tokens") + ":rawPredict"
	default:
		if body, err = withoutMember(body, "model"); err != nil {
			return nil, err
		}
		if req.Stream {
			target = a.modelPath(up.BaseURL, PublisherAnthropic, up.Model) + ":streamRawPredict"
		}
	}
	if body, err = adapters.SetFields(body, adapters.Field{Key: "anthropic_version", Value: AnthropicVersion}); err != nil {
		return nil, err
	}
	withBody(hr, body)
	hr.Header.Del("Anthropic-Version")
	return retarget(hr, target, "", up)
}

// retarget points a built request at target.
func retarget(hr *http.Request, target, query string, up *adapters.Upstream) (*http.Request, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, fmt.Errorf("channel %q: base_url: %w", up.Channel, err)
	}
	u.RawQuery = query
	hr.URL, hr.Host = u, u.Host
	return hr, nil
}

// withoutMember is the JSON object raw without its top-level member key,
// every other member's bytes as they were.
func withoutMember(raw []byte, key string) ([]byte, error) {
	if _, found, err := adapters.TopLevelMember(raw, key); err != nil || !found {
		return raw, nil //nolint:nilerr // not an object: the upstream says so
	}
	out := make([]byte, 0, len(raw))
	out = append(out, '{')
	n := 0
	err := adapters.EachMember(raw, func(k, v []byte) bool {
		if string(k) == key {
			return true
		}
		if n > 0 {
			out = append(out, ',')
		}
		n++
		name, _ := json.Marshal(string(k))
		out = append(out, name...)
		out = append(out, ':')
		out = append(out, v...)
		return true
	})
	if err != nil {
		return nil, adapters.BadRequest("the request body is not a JSON object")
	}
	return append(out, '}'), nil
}

// channelWire is the wire of the channel's answers: its publisher's,
// or before its models are known the asked model's.
func (a *Adapter) channelWire(req *adapters.Request) string {
	return cmp.Or(a.Publisher, a.wire, publisherOf(req.Model))
}

// DecodeResponse implements adapters.ChatProvider: the publisher's wire
// reads its own answer (passed through to a same-dialect client).
func (a *Adapter) DecodeResponse(req *adapters.Request, body []byte) (*adapters.Response, error) {
	if a.channelWire(req) == PublisherAnthropic {
		return a.claude.DecodeResponse(req, body)
	}
	return a.gem.DecodeResponse(req, body)
}

// NewStreamStep implements adapters.ChatProvider: Vertex streams Gemini's
// alt=sse chunks and Anthropic's named events as the vendors do.
func (a *Adapter) NewStreamStep(req *adapters.Request) adapters.StreamStep {
	if a.channelWire(req) == PublisherAnthropic {
		return a.claude.NewStreamStep(req)
	}
	return a.gem.NewStreamStep(req)
}

// DecodeError implements adapters.Provider. Vertex itself refuses in
// Google's envelope (a bad token, a missing model, quota); a Claude model
// refuses a body in Anthropic's ({"type":"error",...}).
func (a *Adapter) DecodeError(status int, body []byte) *adapters.Error {
	if v, found, err := adapters.TopLevelMember(body, "type"); err == nil && found && string(v) == `"error"` {
		return anthropic.DecodeError(status, body)
	}
	e := gemini.DecodeError(status, body)
	if status == http.StatusUnauthorized || status == http.StatusForbidden {
		// the service account's token or its roles: the channel's fault
		e.Fault = adapters.FaultChannel
	}
	return e
}

// ServesMedia implements adapters.MediaProvider: image generations (and
// Gemini image models' edits) on a channel of Google's models, as the
// gemini family serves them.
func (a *Adapter) ServesMedia(req *adapters.Request) bool {
	return a.channelWire(req) == PublisherGoogle && a.gem.ServesMedia(req)
}

// DecodeMediaResponse implements adapters.MediaProvider: Imagen's
// predictions and Gemini's image parts read as the gemini family reads
// them.
func (a *Adapter) DecodeMediaResponse(req *adapters.Request, body []byte) (*adapters.MediaResponse, error) {
	return a.gem.DecodeMediaResponse(req, body)
}

// PricedFields implements adapters.PricedFields with the publisher's own.
func (a *Adapter) PricedFields(req *adapters.Request) (fields, betas []string) {
	if a.channelWire(req) == PublisherAnthropic {
		return a.claude.PricedFields(req)
	}
	return a.gem.PricedFields(req)
}

// ImageTokens implements adapters.ImageTokens with the publisher's own.
func (a *Adapter) ImageTokens(model string) int64 {
	if a.publisherFor(model) == PublisherAnthropic {
		return a.claude.ImageTokens(model)
	}
	return a.gem.ImageTokens(model)
}

// UpstreamRequestID implements adapters.RequestIDReader: Google's front
// end names a request in x-goog-request-id where it does at all.
func (a *Adapter) UpstreamRequestID(h http.Header) string {
	return a.gem.UpstreamRequestID(h)
}

// Interface guards.
var (
	_ caddy.Module                = (*Adapter)(nil)
	_ caddy.Provisioner           = (*Adapter)(nil)
	_ caddyfile.Unmarshaler       = (*Adapter)(nil)
	_ adapters.Provider           = (*Adapter)(nil)
	_ adapters.ChatProvider       = (*Adapter)(nil)
	_ adapters.ChannelProvisioner = (*Adapter)(nil)
	_ adapters.BaseURLDefaulter   = (*Adapter)(nil)
	_ adapters.TransportWrapper   = (*Adapter)(nil)
	_ adapters.PricedFields       = (*Adapter)(nil)
	_ adapters.ImageTokens        = (*Adapter)(nil)
	_ adapters.RequestIDReader    = (*Adapter)(nil)
	_ http.RoundTripper           = (*transport)(nil)
)
