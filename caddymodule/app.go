// Package caddymodule wires the gateway into Caddy: the gateway app (global
// option), the HTTP handlers, Caddyfile parsing and the CLI subcommands. It
// wires; translation lives in adapters, persistence in store, money in
// billing. It names no vendor: channel types resolve to gateway.adapters.*
// modules by name.
package caddymodule

import (
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/alerts"
	"github.com/caddy-model-gateway/gateway/billing"
	"github.com/caddy-model-gateway/gateway/cache"
	"github.com/caddy-model-gateway/gateway/engine"
	"github.com/caddy-model-gateway/gateway/internal/bodies"
	"github.com/caddy-model-gateway/gateway/metrics"
	"github.com/caddy-model-gateway/gateway/payments"
	"github.com/caddy-model-gateway/gateway/relayhttp"
	"github.com/caddy-model-gateway/gateway/routing"
	"github.com/caddy-model-gateway/gateway/runtimecfg"
	"github.com/caddy-model-gateway/gateway/store"
	"github.com/caddy-model-gateway/gateway/tasks"
)

func init() {
	caddy.RegisterModule(App{})
}

// App is the gateway app: the database, the channel table and the price
// table that the gateway's HTTP handlers share.
type App struct {
	// Database to use; defaults to SQLite at ./data/gateway.db.
	Database *DatabaseConfig `json:"database,omitempty"`
	// Channels are the upstreams.
	Channels []*ChannelConfig `json:"channels,omitempty"`
	// Prices by model, in USD.
	Prices map[string]*PriceConfig `json:"prices,omitempty"`
	// PriceFiles are price catalogues read from disk at every load, for
	// the models Prices does not price (billing.PriceFile).
	PriceFiles []PriceFileConfig `json:"price_files,omitempty"`
	// TokenCacheTTL is how long a key's token and user are trusted before
	// they are re-read (in the background); disabling a token takes effect
	// within about this long. Default 5s.
	TokenCacheTTL caddy.Duration `json:"token_cache_ttl,omitempty"`
	// LeaseTTL is how long a slice of a balance leased from the database
	// lives unrenewed: a killed instance's slices come back after it.
	// Default twelve token_cache_ttl (renewals); at least three.
	LeaseTTL caddy.Duration `json:"lease_ttl,omitempty"`
	// ClientSecretMaxTTL is the longest a Realtime client secret lives,
	// whatever its request asks (default 2h; a secret lives 10m unless it
	// asks otherwise).
	ClientSecretMaxTTL caddy.Duration `json:"client_secret_max_ttl,omitempty"`
	// MaxRequestBody bounds a client's request body. Default 32 MiB.
	MaxRequestBody int64 `json:"max_request_body,omitempty"`
	// MaxUploadSize bounds a multipart upload (image edits,
	// transcriptions), which is spooled to disk, never held in memory;
	// a larger one gets a 413. Default 25 MiB.
	MaxUploadSize int64 `json:"max_upload_size,omitempty"`
	// MaxInflightUploads bounds the bytes of uploads spooled to disk at
	// once, process-wide; past it uploads get a 503. Default 1 GiB.
	MaxInflightUploads int64 `json:"max_inflight_uploads,omitempty"`
	// MaxInflightUploadsPerKey and MaxInflightUploadsPerAddress bound the
	// share of MaxInflightUploads one key, and one client address (IPv6:
	// its /64), may hold; past it their uploads get a 429. Default a
	// quarter of MaxInflightUploads each, at least MaxUploadSize.
	MaxInflightUploadsPerKey     int64 `json:"max_inflight_uploads_per_key,omitempty"`
	MaxInflightUploadsPerAddress int64 `json:"max_inflight_uploads_per_address,omitempty"`
	// MaxAttempts bounds how many channels one request tries. Default 3.
	MaxAttempts int `json:"max_attempts,omitempty"`
	// StreamDrainTimeout is how long a stream's upstream is read on after
	// its client has gone, for the usage it reports at its end (nothing is
	// written); past it the stream is billed on what was known. Default
	// 30s; negative: off, the upstream is hung up on with the client.
	StreamDrainTimeout caddy.Duration `json:"stream_drain_timeout,omitempty"`
	// StreamDrainMaxBytes bounds the bytes of such a drain. Default 4 MiB.
	StreamDrainMaxBytes int64 `json:"stream_drain_max_bytes,omitempty"`
	// DefaultMaxTokens is the completion allowance reserved for a request
	// that sets no max_tokens. Default 1024.
	DefaultMaxTokens int64 `json:"default_max_tokens,omitempty"`
	// Metrics sets the breakdown of the gateway's metrics.
	Metrics *MetricsConfig `json:"metrics,omitempty"`
	// Retention bounds how long usage rows are kept; off by default.
	Retention *RetentionConfig `json:"retention,omitempty"`
	// MaxInflightBody bounds the bytes of request bodies being read and
	// decoded at once, process-wide, counted as they arrive; past it
	// requests get a 503. Default 256 MiB.
	MaxInflightBody int64 `json:"max_inflight_body,omitempty"`
	// MaxInflightBodyPerKey and MaxInflightBodyPerAddress bound the share
	// of MaxInflightBody one key, and one client address (IPv6: its /64),
	// may hold; past it their requests get a 429. Default a quarter of
	// MaxInflightBody each, at least MaxRequestBody.
	MaxInflightBodyPerKey     int64 `json:"max_inflight_body_per_key,omitempty"`
	MaxInflightBodyPerAddress int64 `json:"max_inflight_body_per_address,omitempty"`
	// MaxElements bounds the elements of any one JSON array or object in a
	// request (messages, parts, tools, inputs). Default 10,000.
	MaxElements int `json:"max_elements,omitempty"`
	// MaxFetchedImages bounds the images one request gives by URL, which
	// the gateway fetches for upstreams that take only inline images.
	// Default 16.
	MaxFetchedImages int `json:"max_fetched_images,omitempty"`
	// MaxFetchedBytes bounds the bytes of one request's fetched images
	// together. Default 64 MiB.
	MaxFetchedBytes int64 `json:"max_fetched_bytes,omitempty"`
	// ImageFetchPorts are the ports fetched image URLs may use. Default 80
	// and 443.
	ImageFetchPorts []int `json:"image_fetch_ports,omitempty"`
	// Health sets when failing channels are ejected.
	Health *HealthConfig `json:"health,omitempty"`
	// PartTokens, when set, is what each image part of a prompt reserves
	// on every model. Unset, each model reserves the most its channels'
	// vendors document for one image (adapters.ImageTokens: Anthropic
	// 1,600, Gemini 1,120, OpenAI 1,445 up to 48,169 for gpt-4o-mini),
	// 1,600 on a channel whose adapter documents none.
	PartTokens int64 `json:"part_tokens,omitempty"`
	// Limits are the default rate limits of every key.
	Limits *LimitsConfig `json:"limits,omitempty"`
	// Usage tunes how usage rows are recorded.
	Usage *UsageConfig `json:"usage,omitempty"`
	// Tasks tunes how task-style generation (/api/generate/*) is followed.
	Tasks *TasksConfig `json:"tasks,omitempty"`
	// Batches bounds /v1/files and the batch endpoints (docs/batches.md).
	Batches *BatchesConfig `json:"batches,omitempty"`

	// Registration lets people create their own accounts on the web
	// console. Off by default: an administrator creates users.
	Registration bool `json:"registration,omitempty"`
	// InvitationReward is the invitation quota (units) an inviter earns
	// for each user who registers with their invitation code, once that
	// user pays at least InvitationMinPayment units (0: the reward itself)
	// at once, or redeems a plan code when InvitationPlanCodes is on.
	InvitationReward     int64 `json:"invitation_reward,omitempty"`
	InvitationMinPayment int64 `json:"invitation_min_payment,omitempty"`
	InvitationPlanCodes  bool  `json:"invitation_plan_codes,omitempty"`
	// SessionLifetime is how long a web login lasts unused; each use slides
	// it forward. Default 7 days.
	SessionLifetime caddy.Duration `json:"session_lifetime,omitempty"`
	// SessionMaxLifetime ends a web login this long after it was made,
	// however often it is used. Default 30 days (or SessionLifetime when
	// that is longer).
	SessionMaxLifetime caddy.Duration `json:"session_max_lifetime,omitempty"`
	// AccountRateLimit bounds login, registration and redemption attempts
	// per client address and per user. Default 10 a minute.
	AccountRateLimit *RateLimitConfig `json:"account_rate_limit,omitempty"`
	// RegistrationRateLimit bounds the accounts registered per client
	// address (IPv6: per /64). Default 10 an hour.
	RegistrationRateLimit *RateLimitConfig `json:"registration_rate_limit,omitempty"`
	// SSO signs people in to the console through an identity provider.
	SSO *SSOConfig `json:"sso,omitempty"`
	// RequireSecondFactor "admins" sends an administrator signed in with a
	// password and no second factor to enrol one before the console's
	// administration answers; "" requires none.
	RequireSecondFactor string `json:"require_second_factor,omitempty"`
	// ResetLinkLifetime is how long an administrator's password reset
	// link lasts. Default 1h.
	ResetLinkLifetime caddy.Duration `json:"reset_link_lifetime,omitempty"`
	// TraceContent records message content on traced requests' spans, cut
	// to this many bytes per attribute; 0 (the default) records none.
	TraceContent int64 `json:"trace_content,omitempty"`
	// Affinity keeps a conversation on one channel and key; on by default.
	Affinity *routing.AffinityConfig `json:"affinity,omitempty"`
	// Budgets are spending windows, plans and model groups.
	Budgets *billing.BudgetConfig `json:"budgets,omitempty"`
	// Alerts announce budget crossings (docs/alerts.md); off without.
	Alerts *AlertsConfig `json:"alerts,omitempty"`
	// SecretsKey seals the vendor keys of channels made at runtime (in
	// the console or the admin API) in the database: give it as a
	// placeholder, {file./path} or {env.NAME}, never in clear, since the
	// admin API serves the configuration. Unset, such channels cannot be
	// given keys. "caddy gateway secrets rotate" changes it.
	SecretsKey string `json:"secrets_key,omitempty"`
	// AllowPrivateUpstreams are the hosts, addresses and networks (CIDR)
	// a channel made at runtime may name in its base URL although they
	// are not public (loopback, private, link-local): an administrator's
	// account must not reach into the gateway's own network unless the
	// operator said so. The Caddyfile's own channels are not checked.
	AllowPrivateUpstreams []string `json:"allow_private_upstreams,omitempty"`
	// Cache is the exact response cache; off unless enabled.
	Cache *cache.Config `json:"cache,omitempty"`
	// Payments is self-serve top-up through a payment provider; off when unset.
	Payments *PaymentsConfig `json:"payments,omitempty"`

	db       *database
	channels *routing.Set
	prices   map[string]*billing.Price // the Caddyfile's
	// upstreams and priceTable are what requests read: the Caddyfile's
	// channels and prices and those made at runtime (runtimecfg)
	upstreams  *engine.UpstreamTable
	priceTable *engine.PriceTable
	// static and staticUpstreams are the Caddyfile's channels
	static          []*routing.Channel
	staticUpstreams map[string]*engine.Upstream
	runtime         *runtimecfg.Runtime
	// partTokens is what one image part reserves, by model (see PartTokens)
	partTokens *engine.ImageParts
	// dialects in routing order
	dialects []adapters.Dialect
	// transports by timeouts, shared by the channels that agree on them
	transports engine.Transports
	health     routing.HealthPolicy
	// engine plans channels and fails over; handlers copy it with their
	// own logger. Its Upstreams are the one record of each channel's
	// adapter, client, bounds and allowance; a.channels its routing and
	// health.
	engine *engine.Engine
	// gate admits every request: rate limits, reservation, usage slot
	gate     *billing.Gate
	inflight *bodies.Budget
	spooled  *bodies.Budget // upload bytes on disk
	fetch    *adapters.FetchPolicy
	log      *zap.Logger

	// this configuration's metrics and retention worker
	metrics   *metrics.Relay
	retention *billing.Retention
	// this configuration's task engine, and the task endpoints' dialect
	tasks       *tasks.Engine
	batchDir    string // where files' bytes are kept (batches.go)
	taskDialect adapters.Dialect
	// this configuration's budget alerts, nil when off
	alerts       *alerts.Notifier
	unhookAlerts func()
	// payments is self-serve top-up; nil when not configured
	payments *payments.Service
}

// DatabaseConfig names a store driver and its data source.
type DatabaseConfig struct {
	Driver string `json:"driver,omitempty"`
	DSN    string `json:"dsn,omitempty"`
}

// ChannelConfig is one upstream as configured.
type ChannelConfig struct {
	Name string `json:"name"`
	// AdapterRaw is the channel's vendor family: a gateway.adapters module
	// named by its "type", with that adapter's own options beside it.
	AdapterRaw json.RawMessage `json:"adapter,omitempty" caddy:"namespace=gateway.adapters inline_key=type"`
	// Type is the short form of an adapter without options: "type":
	// "openai" means "adapter": {"type": "openai"}.
	Type     string            `json:"type,omitempty"`
	BaseURL  string            `json:"base_url,omitempty"`
	Keys     []string          `json:"keys,omitempty"`
	Models   []string          `json:"models,omitempty"`
	ModelMap map[string]string `json:"model_map,omitempty"`
	Priority int               `json:"priority,omitempty"`
	Weight   int               `json:"weight,omitempty"`
	// AllowFields and AllowBetas are the price-changing passthrough body
	// fields (service_tier, tools.web_search, ...) and vendor beta flags
	// the channel relays: the operator accepts the vendor's price for them
	// and prices the model accordingly. Others are refused with a 400.
	AllowFields []string `json:"allow_fields,omitempty"`
	AllowBetas  []string `json:"allow_betas,omitempty"`
	// Version is refused with a message: it moved into the adapter's own
	// options ("adapter": {"type": "anthropic", "version": "..."}).
	Version string `json:"version,omitempty"`

	// DialTimeout bounds connecting to the upstream. Default 10s.
	DialTimeout caddy.Duration `json:"dial_timeout,omitempty"`
	// ResponseHeaderTimeout bounds the wait for the upstream's status
	// line; on expiry the next channel is tried. Default 60s.
	ResponseHeaderTimeout caddy.Duration `json:"response_header_timeout,omitempty"`
	// StreamIdleTimeout is the longest silence between two stream events;
	// on expiry the stream ends with an error event. Default 120s.
	StreamIdleTimeout caddy.Duration `json:"stream_idle_timeout,omitempty"`
	// Timeout bounds a whole non-streamed answer. Default 10m.
	Timeout caddy.Duration `json:"timeout,omitempty"`
	// MaxResponseBody bounds a non-streamed answer, after decompression;
	// a larger one is a 502. Default 64 MiB.
	MaxResponseBody int64 `json:"max_response_body,omitempty"`
	// MaxStreamEvent bounds one stream event; a larger one ends the
	// stream with an error event. Default 32 MiB.
	MaxStreamEvent int64 `json:"max_stream_event,omitempty"`

	adapter string // the adapter's name, while the Caddyfile is parsed
}

// CaddyModule returns the Caddy module information.
func (App) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "gateway",
		New: func() caddy.Module { return new(App) },
	}
}

// Provision sets up the app.
func (a *App) Provision(ctx caddy.Context) error {
	a.log = ctx.Logger()
	repl := caddy.NewReplacer()
	if a.TokenCacheTTL <= 0 {
		a.TokenCacheTTL = caddy.Duration(5 * time.Second)
	}
	if a.RequireSecondFactor != "" && a.RequireSecondFactor != "admins" {
		return fmt.Errorf("require_second_factor is \"admins\" or empty, not %q", a.RequireSecondFactor)
	}
	if a.LeaseTTL <= 0 {
		a.LeaseTTL = 12 * a.TokenCacheTTL
	} else if a.LeaseTTL < 3*a.TokenCacheTTL {
		return fmt.Errorf("lease_ttl %s is under three token_cache_ttl (%s): leases renewed that often would run out between renewals",
			time.Duration(a.LeaseTTL), time.Duration(3*a.TokenCacheTTL))
	}
	if a.MaxRequestBody <= 0 {
		a.MaxRequestBody = 32 << 20
	}
	if a.MaxAttempts <= 0 {
		a.MaxAttempts = 3
	}
	drain := engine.ConfiguredDrain(time.Duration(a.StreamDrainTimeout), a.StreamDrainMaxBytes)
	if a.MaxUploadSize <= 0 {
		a.MaxUploadSize = defaultMaxUploadSize
	}
	if a.MaxInflightUploads <= 0 {
		a.MaxInflightUploads = defaultMaxInflightUploads
	}
	a.spooled = bodies.NewBudget(relayhttp.BodyLimits(a.MaxInflightUploads, a.MaxInflightUploadsPerKey, a.MaxInflightUploadsPerAddress, a.MaxUploadSize))
	if a.DefaultMaxTokens <= 0 {
		a.DefaultMaxTokens = 1024
	}
	if a.MaxInflightBody <= 0 {
		a.MaxInflightBody = 256 << 20
	}
	if a.MaxElements <= 0 {
		a.MaxElements = adapters.DefaultMaxElements
	}
	a.inflight = bodies.NewBudget(relayhttp.BodyLimits(a.MaxInflightBody, a.MaxInflightBodyPerKey, a.MaxInflightBodyPerAddress, a.MaxRequestBody))
	if a.MaxFetchedImages <= 0 {
		a.MaxFetchedImages = 16
	}
	if a.MaxFetchedBytes <= 0 {
		a.MaxFetchedBytes = 64 << 20
	}
	// image fetches at once, process-wide
	a.fetch = adapters.NewFetchPolicy(a.MaxFetchedImages, a.MaxFetchedBytes, 64)
	a.fetch.Ports = a.ImageFetchPorts
	dialects, err := loadDialects(ctx)
	if err != nil {
		return err
	}
	a.dialects = dialects
	if err := a.provisionPrices(); err != nil {
		return err
	}
	a.health = a.Health.policy()
	upstreams, err := a.provisionChannels(ctx, repl)
	if err != nil {
		return err
	}

	dbc := DatabaseConfig{Driver: "sqlite", DSN: "./data/gateway.db"}
	if a.Database != nil {
		if a.Database.Driver != "" {
			dbc.Driver = a.Database.Driver
		}
		if a.Database.DSN != "" {
			dbc.DSN = repl.ReplaceAll(a.Database.DSN, "")
		}
		if store.DSNHoldsPassword(a.Database.Driver, a.Database.DSN) {
			a.log.Warn("the database's data source name holds a password, which the admin API serves with the configuration: " +
				"put it in an {env.X} placeholder or the PGPASSWORD environment variable instead")
		}
	}
	a.batchDir = a.Batches.dir(dbc)
	db, err := openDatabase(dbc, a.log, time.Duration(a.TokenCacheTTL), time.Duration(a.LeaseTTL), a.Usage.writerConfig(repl))
	if err != nil {
		return err
	}
	a.db = db
	reg := ctx.GetMetricsRegistry()
	if err := metrics.Register(reg, db.Metrics.Collectors...); err != nil {
		return fmt.Errorf("registering the database's metrics: %w", err)
	}
	if a.metrics, err = metrics.NewRelay(reg, a.Metrics != nil && a.Metrics.PerUser, a.dialects, a.channels); err != nil {
		return fmt.Errorf("registering the gateway's metrics: %w", err)
	}
	a.gate = &billing.Gate{Limiter: db.Limiter, Ledger: db.Ledger, Usage: db.Writer}
	if a.Limits != nil {
		a.gate.Limits = *a.Limits
	}
	if a.gate.Budgets, err = a.Budgets.Build(db.Spend, db.Store, time.Duration(a.TokenCacheTTL)); err != nil {
		return err
	}
	a.upstreams = engine.NewUpstreamTable(upstreams)
	a.priceTable = engine.NewPriceTable(a.prices)
	a.engine = &engine.Engine{Channels: a.channels, Upstreams: a.upstreams, Gate: a.gate,
		Prices: a.priceTable, DefaultMaxTokens: a.DefaultMaxTokens, PartTokens: a.partTokens.Tokens, Rows: db.Writer, Meter: a.metrics, MaxAttempts: a.MaxAttempts, Health: a.health,
		FailureLog: &routing.LogThrottle{Interval: engine.FailureLogInterval}, Log: a.log, Observer: a.metrics, TraceContent: int(a.TraceContent),
		Drain: drain}
	if a.engine.Cache, err = responseCache(a.Cache, db.Store, a.log, reg); err != nil {
		return err
	}
	if a.engine.Affinity, err = affinityTable(ctx, a.Affinity); err != nil {
		return fmt.Errorf("registering prompt-cache affinity's metrics: %w", err)
	}
	if a.Retention != nil && a.Retention.Usage > 0 {
		a.retention = a.Retention.sweeper(db, a.log.Named("retention"))
	}
	a.taskDialect = tasks.Dialect{Dialect: a.dialects[len(a.dialects)-1]}
	a.tasks = a.newTaskEngine()
	if a.Alerts != nil {
		if a.alerts, err = a.Alerts.notifier(a, repl); err != nil {
			return err
		}
		if err := metrics.Register(reg, metrics.Alerts(a.alerts)...); err != nil {
			return fmt.Errorf("registering the alerts' metrics: %w", err)
		}
	}
	if a.payments, err = a.Payments.service(ctx, a); err != nil {
		return err
	}
	return a.provisionRuntime(ctx, repl)
}

// loadDialects returns every adapter that is also a client dialect, in the
// order they are asked to claim a request: by name, fallbacks last. A
// dialect takes no options: what a client speaks is the vendor's to say.
func loadDialects(ctx caddy.Context) ([]adapters.Dialect, error) {
	var specific, fallback []adapters.Dialect
	for _, name := range knownAdapters() {
		info, err := caddy.GetModule("gateway.adapters." + name)
		if err != nil {
			return nil, err
		}
		if _, ok := info.New().(adapters.Dialect); !ok {
			continue
		}
		mod, err := ctx.LoadModuleByID(string(info.ID), json.RawMessage("{}"))
		if err != nil {
			return nil, fmt.Errorf("loading dialect %s: %w", name, err)
		}
		d := mod.(adapters.Dialect)
		if f, ok := d.(adapters.Fallback); ok && f.Fallback() {
			fallback = append(fallback, d)
		} else {
			specific = append(specific, d)
		}
	}
	return append(specific, fallback...), nil
}

func knownAdapters() []string {
	var names []string
	for _, m := range caddy.GetModules("gateway.adapters") {
		names = append(names, m.ID.Name())
	}
	sort.Strings(names)
	return names
}

// Start implements caddy.App. It starts the configuration's own workers
// (usage retention); the shared database's work outlives a reload.
func (a *App) Start() error {
	if a.retention != nil {
		a.retention.Start()
	}
	a.tasks.Start()
	a.startAlerts()
	a.runtime.Start()
	return nil
}

// Stop implements caddy.App. It drains the configuration's workers.
// In-flight requests may still be finishing on the old configuration; the
// shared database drains when its last user is cleaned up.
func (a *App) Stop() error {
	if a.retention != nil {
		a.retention.Stop()
	}
	a.tasks.Stop()
	a.stopAlerts()
	a.runtime.Stop()
	return nil
}

// Cleanup releases the app's hold on the shared database and its idle
// upstream connections.
func (a *App) Cleanup() error {
	if a.runtime != nil {
		a.runtime.Lock()
		defer a.runtime.Unlock()
	}
	for _, c := range a.transports {
		c.CloseIdleConnections()
	}
	if a.db != nil {
		a.db.UnwatchRuntime(a)
		return a.db.release()
	}
	return nil
}

// Interface guards.
var (
	_ caddy.App          = (*App)(nil)
	_ caddy.Provisioner  = (*App)(nil)
	_ caddy.CleanerUpper = (*App)(nil)
)
