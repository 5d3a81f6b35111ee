package caddymodule

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/dustin/go-humanize"
)

func init() {
	httpcaddyfile.RegisterGlobalOption("gateway", parseGlobalOption)
	httpcaddyfile.RegisterHandlerDirective("gateway_auth", parseAuth)
	httpcaddyfile.RegisterHandlerDirective("gateway_relay", parseRelay)
	httpcaddyfile.RegisterHandlerDirective("gateway_health", parseHealth)
	httpcaddyfile.RegisterHandlerDirective("gateway_tasks", parseTasksHandler)
	httpcaddyfile.RegisterDirectiveOrder("gateway_health", httpcaddyfile.Before, "reverse_proxy")
	// outside a route block, authenticate and relay where a proxy would go
	// (tasks between them: it passes on every path but its own)
	httpcaddyfile.RegisterDirectiveOrder("gateway_auth", httpcaddyfile.Before, "reverse_proxy")
	httpcaddyfile.RegisterDirectiveOrder("gateway_tasks", httpcaddyfile.Before, "reverse_proxy")
	httpcaddyfile.RegisterDirectiveOrder("gateway_relay", httpcaddyfile.Before, "reverse_proxy")
}

// parseGlobalOption sets up the gateway app from the global option:
//
//	gateway {
//		database sqlite <path> | postgres <url or key=value DSN>
//		token_cache_ttl <duration>
//		lease_ttl <duration>
//		max_request_body <size>
//		max_inflight_body <size>
//		max_inflight_body_per_key <size>
//		max_inflight_body_per_address <size>
//		max_elements <n>
//		max_fetched_images <n>
//		max_fetched_bytes <size>
//		image_fetch_ports <port>...
//		max_attempts <n>
//		stream_drain_timeout <duration>|off
//		stream_drain_max_bytes <size>
//		max_upload_size <size>
//		max_inflight_uploads <size>
//		max_inflight_uploads_per_key <size>
//		max_inflight_uploads_per_address <size>
//		default_max_tokens <n>
//		registration on|off
//		invitation_reward <units>
//		invitation_min_payment <units>
//		invitation_plan_codes on|off
//		session_lifetime <duration>
//		session_max_lifetime <duration>
//		client_secret_max_ttl <duration>  (Realtime client secrets; default 2h)
//		account_rate_limit <attempts> <window>
//		require_second_factor admins|off
//		reset_link_lifetime <duration>
//		sso oidc { ... }              (sso_caddyfile.go)
//		metrics {
//			per_user
//		}
//		affinity off | affinity { ttl <duration>; max_entries <n> }
//		cache { enable; ttl; max_bytes; scope; bill; replay; force; ... } (cache.go)
//		usage_retention <duration> {
//			interval <duration>
//			batch_size <n>
//			pause <duration>
//		part_tokens <n>
//		limits {
//			rpm <n>
//			tpm <n>
//			max_parallel <n>
//		}
//		usage {
//			journal <path>
//			queue_size <n>
//			linger <duration>
//			retry_interval <duration>
//			commit_timeout <duration>
//		}
//		health {
//			consecutive_failures <n>
//			base_ejection <duration>
//			max_ejection <duration>
//		}
//		channel <name> {
//			type <type>
//			base_url <url>
//			key <key>...
//			models <model>...
//			model_map <asked> <upstream>
//			priority <n>
//			weight <n>
//			dial_timeout <duration>
//			response_header_timeout <duration>
//			stream_idle_timeout <duration>
//			timeout <duration>
//			max_response_body <size>
//			max_stream_event <size>
//			allow_fields <field>...
//			allow_betas <beta>...
//		}
//		tasks {
//			max_age <duration>
//			poll_interval <duration>
//			max_poll_interval <duration>
//			poll_timeout <duration>
//			concurrency <n>
//			lease <duration>
//			max_file_size <size>
//		}
//		price <model> free
//		price <model> {
//			input <usd per 1M tokens>
//			output <usd per 1M tokens>
//			cached_input <usd per 1M tokens>
//			cache_write <usd per 1M tokens>
//			request <usd per request>
//			audio_input <usd per 1M audio tokens>
//			audio_output <usd per 1M audio tokens>
//			search_unit <usd per search unit>
//			max_output <tokens>
//			image [<size> [<quality>]] <usd per image>
//			image_input <usd per 1M image tokens>
//			audio_second <usd per second of audio>
//			characters <usd per 1M characters>
//			task <usd per task>
//			video_second <usd per second of video>
//			max_seconds <seconds>
//			free
//		}
//	}
func parseGlobalOption(d *caddyfile.Dispenser, existing any) (any, error) {
	if d.Next() {
		warnReloadVars(d.File())
	}
	d.Reset()
	app := new(App)
	// a second gateway block adds to the first
	if prev, ok := existing.(httpcaddyfile.App); ok && len(prev.Value) > 0 {
		if err := json.Unmarshal(prev.Value, app); err != nil {
			return nil, err
		}
	}
	if err := app.UnmarshalCaddyfile(d); err != nil {
		return nil, err
	}
	return httpcaddyfile.App{Name: "gateway", Value: caddyconfig.JSON(app, nil)}, nil
}

// UnmarshalCaddyfile reads the gateway global option.
func (a *App) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the option name
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		switch d.Val() {
		case "database":
			args := d.RemainingArgs()
			if len(args) != 2 {
				return d.Errf("database takes a driver and a data source, e.g. 'database sqlite ./data/gateway.db' or 'database postgres {env.GATEWAY_DB}'")
			}
			a.Database = &DatabaseConfig{Driver: args[0], DSN: args[1]}
		case "token_cache_ttl", "lease_ttl", "client_secret_max_ttl":
			name := d.Val()
			if !d.NextArg() {
				return d.ArgErr()
			}
			dur, err := caddy.ParseDuration(d.Val())
			if err != nil {
				return d.Errf("%s: %v", name, err)
			}
			target := &a.TokenCacheTTL
			switch name {
			case "lease_ttl":
				target = &a.LeaseTTL
			case "client_secret_max_ttl":
				target = &a.ClientSecretMaxTTL
			}
			*target = caddy.Duration(dur)
		case "max_request_body", "max_inflight_body", "max_fetched_bytes", "max_upload_size", "max_inflight_uploads",
			"max_inflight_body_per_key", "max_inflight_body_per_address", "max_inflight_uploads_per_key", "max_inflight_uploads_per_address":
			name := d.Val()
			if !d.NextArg() {
				return d.ArgErr()
			}
			size, err := parseSize(d.Val())
			if err != nil {
				return d.Errf("%s: %v", name, err)
			}
			switch name {
			case "max_request_body":
				a.MaxRequestBody = size
			case "max_inflight_body":
				a.MaxInflightBody = size
			case "max_upload_size":
				a.MaxUploadSize = size
			case "max_inflight_uploads":
				a.MaxInflightUploads = size
			case "max_inflight_body_per_key":
				a.MaxInflightBodyPerKey = size
			case "max_inflight_body_per_address":
				a.MaxInflightBodyPerAddress = size
			case "max_inflight_uploads_per_key":
				a.MaxInflightUploadsPerKey = size
			case "max_inflight_uploads_per_address":
				a.MaxInflightUploadsPerAddress = size
			default:
				a.MaxFetchedBytes = size
			}
		case "stream_drain_timeout":
			if !d.NextArg() {
				return d.ArgErr()
			}
			if d.Val() == "off" {
				a.StreamDrainTimeout = -1
				break
			}
			dur, err := caddy.ParseDuration(d.Val())
			if err != nil || dur <= 0 {
				return d.Errf("stream_drain_timeout: a positive duration or off, not %q", d.Val())
			}
			a.StreamDrainTimeout = caddy.Duration(dur)
		case "stream_drain_max_bytes":
			if !d.NextArg() {
				return d.ArgErr()
			}
			size, err := parseSize(d.Val())
			if err != nil || size <= 0 {
				return d.Errf("stream_drain_max_bytes: a positive size, not %q", d.Val())
			}
			a.StreamDrainMaxBytes = size
		case "max_attempts", "default_max_tokens", "max_elements", "max_fetched_images", "part_tokens":
			name := d.Val()
			if !d.NextArg() {
				return d.ArgErr()
			}
			n, err := strconv.Atoi(d.Val())
			if err != nil || n <= 0 {
				return d.Errf("%s must be a positive integer, not %q", name, d.Val())
			}
			switch name {
			case "max_attempts":
				a.MaxAttempts = n
			case "max_elements":
				a.MaxElements = n
			case "max_fetched_images":
				a.MaxFetchedImages = n
			case "part_tokens":
				a.PartTokens = int64(n)
			default:
				a.DefaultMaxTokens = int64(n)
			}
		case "registration", "invitation_reward", "invitation_min_payment", "invitation_plan_codes",
			"session_lifetime", "session_max_lifetime", "account_rate_limit", "registration_rate_limit",
			"require_second_factor", "reset_link_lifetime":
			if err := a.parseAccountOption(d); err != nil {
				return err
			}
		case "models_group", "budget_timezone", "budget_group", "plan":
			if err := a.parseBudgetOption(d); err != nil {
				return err
			}
		case "payments":
			pc, err := parsePayments(d)
			if err != nil {
				return err
			}
			a.Payments = pc
		case "sso":
			sso, err := parseSSO(d)
			if err != nil {
				return err
			}
			a.SSO = sso
		case "metrics":
			mc, err := parseMetrics(d)
			if err != nil {
				return err
			}
			a.Metrics = mc
		case "usage_retention":
			rc, err := parseRetention(d)
			if err != nil {
				return err
			}
			a.Retention = nil
			if rc.Usage > 0 {
				a.Retention = rc
			}
		case "trace_content":
			// no size: 16 KiB of each message attribute
			a.TraceContent = 16 << 10
			if d.NextArg() {
				size, err := parseSize(d.Val())
				if err != nil || size <= 0 || size > 1<<20 {
					return d.Errf("trace_content: a size from 1B to 1MiB, not %q", d.Val())
				}
				a.TraceContent = size
			}
		case "image_fetch_ports":
			args := d.RemainingArgs()
			if len(args) == 0 {
				return d.ArgErr()
			}
			for _, v := range args {
				p, err := strconv.Atoi(v)
				if err != nil || p <= 0 || p > 65535 {
					return d.Errf("image_fetch_ports: %q is not a port", v)
				}
				a.ImageFetchPorts = append(a.ImageFetchPorts, p)
			}
		case "cache":
			cc, err := parseCache(d, a.Cache)
			if err != nil {
				return err
			}
			a.Cache = cc
		case "affinity":
			ac, err := parseAffinity(d)
			if err != nil {
				return err
			}
			a.Affinity = ac
		case "health":
			hc, err := parseHealthPolicy(d)
			if err != nil {
				return err
			}
			a.Health = hc
		case "limits":
			lc, err := parseLimits(d)
			if err != nil {
				return err
			}
			a.Limits = lc
		case "tasks":
			tc, err := parseTasks(d)
			if err != nil {
				return err
			}
			a.Tasks = tc
		case "alerts":
			ac, err := parseAlerts(d)
			if err != nil {
				return err
			}
			a.Alerts = ac
		case "batches":
			bc, err := parseBatches(d)
			if err != nil {
				return err
			}
			a.Batches = bc
		case "usage":
			uc, err := parseUsage(d)
			if err != nil {
				return err
			}
			a.Usage = uc
		case "secrets_key", "allow_private_upstreams":
			if err := a.parseRuntimeOption(d); err != nil {
				return err
			}
		case "channel":
			ch, err := parseChannel(d)
			if err != nil {
				return err
			}
			a.Channels = append(a.Channels, ch)
		case "price":
			model, pc, err := parsePrice(d)
			if err != nil {
				return err
			}
			if a.Prices == nil {
				a.Prices = map[string]*PriceConfig{}
			}
			a.Prices[model] = pc
		case "prices_file":
			pf, err := parsePriceFile(d)
			if err != nil {
				return err
			}
			a.PriceFiles = append(a.PriceFiles, pf)
		default:
			return d.Errf("unrecognized gateway option %q", d.Val())
		}
	}
	return nil
}

// eachOption calls set for every `<option> <value>` line of the block after
// the current token; a line without a value, or with more than one, is an
// argument error.
func eachOption(d *caddyfile.Dispenser, set func(opt, v string) error) error {
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		opt := d.Val()
		if !d.NextArg() {
			return d.ArgErr()
		}
		v := d.Val()
		if d.NextArg() {
			return d.ArgErr()
		}
		if err := set(opt, v); err != nil {
			return err
		}
	}
	return nil
}

func parseAuth(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	h.Next()
	if h.NextArg() {
		return nil, h.ArgErr()
	}
	return new(Auth), nil
}

func parseRelay(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	h.Next()
	if h.NextArg() {
		return nil, h.ArgErr()
	}
	return new(Relay), nil
}

// parseSize reads a byte size such as 32MB or 10MiB.
func parseSize(s string) (int64, error) {
	n, err := humanize.ParseBytes(s)
	if err != nil {
		return 0, err
	}
	if n == 0 || n > 1<<40 {
		return 0, fmt.Errorf("size %q is out of range", s)
	}
	return int64(n), nil
}

// parseMetrics reads `metrics { per_user }`.
func parseMetrics(d *caddyfile.Dispenser) (*MetricsConfig, error) {
	mc := &MetricsConfig{}
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch d.Val() {
		case "per_user":
			if d.NextArg() {
				return nil, d.ArgErr()
			}
			mc.PerUser = true
		default:
			return nil, d.Errf("metrics: unrecognized option %q (known: per_user)", d.Val())
		}
	}
	return mc, nil
}

// parseRetention reads `usage_retention <duration> [{ interval <duration>
// batch_size <n> pause <duration> }]`; "off" or 0 keeps every row.
func parseRetention(d *caddyfile.Dispenser) (*RetentionConfig, error) {
	rc := &RetentionConfig{}
	if !d.NextArg() {
		return nil, d.Errf("usage_retention needs how long to keep usage rows, e.g. 'usage_retention 90d'")
	}
	if d.Val() != "off" {
		dur, err := caddy.ParseDuration(d.Val())
		if err != nil || dur < 0 {
			return nil, d.Errf("usage_retention: %q is not a duration such as 90d or 2160h", d.Val())
		}
		rc.Usage = caddy.Duration(dur)
	}
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	err := eachOption(d, func(opt, v string) error {
		switch opt {
		case "interval", "pause":
			dur, err := caddy.ParseDuration(v)
			if err != nil || dur <= 0 {
				return d.Errf("usage_retention: %s must be a positive duration, not %q", opt, v)
			}
			if opt == "interval" {
				rc.Interval = caddy.Duration(dur)
			} else {
				rc.Pause = caddy.Duration(dur)
			}
		case "batch_size":
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return d.Errf("usage_retention: batch_size must be a positive integer, not %q", v)
			}
			rc.BatchSize = n
		default:
			return d.Errf("usage_retention: unrecognized option %q", opt)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return rc, nil
}

// parseHealth reads `gateway_health [ready|live]`.
func parseHealth(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	h.Next()
	hc := new(Health)
	if h.NextArg() {
		hc.Check = h.Val()
		if hc.Check != "ready" && hc.Check != "live" {
			return nil, h.Errf("gateway_health takes ready or live, not %q", hc.Check)
		}
	}
	if h.NextArg() {
		return nil, h.ArgErr()
	}
	return hc, nil
}

func parseTasksHandler(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	h.Next()
	if h.NextArg() {
		return nil, h.ArgErr()
	}
	return new(Tasks), nil
}

// parseTasks reads `tasks { max_age <d> poll_interval <d> max_poll_interval
// <d> poll_timeout <d> concurrency <n> lease <d> max_file_size <size> }`.
func parseTasks(d *caddyfile.Dispenser) (*TasksConfig, error) {
	tc := &TasksConfig{}
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	err := eachOption(d, func(opt, v string) error {
		switch opt {
		case "max_age", "poll_interval", "max_poll_interval", "poll_timeout", "lease":
			dur, err := caddy.ParseDuration(v)
			if err != nil || dur <= 0 {
				return d.Errf("tasks: %s must be a duration above zero such as 5s, not %q", opt, v)
			}
			*map[string]*caddy.Duration{"max_age": &tc.MaxAge, "poll_interval": &tc.PollInterval,
				"max_poll_interval": &tc.MaxPollInterval, "poll_timeout": &tc.PollTimeout, "lease": &tc.Lease}[opt] = caddy.Duration(dur)
		case "concurrency":
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return d.Errf("tasks: concurrency must be a positive integer, not %q", v)
			}
			tc.Concurrency = n
		case "max_file_size":
			size, err := parseSize(v)
			if err != nil {
				return d.Errf("tasks: max_file_size: %v", err)
			}
			tc.MaxFileSize = size
		default:
			return d.Errf("tasks: unrecognized option %q (known: max_age, poll_interval, max_poll_interval, poll_timeout, concurrency, lease, max_file_size)", opt)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return tc, nil
}
