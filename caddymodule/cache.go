package caddymodule

import (
	"fmt"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/cache"
	"github.com/caddy-model-gateway/gateway/metrics"
	"github.com/caddy-model-gateway/gateway/routing"
	"github.com/caddy-model-gateway/gateway/store"
)

// responses are the process's cached answers, shared by every
// configuration so a reload keeps them; the cache block bounds them.
var responses = cache.NewMemory(cache.DefaultMaxBytes)

// responseCache is the cache cc configures: over the process's entries,
// or (store database) the database's, whose failures are logged at most
// once a second each.
func responseCache(cc *cache.Config, st store.Store, log *zap.Logger, reg prometheus.Registerer) (*cache.Cache, error) {
	c := cache.New(cc, responses, st)
	if c == nil {
		return nil, nil
	}
	m, err := metrics.NewResponseCache(reg, responses)
	if err != nil {
		return nil, fmt.Errorf("registering the response cache's metrics: %w", err)
	}
	c.Observer = m
	if d, ok := c.Store.(*cache.Database); ok {
		throttle := &routing.LogThrottle{Interval: time.Second}
		log = log.Named("cache")
		d.OnError = func(op string, err error) {
			if ok, n := throttle.Allow(op, time.Now()); ok {
				log.Warn("response cache: the database failed; the request was answered without it", zap.String("op", op), zap.Int("times", n), zap.Error(err))
			}
		}
	}
	return c, nil
}

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
//		store memory|database
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
