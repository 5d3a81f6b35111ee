// Package serverside is what only the server in front knows of a request
// (its id, whom its body is counted against, the database's hold across a
// reload) and the logger to use, as the HTTP layers below the Caddy layer
// (relayhttp, tasks/taskapi) take it: functions the Caddy layer fills,
// with plain defaults so tests run without Caddy.
package serverside

import (
	"net/http"

	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/internal/bodies"
	"github.com/caddy-model-gateway/gateway/keys"
)

// Request is what the server layer tells of a request; an HTTP layer's
// Config embeds it.
type Request struct {
	Log *zap.Logger

	// EnterDatabase brackets a request's use of the database, so a reload
	// does not close the store under it: it returns the leave. Nil: no
	// hold.
	EnterDatabase func() (leave func())
	// RequestID is the request's id, as it goes on the usage row and back
	// to the client.
	RequestID func(*http.Request) string
	// BodyOwner is whom a request's body is counted against in the body
	// budgets.
	BodyOwner func(*http.Request, *keys.Identity) bodies.Owner
}

// Defaults fills what was left nil with the plainest thing: no log, no
// hold, no request id, the body counted against the key alone.
func (s *Request) Defaults() {
	if s.Log == nil {
		s.Log = zap.NewNop()
	}
	if s.EnterDatabase == nil {
		s.EnterDatabase = func() func() { return func() {} }
	}
	if s.RequestID == nil {
		s.RequestID = func(*http.Request) string { return "" }
	}
	if s.BodyOwner == nil {
		s.BodyOwner = func(_ *http.Request, id *keys.Identity) bodies.Owner { return bodies.Owner{Key: id.Token.ID} }
	}
}
