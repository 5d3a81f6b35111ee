// Package keyauth finds and checks the gateway key a request carries:
// wherever the caller's dialect puts it (a header, the query, a WebSocket
// subprotocol), removed from the request wherever any dialect reads one,
// looked up (keys.Cache), or else the console's login session; the failed
// attempts of each client address limited; and each refusal given as a
// neutral error the Caddy layer answers in the caller's dialect. It
// imports no Caddy: what only the Caddy layer knows (the client's address
// as the server determined it) comes in through Config.
package keyauth

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/account/accountapi"
	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/keys"
	"github.com/caddy-model-gateway/gateway/store"
	"github.com/caddy-model-gateway/gateway/tracing"
)

// Failed authentications a client address may make per window before it
// is answered 429 without a key lookup.
const (
	MaxFailures   = 20
	FailureWindow = time.Minute
)

// KeyLookup finds who a gateway key belongs to (keys.Cache);
// keys.ErrUnknownKey when nobody.
type KeyLookup interface {
	Lookup(ctx context.Context, key string) (*keys.Identity, error)
}

// SessionLookup finds who a request with no key is by its login session
// (accountapi.Sessions): nil, nil without one.
type SessionLookup interface {
	Identity(w http.ResponseWriter, r *http.Request) (*keys.Identity, *adapters.Error)
}

// ClientSecretStore is where Realtime client secrets and the keys that
// minted them are found (keys.LookupClientSecret).
type ClientSecretStore interface {
	store.ClientSecretStore
	TokenByID(ctx context.Context, id int64) (*store.Token, error)
	UserByID(ctx context.Context, id int64) (*store.User, error)
}

// Config is what an Authenticator works with.
type Config struct {
	// Dialects are every dialect served: each strips its credentials from
	// every request, whichever path it was sent to.
	Dialects []adapters.Dialect
	Keys     KeyLookup
	Sessions SessionLookup
	// ClientSecrets finds Realtime client secrets (ek_...).
	ClientSecrets ClientSecretStore
	// Failures counts failed authentications by client address; it lives
	// as long as the database, across reloads.
	Failures *keys.LRU
	// ClientAddress is the client's IP as the server determined it
	// (trusted proxies included).
	ClientAddress func(*http.Request) string
	Log           *zap.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Authenticator finds and checks the key of each request.
type Authenticator struct {
	cfg Config
}

// New returns an Authenticator working with cfg.
func New(cfg Config) *Authenticator {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = zap.NewNop()
	}
	return &Authenticator{cfg: cfg}
}

// TakeKey returns the key d reads from r, and removes a key from r
// wherever any dialect reads one, so it reaches no later handler or log
// line whichever path it was sent to: r.RequestURI shows the query as
// stripped, as the URL does, and so does a trace's server span named from
// the request's URI.
func (a *Authenticator) TakeKey(r *http.Request, d adapters.Dialect) string {
	key := d.Credential(r)
	query := r.URL.RawQuery
	for _, d := range a.cfg.Dialects {
		d.StripCredentials(r)
	}
	if r.URL.RawQuery != query {
		r.RequestURI = r.URL.RequestURI()
		tracing.StripSpanName(r.Context(), key, query, r.URL.RawQuery)
	}
	return key
}

// Identify returns who sent r with key (TakeKey's) on the route (d, op),
// once they may make requests at all: a key, a Realtime client secret, or
// with no key the login session. The request returned is the one to go on
// with. A refusal is an error to answer in d's shape; one that asks the
// client to wait sets Retry-After on w.
func (a *Authenticator) Identify(w http.ResponseWriter, r *http.Request, d adapters.Dialect, op adapters.Operation, key string) (*http.Request, *keys.Identity, *adapters.Error) {
	if key == "" {
		// the console's playground rides on the login session instead
		id, e := a.cfg.Sessions.Identity(w, r)
		if e != nil {
			return r, nil, e
		}
		if id == nil {
			return r, nil, &adapters.Error{Status: http.StatusUnauthorized, Type: adapters.ErrAuthentication, Code: "missing_api_key",
				Message: "no API key was given: send your gateway key as 'Authorization: Bearer sk-...'" + credentialHint(d)}
		}
		return usable(r, id)
	}
	client := a.cfg.ClientAddress(r)
	if a.cfg.Failures.Peek(client, a.cfg.Now(), FailureWindow) >= MaxFailures {
		w.Header().Set("Retry-After", strconv.Itoa(int(FailureWindow.Seconds())))
		return r, nil, &adapters.Error{Status: http.StatusTooManyRequests, Type: adapters.ErrRateLimit, Code: "too_many_failed_authentications",
			Message: "too many requests with an invalid API key came from your address: wait a minute, then retry with a valid key"}
	}
	var id *keys.Identity
	var err error
	if keys.IsClientSecret(key) {
		var e *adapters.Error
		if r, id, e, err = a.clientSecret(r, op, key); e != nil {
			return r, nil, e
		}
		if errors.Is(err, keys.ErrUnknownKey) {
			a.cfg.Failures.Count(client, a.cfg.Now(), FailureWindow)
			return r, nil, &adapters.Error{Status: http.StatusUnauthorized, Type: adapters.ErrAuthentication, Code: "invalid_client_secret",
				Message: "the client secret is not valid or has expired: mint a new one with POST /v1/realtime/client_secrets"}
		}
	} else {
		id, err = a.cfg.Keys.Lookup(r.Context(), key)
	}
	if errors.Is(err, keys.ErrUnknownKey) {
		a.cfg.Failures.Count(client, a.cfg.Now(), FailureWindow)
		return r, nil, &adapters.Error{Status: http.StatusUnauthorized, Type: adapters.ErrAuthentication, Code: "invalid_api_key",
			Message: "the API key is not valid: check that you copied the whole sk-... key the gateway issued"}
	}
	if err != nil {
		a.cfg.Log.Error("looking up a key", zap.Error(err))
		return r, nil, adapters.Errorf(http.StatusServiceUnavailable, adapters.ErrAPI, "the gateway cannot check keys right now; try again shortly")
	}
	return usable(r, id)
}

// usable passes id on once it may make requests at all (accountapi's
// rule: its token and user enabled, the token not expired).
func usable(r *http.Request, id *keys.Identity) (*http.Request, *keys.Identity, *adapters.Error) {
	if e := accountapi.CheckIdentity(id); e != nil {
		return r, nil, e
	}
	return r, id, nil
}

// credentialHint names where else d takes a key, for the refusal of a
// request that sent none.
func credentialHint(d adapters.Dialect) string {
	if h, ok := d.(adapters.CredentialHinter); ok {
		return " or " + h.CredentialHint()
	}
	return ""
}
