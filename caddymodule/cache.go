package caddymodule

import (
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/caddy-model-gateway/gateway/cache"
)

// responses are the process's cached answers, shared by every
// configuration so a reload keeps them; the cache block bounds them.
var responses = cache.NewMemory(cache.DefaultMaxBytes)

// parseCache reads the response cache's block:
//
//	cache {
//		enable
//		mode auto|request
//		ttl <duration>
//		max_bytes <size>
//		max_entry_bytes <size>
//		scope user|key|shared
//		bill <percent>
//		replay at_once|pace
//		force
//		keys <name or id>...
//		plans <plan>...
//	}
//
// A bare `cache` line is `cache { enable }`.
func parseCache(d *caddyfile.Dispenser, prev *cache.Config) (*cache.Config, error) {
	c := prev
	if c == nil {
		c = new(cache.Config)
	}
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	bare := true
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		bare = false
		if err := c.Set(d.Val(), d.RemainingArgs()); err != nil {
			return nil, d.WrapErr(err)
		}
	}
	if bare {
		c.Enable = true
	}
	return c, nil
}
