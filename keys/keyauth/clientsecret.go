package keyauth

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
// socket; Identify finds the secret.

type ctxKey int

// clientSecretKey holds the *store.ClientSecret a request was
// authenticated with.
const clientSecretKey ctxKey = 0

// ClientSecretFrom is the client secret that authenticated the request,
// nil for a key.
func ClientSecretFrom(ctx context.Context) *store.ClientSecret {
	cs, _ := ctx.Value(clientSecretKey).(*store.ClientSecret)
	return cs
}

// clientSecret authenticates a client secret sent for the operation op,
// on the Realtime socket alone: the request to go on with (carrying the
// secret), its identity, or a refusal, or an error (keys.ErrUnknownKey
// for a secret not valid).
func (a *Authenticator) clientSecret(r *http.Request, op adapters.Operation, secret string) (*http.Request, *keys.Identity, *adapters.Error, error) {
	if op != adapters.OpRealtime {
		return r, nil, &adapters.Error{Status: http.StatusUnauthorized, Type: adapters.ErrAuthentication, Code: "client_secret_not_allowed",
			Message: "a Realtime client secret (ek_...) opens GET /v1/realtime only: call " + r.URL.Path + " with your gateway key (sk-...)"}, nil
	}
	id, cs, err := keys.LookupClientSecret(r.Context(), a.cfg.ClientSecrets, secret)
	if err != nil {
		return r, nil, nil, err
	}
	return r.WithContext(context.WithValue(r.Context(), clientSecretKey, cs)), id, nil, nil
}
