package openai

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// clientSecretsPath mints ephemeral keys for browsers: OpenAI's
// POST /v1/realtime/client_secrets.
const clientSecretsPath = "/v1/realtime/client_secrets"

// OpenAI's bounds on a client secret's lifetime, in seconds.
const (
	minSecretSeconds = 10
	maxSecretSeconds = 7200
)

// DecodeClientSecret implements adapters.ClientSecretDialect: an empty
// body, or {"expires_after": {"anchor": "created_at", "seconds": 10 to
// 7200}, "session": {"type": "realtime", "model": ...}}.
func (Adapter) DecodeClientSecret(body []byte) (*adapters.ClientSecretRequest, *adapters.Error) {
	req := &adapters.ClientSecretRequest{}
	if len(bytes.TrimSpace(body)) == 0 {
		return req, nil
	}
	var w struct {
		ExpiresAfter *struct {
			Anchor  string `json:"anchor"`
			Seconds *int64 `json:"seconds"`
		} `json:"expires_after"`
		Session json.RawMessage `json:"session"`
	}
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, adapters.BadRequest("the request body is not a client secret request: %v", err)
	}
	if e := w.ExpiresAfter; e != nil {
		if e.Anchor != "" && e.Anchor != "created_at" {
			return nil, adapters.BadRequest("expires_after.anchor must be \"created_at\", not %q", e.Anchor)
		}
		if e.Seconds != nil {
			if *e.Seconds < minSecretSeconds || *e.Seconds > maxSecretSeconds {
				return nil, adapters.BadRequest("expires_after.seconds must be between %d and %d, not %d", minSecretSeconds, maxSecretSeconds, *e.Seconds)
			}
			req.TTL = time.Duration(*e.Seconds) * time.Second
		}
	}
	if s := bytes.TrimSpace(w.Session); len(s) > 0 && !bytes.Equal(s, []byte("null")) {
		var sess struct {
			Type  string `json:"type"`
			Model string `json:"model"`
		}
		if !bytes.HasPrefix(s, []byte("{")) || json.Unmarshal(s, &sess) != nil {
			return nil, adapters.BadRequest("session must be a Realtime session configuration object")
		}
		if sess.Type != "" && sess.Type != "realtime" {
			return nil, adapters.BadRequest("session.type %q is not served by this gateway: mint secrets for \"realtime\" sessions", sess.Type)
		}
		req.Model, req.Session = sess.Model, json.RawMessage(s)
	}
	return req, nil
}

// ClientSecret implements adapters.ClientSecretDialect: {"value",
// "expires_at", "session"}, the session the client's configuration with
// its type, object and expiry.
func (Adapter) ClientSecret(value string, expiresAt time.Time, req *adapters.ClientSecretRequest) []byte {
	sess := []byte(req.Session)
	if len(sess) == 0 {
		sess = []byte("{}")
	}
	if out, err := adapters.SetFields(sess, adapters.Field{Key: "type", Value: "realtime"},
		adapters.Field{Key: "object", Value: "realtime.session"}, adapters.Field{Key: "expires_at", Value: expiresAt.Unix()}); err == nil {
		sess = out
	}
	b, _ := json.Marshal(struct {
		Value     string          `json:"value"`
		ExpiresAt int64           `json:"expires_at"`
		Session   json.RawMessage `json:"session"`
	}{value, expiresAt.Unix(), sess})
	return b
}
