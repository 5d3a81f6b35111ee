package caddymodule

import (
	"strconv"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddy-model-gateway/gateway/billing"
)

// parseBudgetOption reads the spending options of the gateway block
// (docs/budgets.md):
//
//	budget_timezone <IANA zone>
//	models_group <name> <model or glob>...
//	budget_group <name> { <window> <usd>; plan <name> }
//	plan <name> { <window> <usd>; models <model|group:g|group g>...; rpm|tpm|max_parallel <n>; then balance }
//
// where <window> is 5h (or "window 5h"), daily, weekly, monthly or lifetime.
func (a *App) parseBudgetOption(d *caddyfile.Dispenser) error {
	if a.Budgets == nil {
		a.Budgets = &billing.BudgetConfig{}
	}
	c, opt := a.Budgets, d.Val()
	args := d.RemainingArgs()
	switch {
	case opt == "budget_timezone" && len(args) == 1:
		c.Timezone = args[0]
		return nil
	case opt == "models_group" && len(args) >= 2:
		c.ModelGroups = setIn(c.ModelGroups, args[0], args[1:])
		return nil
	case opt == "budget_group" && len(args) == 1:
		g := &billing.GroupConfig{Windows: map[string]string{}}
		c.Groups = setIn(c.Groups, args[0], g)
		return parseWindowsBlock(d, g.Windows, func(opt string, v []string) bool {
			if opt == "plan" && len(v) == 1 {
				g.Plan = v[0]
				return true
			}
			return false
		})
	case opt == "plan" && len(args) == 1:
		p := &billing.PlanConfig{Windows: map[string]string{}}
		c.Plans = setIn(c.Plans, args[0], p)
		return parseWindowsBlock(d, p.Windows, func(opt string, v []string) bool {
			switch {
			case opt == "models" && len(v) == 2 && v[0] == "group":
				p.Models = append(p.Models, billing.GroupPrefix+v[1])
			case opt == "models" && len(v) > 0:
				p.Models = append(p.Models, v...)
			case opt == "then" && len(v) == 1 && v[0] == "balance":
				p.ThenBalance = true
			case (opt == "rpm" || opt == "tpm" || opt == "max_parallel") && len(v) == 1:
				n, err := strconv.ParseInt(v[0], 10, 64)
				if err != nil || n < 0 {
					return false
				}
				*map[string]*int64{"rpm": &p.RPM, "tpm": &p.TPM, "max_parallel": &p.MaxParallel}[opt] = n
			default:
				return false
			}
			return true
		})
	}
	return d.ArgErr()
}

// parseWindowsBlock reads `<window> <usd>` lines into windows and gives
// other lines to other, whose false is an error naming the line.
func parseWindowsBlock(d *caddyfile.Dispenser, windows map[string]string, other func(opt string, args []string) bool) error {
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		opt, args := d.Val(), d.RemainingArgs()
		if opt == "window" && len(args) == 2 {
			opt, args = args[0], args[1:]
		}
		if _, ok := billing.ParseWindowKind(opt); ok && len(args) == 1 {
			if _, err := billing.ParseUSD(args[0]); err != nil {
				return d.Errf("%s: %v", opt, err)
			}
			windows[opt] = args[0]
			continue
		}
		if !other(opt, args) {
			return d.Errf("unrecognized or malformed line %q %q: windows are %s", opt, args, billing.WindowNames())
		}
	}
	return nil
}

func setIn[V any](m map[string]V, k string, v V) map[string]V {
	if m == nil {
		m = map[string]V{}
	}
	m[k] = v
	return m
}
