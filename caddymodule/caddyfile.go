package caddymodule

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

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
//		max_request_body <size>
//		max_inflight_body <size>
//		max_elements <n>
//		max_fetched_images <n>
//		max_fetched_bytes <size>
//		image_fetch_ports <port>...
//		max_attempts <n>
//		max_upload_size <size>
//		max_inflight_uploads <size>
//		default_max_tokens <n>
//		registration on|off
//		invitation_reward <units>
//		session_lifetime <duration>
//		account_rate_limit <attempts> <window>
//		metrics {
//			per_user
//		}
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
		case "token_cache_ttl":
			if !d.NextArg() {
				return d.ArgErr()
			}
			dur, err := caddy.ParseDuration(d.Val())
			if err != nil {
				return d.Errf("token_cache_ttl: %v", err)
			}
			a.TokenCacheTTL = caddy.Duration(dur)
		case "max_request_body", "max_inflight_body", "max_fetched_bytes", "max_upload_size", "max_inflight_uploads":
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
			default:
				a.MaxFetchedBytes = size
			}
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
		case "registration", "invitation_reward", "session_lifetime", "account_rate_limit", "registration_rate_limit":
			if err := a.parseAccountOption(d); err != nil {
				return err
			}
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
		case "usage":
			uc, err := parseUsage(d)
			if err != nil {
				return err
			}
			a.Usage = uc
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

// parseHealthPolicy reads `health { consecutive_failures <n> base_ejection
// <d> max_ejection <d> }`.
func parseHealthPolicy(d *caddyfile.Dispenser) (*HealthConfig, error) {
	hc := &HealthConfig{}
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	err := eachOption(d, func(opt, v string) error {
		switch opt {
		case "consecutive_failures":
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return d.Errf("health: consecutive_failures must be a positive integer, not %q", v)
			}
			hc.ConsecutiveFailures = n
		case "base_ejection", "max_ejection":
			dur, err := caddy.ParseDuration(v)
			if err != nil || dur <= 0 {
				return d.Errf("health: %s must be a duration above zero such as 30s, not %q", opt, v)
			}
			if opt == "base_ejection" {
				hc.BaseEjection = caddy.Duration(dur)
			} else {
				hc.MaxEjection = caddy.Duration(dur)
			}
		default:
			return d.Errf("health: unrecognized option %q", opt)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return hc, nil
}

func parseChannel(d *caddyfile.Dispenser) (*ChannelConfig, error) {
	ch := &ChannelConfig{}
	if !d.NextArg() {
		return nil, d.Errf("channel needs a name: 'channel <name> { ... }'")
	}
	ch.Name = d.Val()
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		opt := d.Val()
		if opt == "type" {
			if err := parseAdapter(d, ch); err != nil {
				return nil, err
			}
			continue
		}
		args := d.RemainingArgs()
		one := func() (string, error) {
			if len(args) != 1 {
				return "", d.Errf("channel %s: %s takes exactly one value", ch.Name, opt)
			}
			return args[0], nil
		}
		var err error
		switch opt {
		case "base_url":
			ch.BaseURL, err = one()
		case "key", "keys":
			// an empty value ({$UNSET}) leaves no argument: the channel is
			// then skipped at start with a warning
			ch.Keys = append(ch.Keys, args...)
		case "models":
			if len(args) == 0 {
				return nil, d.Errf("channel %s: models needs at least one model name", ch.Name)
			}
			ch.Models = append(ch.Models, args...)
		case "model_map":
			if len(args) != 2 {
				return nil, d.Errf("channel %s: model_map takes the asked name and the upstream name", ch.Name)
			}
			if ch.ModelMap == nil {
				ch.ModelMap = map[string]string{}
			}
			ch.ModelMap[args[0]] = args[1]
		case "priority", "weight":
			var v string
			if v, err = one(); err == nil {
				n, convErr := strconv.Atoi(v)
				if convErr != nil || (opt == "weight" && n <= 0) {
					return nil, d.Errf("channel %s: %s must be an integer%s, not %q", ch.Name, opt, map[bool]string{true: " above zero"}[opt == "weight"], v)
				}
				if opt == "priority" {
					ch.Priority = n
				} else {
					ch.Weight = n
				}
			}
		case "dial_timeout", "response_header_timeout", "stream_idle_timeout", "timeout":
			var v string
			if v, err = one(); err == nil {
				dur, perr := caddy.ParseDuration(v)
				if perr != nil || dur <= 0 {
					return nil, d.Errf("channel %s: %s must be a duration above zero such as 30s, not %q", ch.Name, opt, v)
				}
				*map[string]*caddy.Duration{"dial_timeout": &ch.DialTimeout, "response_header_timeout": &ch.ResponseHeaderTimeout,
					"stream_idle_timeout": &ch.StreamIdleTimeout, "timeout": &ch.Timeout}[opt] = caddy.Duration(dur)
			}
		case "max_response_body", "max_stream_event":
			var v string
			if v, err = one(); err == nil {
				size, perr := parseSize(v)
				if perr != nil {
					return nil, d.Errf("channel %s: %s: %v", ch.Name, opt, perr)
				}
				if opt == "max_response_body" {
					ch.MaxResponseBody = size
				} else {
					ch.MaxStreamEvent = size
				}
			}
		case "allow_fields":
			ch.AllowFields = append(ch.AllowFields, args...)
		case "allow_betas":
			ch.AllowBetas = append(ch.AllowBetas, args...)
		case "version":
			typ := "<type>"
			if ch.adapter != "" {
				typ = ch.adapter
			}
			return nil, d.Errf("channel %s: version is now an option of the channel's adapter: write 'type %s { version %s }'", ch.Name, typ, strings.Join(args, " "))
		default:
			return nil, d.Errf("channel %s: unrecognized option %q", ch.Name, opt)
		}
		if err != nil {
			return nil, err
		}
	}
	if len(ch.AdapterRaw) == 0 {
		return nil, d.Errf("channel %s: 'type' is required", ch.Name)
	}
	return ch, nil
}

// parseAdapter reads `type <name> [{ options }]`: the options are the
// adapter's own, parsed by its module.
func parseAdapter(d *caddyfile.Dispenser, ch *ChannelConfig) error {
	if !d.NextArg() {
		return d.Errf("channel %s: type needs the adapter's name, e.g. 'type openai'", ch.Name)
	}
	name := d.Val()
	if len(ch.AdapterRaw) != 0 {
		return d.Errf("channel %s: type is given twice", ch.Name)
	}
	if _, err := caddy.GetModule("gateway.adapters." + name); err != nil {
		return d.Errf("channel %s: unknown type %q (known: %s)", ch.Name, name, strings.Join(knownAdapters(), ", "))
	}
	unm, err := caddyfile.UnmarshalModule(d, "gateway.adapters."+name)
	if err != nil {
		return err
	}
	ch.AdapterRaw = caddyconfig.JSONModuleObject(unm, "type", name, nil)
	ch.adapter = name
	return nil
}

func parsePrice(d *caddyfile.Dispenser) (string, *PriceConfig, error) {
	if !d.NextArg() {
		return "", nil, d.Errf("price needs a model: 'price <model> { input <usd> output <usd> }'")
	}
	model := d.Val()
	pc := &PriceConfig{}
	if d.NextArg() {
		if d.Val() != "free" || d.NextArg() {
			return "", nil, d.Errf("price %s: the only inline form is 'price %s free'", model, model)
		}
		pc.Free = true
		return model, pc, nil
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		opt := d.Val()
		if opt == "free" {
			pc.Free = true
			continue
		}
		if opt == "image" {
			if err := parseImagePrice(d, model, pc); err != nil {
				return "", nil, err
			}
			continue
		}
		if !d.NextArg() {
			return "", nil, d.ArgErr()
		}
		v := d.Val()
		if d.NextArg() {
			return "", nil, d.ArgErr()
		}
		switch opt {
		case "input":
			pc.Input = v
		case "output":
			pc.Output = v
		case "cached_input":
			pc.CachedInput = v
		case "cache_write":
			pc.CacheWrite = v
		case "request":
			pc.Request = v
		case "audio_input":
			pc.AudioInput = v
		case "audio_output":
			pc.AudioOutput = v
		case "search_unit":
			pc.SearchUnit = v
		case "image_input":
			pc.ImageInput = v
		case "audio_second":
			pc.AudioSecond = v
		case "characters":
			pc.Characters = v
		case "task":
			pc.Task = v
		case "video_second":
			pc.VideoSecond = v
		case "max_seconds":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n <= 0 {
				return "", nil, d.Errf("price %s: max_seconds must be a positive number of seconds, not %q", model, v)
			}
			pc.MaxSeconds = n
			continue
		case "max_output":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n <= 0 {
				return "", nil, d.Errf("price %s: max_output must be a positive number of tokens, not %q", model, v)
			}
			pc.MaxOutput = n
			continue
		default:
			return "", nil, d.Errf("price %s: unrecognized option %q", model, opt)
		}
		if _, err := (&PriceConfig{Input: v}).price(); err != nil {
			return "", nil, d.Errf("price %s: %s: %v", model, opt, err)
		}
	}
	return model, pc, nil
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
