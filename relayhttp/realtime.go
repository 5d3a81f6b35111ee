package relayhttp

import (
	"net/http"
	"time"

	"github.com/coder/websocket"
	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/engine"
	"github.com/caddy-model-gateway/gateway/internal/wsupgrade"
	"github.com/caddy-model-gateway/gateway/keys"
)

// serveRealtime relays one Realtime session: the route and the upgrade are
// checked here, the client's socket accepted (an HTTP/1.1 upgrade or an
// HTTP/2 extended CONNECT), and the session (admission, the upstream
// socket, the pumps, each response's billing) is the engine's
// (engine.RealtimeSession).
func (h *Handler) serveRealtime(w http.ResponseWriter, r *http.Request, d adapters.Dialect, id *keys.Identity) error {
	defer h.EnterDatabase()()
	model := r.URL.Query().Get("model")
	cs := h.ClientSecret(r)
	if cs != nil && cs.Model != "" && model == "" {
		model = cs.Model // the model the secret was minted for
	}
	x := &engine.Exchange{W: w, R: r, Dialect: d, ID: id, Start: time.Now(), RequestID: h.RequestID(r),
		Req: &adapters.Request{Op: adapters.OpRealtime, Dialect: d.Name(), Model: model, Stream: true}}
	s := h.Engine.NewRealtimeSession(x)
	defer s.Finish()

	dialect, ok := d.(adapters.RealtimeDialect)
	if !ok {
		return x.Fail(adapters.NotFound("%s clients have no Realtime endpoint", d.Name()))
	}
	if !wsupgrade.IsRequest(r) {
		w.Header().Set("Upgrade", "websocket")
		return x.Fail(adapters.Errorf(http.StatusUpgradeRequired, adapters.ErrInvalidRequest,
			"%s is a WebSocket endpoint: open it with a WebSocket client (GET with 'Upgrade: websocket', or HTTP/2's extended CONNECT)", r.URL.Path))
	}
	if model == "" {
		return x.Fail(adapters.BadRequest("the Realtime model is required: open /v1/realtime?model=<model>, for example ?model=gpt-4o-realtime-preview"))
	}
	if e := engine.CheckModelName(model); e != nil {
		x.Req.Model = ""
		return x.Fail(e)
	}
	if cs != nil && cs.Model != "" && model != cs.Model {
		return x.Fail(&adapters.Error{Status: http.StatusForbidden, Type: adapters.ErrPermission, Code: "model_not_allowed",
			Message: "this client secret was minted for the model " + cs.Model + ": open /v1/realtime?model=" + cs.Model + ", or mint a secret for " + model})
	}
	if h.Engine.Channels.Has(model) && !h.Engine.ServesRealtime(model) {
		return x.Fail(adapters.BadRequest("the model %s is served by channels whose family has no Realtime endpoint: use a Realtime model (GET /v1/models lists them)", model))
	}
	if cs != nil && cs.Session != "" {
		s.Configure([]byte(cs.Session)) // the session the secret was minted for
	}
	if e := s.Open(); e != nil {
		return x.Fail(e)
	}
	opts := &websocket.AcceptOptions{Subprotocols: dialect.RealtimeSubprotocols(), InsecureSkipVerify: true}
	client, err := wsupgrade.Accept(w, r, opts)
	if err != nil {
		s.Abort()
		h.Log.Warn("realtime upgrade failed", zap.Error(err))
		x.Status, x.ErrMsg = http.StatusBadRequest, "the WebSocket upgrade failed"
		return nil
	}
	x.Status = http.StatusOK
	x.TTFB = time.Since(x.Start)
	s.Relay(client, dialect, h.Done)
	return nil
}
