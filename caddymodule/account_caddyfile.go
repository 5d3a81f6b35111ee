package caddymodule

import (
	"strconv"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
)

func init() {
	httpcaddyfile.RegisterHandlerDirective("gateway_account", parseAccount)
	httpcaddyfile.RegisterHandlerDirective("gateway_console", parseConsole)
	// outside a route block, the account API and the pages answer before
	// the model endpoints are authenticated (this file's init runs before
	// caddyfile.go's, so these land ahead of gateway_auth)
	httpcaddyfile.RegisterDirectiveOrder("gateway_account", httpcaddyfile.Before, "reverse_proxy")
	httpcaddyfile.RegisterDirectiveOrder("gateway_console", httpcaddyfile.Before, "reverse_proxy")
}

// RateLimitConfig is a number of attempts allowed per window; the
// account package's Gate counts them.
type RateLimitConfig struct {
	Attempts int            `json:"attempts,omitempty"`
	Window   caddy.Duration `json:"window,omitempty"`
}

// parseAccountOption reads the gateway global option's account settings:
//
//	registration on|off
//	invitation_reward <units>
//	invitation_min_payment <units>
//	invitation_plan_codes on|off
//	session_lifetime <duration>
//	session_max_lifetime <duration>
//	account_rate_limit <attempts> <window>
//	registration_rate_limit <signups> <window>
//	require_second_factor admins|off
//	reset_link_lifetime <duration>
func (a *App) parseAccountOption(d *caddyfile.Dispenser) error {
	opt := d.Val()
	args := d.RemainingArgs()
	switch opt {
	case "registration":
		if len(args) != 1 || args[0] != "on" && args[0] != "off" {
			return d.Errf("registration takes 'on' or 'off'")
		}
		a.Registration = args[0] == "on"
	case "invitation_reward":
		if len(args) != 1 {
			return d.Errf("invitation_reward takes one number of quota units (1000000 = 1 USD)")
		}
		n, err := strconv.ParseInt(args[0], 10, 64)
		if err != nil || n < 0 {
			return d.Errf("invitation_reward must be a whole number of units, 0 or more, not %q", args[0])
		}
		a.InvitationReward = n
	case "invitation_min_payment":
		if len(args) != 1 {
			return d.Errf("invitation_min_payment takes one number of quota units (1000000 = 1 USD)")
		}
		n, err := strconv.ParseInt(args[0], 10, 64)
		if err != nil || n < 0 {
			return d.Errf("invitation_min_payment must be a whole number of units, 0 or more, not %q", args[0])
		}
		a.InvitationMinPayment = n
	case "invitation_plan_codes":
		if len(args) != 1 || args[0] != "on" && args[0] != "off" {
			return d.Errf("invitation_plan_codes takes 'on' or 'off'")
		}
		a.InvitationPlanCodes = args[0] == "on"
	case "session_lifetime":
		if len(args) != 1 {
			return d.Errf("session_lifetime takes one duration, e.g. 168h or 7d")
		}
		dur, err := caddy.ParseDuration(args[0])
		if err != nil || dur <= 0 {
			return d.Errf("session_lifetime must be a positive duration such as 168h or 7d, not %q", args[0])
		}
		a.SessionLifetime = caddy.Duration(dur)
	case "session_max_lifetime":
		if len(args) != 1 {
			return d.Errf("session_max_lifetime takes one duration, e.g. 720h or 30d")
		}
		dur, err := caddy.ParseDuration(args[0])
		if err != nil || dur <= 0 {
			return d.Errf("session_max_lifetime must be a positive duration such as 720h or 30d, not %q", args[0])
		}
		a.SessionMaxLifetime = caddy.Duration(dur)
	case "account_rate_limit", "registration_rate_limit":
		what := "attempts"
		if opt == "registration_rate_limit" {
			what = "signups"
		}
		if len(args) != 2 {
			return d.Errf("%s takes %s and a window, e.g. '%s 10 1m'", opt, what, opt)
		}
		n, err := strconv.Atoi(args[0])
		if err != nil || n <= 0 {
			return d.Errf("%s: %s must be a positive integer, not %q", opt, what, args[0])
		}
		dur, err := caddy.ParseDuration(args[1])
		if err != nil || dur <= 0 {
			return d.Errf("%s: window must be a positive duration, not %q", opt, args[1])
		}
		rl := &RateLimitConfig{Attempts: n, Window: caddy.Duration(dur)}
		if opt == "registration_rate_limit" {
			a.RegistrationRateLimit = rl
		} else {
			a.AccountRateLimit = rl
		}
	case "require_second_factor":
		if len(args) != 1 || args[0] != "admins" && args[0] != "off" {
			return d.Errf("require_second_factor takes 'admins' (administrators enrol TOTP or a passkey before the admin API answers their sessions) or 'off'")
		}
		a.RequireSecondFactor = args[0]
		if args[0] == "off" {
			a.RequireSecondFactor = ""
		}
	case "reset_link_lifetime":
		if len(args) != 1 {
			return d.Errf("reset_link_lifetime takes one duration, e.g. 1h")
		}
		dur, err := caddy.ParseDuration(args[0])
		if err != nil || dur < time.Minute || dur > 7*24*time.Hour {
			return d.Errf("reset_link_lifetime must be a duration from 1m to 7d, such as 1h, not %q", args[0])
		}
		a.ResetLinkLifetime = caddy.Duration(dur)
	}
	return nil
}

func parseAccount(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	return new(Account), noArgs(h)
}

func parseConsole(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	return new(Console), noArgs(h)
}

// noArgs consumes a directive that takes no arguments and no block.
func noArgs(h httpcaddyfile.Helper) error {
	h.Next()
	if h.NextArg() {
		return h.ArgErr()
	}
	return nil
}
