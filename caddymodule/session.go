package caddymodule

import (
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-model-gateway/gateway/account"
	"github.com/caddy-model-gateway/gateway/account/accountapi"
)

// webSessions are the app's web logins, with the configured lifetime;
// whether a request came over HTTPS is the server's trusted_proxies to say.
func (a *App) webSessions() *accountapi.Sessions {
	return &accountapi.Sessions{
		Logins: account.Sessions{Store: a.db.Store, Lifetime: time.Duration(a.SessionLifetime),
			MaxLifetime: time.Duration(a.SessionMaxLifetime)},
		TrustedProxy: trustedProxy,
		Log:          a.log,
	}
}

// trustedProxy reports whether the request's peer is in the server's
// trusted_proxies, so its X-Forwarded-* headers count.
func trustedProxy(r *http.Request) bool {
	trusted, _ := caddyhttp.GetVar(r.Context(), caddyhttp.TrustedProxyVarKey).(bool)
	return trusted
}

// clientAddress is the client's IP as Caddy determined it (trusted proxies
// included), for rate limits.
func clientAddress(r *http.Request) string {
	if ip, ok := caddyhttp.GetVar(r.Context(), caddyhttp.ClientIPVarKey).(string); ok && ip != "" {
		return ip
	}
	return accountapi.RemoteHost(r)
}
