package caddymodule

import (
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddy-model-gateway/gateway/alerts"
)

// parseAlerts reads
//
//	alerts {
//		webhook https://hooks.example.com/gateway
//		secret {env.ALERTS_SECRET}
//		thresholds 50% 80% 100%
//		balance_thresholds 80% 100%
//		timeout 10s
//		max_attempts 8
//		max_age 24h
//		backoff 1s 10m
//		queue 256
//		workers 4
//		poll_interval 10s
//		check_interval 1s
//		allow_private_addresses
//		keep 90d
//	}
func parseAlerts(d *caddyfile.Dispenser) (*AlertsConfig, error) {
	c := &AlertsConfig{}
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		opt, args := d.Val(), d.RemainingArgs()
		one := func() (string, error) {
			if len(args) != 1 {
				return "", d.Errf("alerts: %s takes one value", opt)
			}
			return args[0], nil
		}
		dur := func(v string) (caddy.Duration, error) {
			t, err := caddy.ParseDuration(v)
			if err != nil || t <= 0 {
				return 0, d.Errf("alerts: %s must be a duration above zero such as 5s, not %q", opt, v)
			}
			return caddy.Duration(t), nil
		}
		switch opt {
		case "webhook", "secret":
			v, err := one()
			if err != nil {
				return nil, err
			}
			if opt == "webhook" {
				c.Webhook = v
			} else {
				c.Secret = v
			}
		case "thresholds", "balance_thresholds":
			if len(args) == 0 {
				return nil, d.Errf("alerts: %s needs at least one percentage, such as 50%% 80%% 100%%", opt)
			}
			var ts []int
			for _, v := range args {
				p, err := alerts.ParsePercent(v)
				if err != nil {
					return nil, d.Errf("alerts: %s: %v", opt, err)
				}
				ts = append(ts, p)
			}
			if opt == "thresholds" {
				c.Thresholds = ts
			} else {
				c.BalanceThresholds = ts
			}
		case "timeout", "max_age", "poll_interval", "check_interval", "keep":
			v, err := one()
			if err != nil {
				return nil, err
			}
			t, err := dur(v)
			if err != nil {
				return nil, err
			}
			*map[string]*caddy.Duration{"timeout": &c.Timeout, "max_age": &c.MaxAge,
				"poll_interval": &c.PollInterval, "check_interval": &c.CheckInterval, "keep": &c.Keep}[opt] = t
		case "backoff":
			if len(args) < 1 || len(args) > 2 {
				return nil, d.Errf("alerts: backoff takes the first wait and, optionally, the longest: backoff 1s 10m")
			}
			var err error
			if c.Backoff, err = dur(args[0]); err != nil {
				return nil, err
			}
			if len(args) == 2 {
				if c.MaxBackoff, err = dur(args[1]); err != nil {
					return nil, err
				}
			}
		case "max_attempts", "queue", "workers":
			v, err := one()
			if err != nil {
				return nil, err
			}
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 || n > 100000 {
				return nil, d.Errf("alerts: %s must be a positive integer, not %q", opt, v)
			}
			*map[string]*int{"max_attempts": &c.MaxAttempts, "queue": &c.Queue, "workers": &c.Workers}[opt] = n
		case "allow_private_addresses":
			if len(args) != 0 {
				return nil, d.ArgErr()
			}
			c.AllowPrivateAddresses = true
		default:
			return nil, d.Errf("alerts: unrecognized option %q (known: webhook, secret, thresholds, balance_thresholds, timeout, "+
				"max_attempts, max_age, backoff, queue, workers, poll_interval, check_interval, allow_private_addresses, keep)", opt)
		}
	}
	return c, nil
}
