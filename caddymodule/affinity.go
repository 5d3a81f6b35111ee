package caddymodule

import (
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddy-model-gateway/gateway/metrics"
	"github.com/caddy-model-gateway/gateway/routing"
)

// affinity is the process's one binding table, so a reload keeps
// conversations where their prompt caches are; max_entries bounds it.
var affinity = routing.NewAffinity(0, 0)

// affinityTable is the shared binding table configured by ac, its metrics
// in ctx's registry; nil when affinity is off.
func affinityTable(ctx caddy.Context, ac *routing.AffinityConfig) (*routing.Affinity, error) {
	if ac != nil && ac.Off {
		return nil, nil
	}
	affinity.Apply(ac)
	return affinity, metrics.NewAffinity(ctx.GetMetricsRegistry(), affinity)
}

// parseAffinity: affinity off | affinity { ttl <duration>; max_entries <n> }
func parseAffinity(d *caddyfile.Dispenser) (*routing.AffinityConfig, error) {
	ac := &routing.AffinityConfig{}
	set := func(opt, v string) error {
		if err := ac.Set(opt, v); err != nil {
			return d.WrapErr(err)
		}
		return nil
	}
	if args := d.RemainingArgs(); len(args) > 0 {
		return ac, set(strings.Join(args, " "), "")
	}
	return ac, eachOption(d, set)
}
