package runtimecfg

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// checkBaseURL refuses a base URL whose host is not public (loopback,
// private, link-local: what the image fetch policy refuses) unless
// allow_private_upstreams names it. A name is resolved now; what it
// resolves to later is the operator's DNS.
func (rs *Runtime) checkBaseURL(ctx context.Context, raw string) error {
	if raw == "" {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return fmt.Errorf("base_url %q is not an http:// or https:// address", raw)
	}
	if u.User != nil {
		return fmt.Errorf("base_url must not hold credentials: give them as the channel's keys")
	}
	host := strings.ToLower(u.Hostname())
	for _, h := range rs.allowHosts {
		if h == host {
			return nil
		}
	}
	var addrs []netip.Addr
	if ip, err := netip.ParseAddr(host); err == nil {
		addrs = []netip.Addr{ip}
	} else {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		addrs, err = net.DefaultResolver.LookupNetIP(rctx, "ip", host)
		cancel()
		if err != nil {
			return fmt.Errorf("base_url's host %q does not resolve: %v", host, err)
		}
	}
	for _, ip := range addrs {
		ip = ip.Unmap()
		allowed := false
		for _, p := range rs.allowNets {
			if p.Contains(ip) {
				allowed = true
			}
		}
		if allowed {
			continue
		}
		if err := adapters.CheckPublicAddr(ip); err != nil {
			return fmt.Errorf("base_url's host %s is not a public address (%v): the gateway's operator allows private upstreams with allow_private_upstreams in the Caddyfile", host, err)
		}
	}
	return nil
}
