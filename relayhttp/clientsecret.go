package relayhttp

import (
	"io"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/billing"
	"github.com/caddy-model-gateway/gateway/engine"
	"github.com/caddy-model-gateway/gateway/keys"
)

// Realtime client secrets (keys.MintClientSecret): a key mints one at POST
// /v1/realtime/client_secrets for a browser, which opens GET /v1/realtime
// with it as the key that minted it. A secret authenticates nothing else,
// not even the minting of another (gateway_auth checks).

// Lifetimes of a client secret: the default, and the most a Caddyfile's
// client_secret_max_ttl allows when it sets none (OpenAI's own bounds).
const (
	defaultClientSecretTTL = 10 * time.Minute
	defaultClientSecretMax = 2 * time.Hour
	// maxClientSecretBody bounds the request: a lifetime and a session's
	// configuration
	maxClientSecretBody = 64 << 10
)

// clientSecretTTL is the lifetime of a secret asked to live asked (0: the
// default), within the configured maximum.
func (h *Handler) clientSecretTTL(asked time.Duration) time.Duration {
	limit := h.ClientSecretMaxTTL
	if limit <= 0 {
		limit = defaultClientSecretMax
	}
	if asked <= 0 {
		asked = defaultClientSecretTTL
	}
	return min(asked, limit)
}

// serveClientSecret mints a client secret for the calling key.
func (h *Handler) serveClientSecret(w http.ResponseWriter, r *http.Request, dialect adapters.Dialect, id *keys.Identity) error {
	d, ok := dialect.(adapters.ClientSecretDialect)
	if !ok {
		return engine.WriteError(w, dialect, adapters.NotFound("%s clients have no Realtime client secrets", dialect.Name()))
	}
	if h.ClientSecret(r) != nil {
		// gateway_auth lets a secret reach the Realtime socket alone; this
		// holds should a route send one here anyway
		return engine.WriteError(w, dialect, &adapters.Error{Status: http.StatusForbidden, Type: adapters.ErrPermission, Code: "client_secret_not_allowed",
			Message: "a client secret cannot mint another: mint secrets with your gateway key (sk-...)"})
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxClientSecretBody+1))
	switch {
	case err != nil:
		return engine.WriteError(w, dialect, adapters.BadRequest("the request body could not be read"))
	case len(body) > maxClientSecretBody:
		return engine.WriteError(w, dialect, adapters.Errorf(http.StatusRequestEntityTooLarge, adapters.ErrRequestTooLarge,
			"a client secret request is at most %d bytes", maxClientSecretBody))
	}
	req, e := d.DecodeClientSecret(body)
	if e != nil {
		return engine.WriteError(w, dialect, e)
	}
	if m := req.Model; m != "" {
		if e := engine.CheckModelName(m); e != nil {
			return engine.WriteError(w, dialect, e)
		}
		if e := engine.ModelAllowed(h.Engine.Gate.Models(), id.Token, m); e != nil {
			return engine.WriteError(w, dialect, e)
		}
		if !h.Engine.Channels.Has(m) {
			return engine.WriteError(w, dialect, engine.UnknownModel(m))
		}
		if !h.Engine.ServesRealtime(m) {
			return engine.WriteError(w, dialect, adapters.BadRequest("the model %s has no Realtime endpoint: mint secrets for a Realtime model", m))
		}
	}
	// a mint is a request: it counts toward the key's rpm, which with the
	// secrets' lifetime bounds how many live at once
	now := time.Now()
	ad, err := h.Engine.Gate.Admit(now, billing.Ask{User: id.User, Token: id.Token, Rate: billing.RateInSession})
	if err != nil {
		return engine.WriteError(w, dialect, engine.AdmissionError(err, w.Header(), ""))
	}
	ad.Ticket.Done(now, 0)
	secret, cs, err := keys.MintClientSecret(r.Context(), h.ClientSecrets, id, req.Model, string(req.Session), h.clientSecretTTL(req.TTL))
	if err != nil {
		h.Log.Error("minting a Realtime client secret", zap.Int64("token_id", id.Token.ID), zap.Error(err))
		return engine.WriteError(w, dialect, adapters.Errorf(http.StatusServiceUnavailable, adapters.ErrAPI, "the gateway cannot mint client secrets right now; try again shortly"))
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, err = w.Write(d.ClientSecret(secret, cs.ExpiresAt, req))
	return err
}
