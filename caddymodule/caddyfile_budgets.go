package caddymodule

import (
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddy-model-gateway/gateway/billing"
)

// parseBudgetOption reads budget_timezone, models_group, plan or
// budget_group as billing.BudgetConfig.Set says (docs/budgets.md).
func (a *App) parseBudgetOption(d *caddyfile.Dispenser) error {
	if a.Budgets == nil {
		a.Budgets = &billing.BudgetConfig{}
	}
	opt, args := d.Val(), d.RemainingArgs()
	line, err := a.Budgets.Set(opt, args)
	if err != nil {
		return d.Err(err.Error())
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		if err := line(d.Val(), d.RemainingArgs()); err != nil {
			return d.Errf("%s %v: %v", opt, args, err)
		}
	}
	return nil
}
