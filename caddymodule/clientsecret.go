package caddymodule

import (
	"context"
	"net/http"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/keys"
	"github.com/caddy-model-gateway/gateway/store"
)

// Realtime client secrets (keys.MintClientSecret): a key mints one at POST
// /v1/realtime/client_secrets for a browser, which opens GET /v1/realtime
// with it as the key that minted it. A secret authenticates nothing else,
// not even the minting of another. relayhttp mints them and opens the
// socket; gateway_auth finds the secret.

// clientSecretKey holds the *store.ClientSecret a request was
// authenticated with.
const clientSecretKey ctxKey = 1

// clientSecretFrom is the client secret that authenticated the request,
// nil for a key.
func clientSecretFrom(ctx context.Context) *store.ClientSecret {
	cs, _ := ctx.Value(clientSecretKey).(*store.ClientSecret)
	return cs
}

// lookupClientSecret authenticates a client secret, on the Realtime
// socket alone.
func (h *Auth) lookupClientSecret(r *http.Request, rt route, secret string) (*http.Request, *keys.Identity, *adapters.Error, error) {
	if rt.op != adapters.OpRealtime {
		return r, nil, &adapters.Error{Status: http.StatusUnauthorized, Type: adapters.ErrAuthentication, Code: "client_secret_not_allowed",
			Message: "a Realtime client secret (ek_...) opens GET /v1/realtime only: call " + r.URL.Path + " with your gateway key (sk-...)"}, nil
	}
	id, cs, err := keys.LookupClientSecret(r.Context(), h.app.db.Store, secret)
	if err != nil {
		return r, nil, nil, err
	}
	return r.WithContext(context.WithValue(r.Context(), clientSecretKey, cs)), id, nil, nil
}
