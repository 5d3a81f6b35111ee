package caddymodule

// Parsing of the gateway block's per-channel and per-model parts: channels
// (with their adapter options and health policy) and prices.

import (
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddy-model-gateway/gateway/billing"
)

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
			ic, err := billing.ParseImagePrice(d.RemainingArgs())
			if err != nil {
				return "", nil, d.Errf("price %s: %v", model, err)
			}
			pc.Images = append(pc.Images, ic)
			continue
		}
		if opt == "above" {
			if err := parsePriceTier(d, model, pc); err != nil {
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
		if err := pc.Set(model, opt, v); err != nil {
			return "", nil, d.WrapErr(err)
		}
	}
	return model, pc, nil
}
