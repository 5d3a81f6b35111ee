package engine

import (
	"context"
	"io"
	"net/http"

	"github.com/coder/websocket"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/routing"
)

// dialRealtime opens the upstream socket on the first of the Realtime
// plan's channels that accepts it.
func (e *Engine) dialRealtime(x *Exchange, model string) (*websocket.Conn, *routing.Channel, *adapters.Error) {
	var conn *websocket.Conn
	tr, n := e.tracer(x), 0
	ch, f := e.Run(x.R.Context(), model, e.RealtimePlan(model), AttemptFunc(func(ch *routing.Channel) *Failure {
		var f *Failure
		n++
		conn, f = e.dialRealtimeChannel(x, ch, model, n)
		if tr != nil && f != nil {
			traceFailure(tr, f)
		}
		tr.EndAttempt() // the handshake was the attempt
		return f
	}))
	if f != nil {
		return nil, nil, f.Err
	}
	return conn, ch, nil
}

// dialRealtimeChannel is one Realtime connect attempt.
func (e *Engine) dialRealtimeChannel(x *Exchange, ch *routing.Channel, model string, n int) (*websocket.Conn, *Failure) {
	up := e.Upstreams.Get(ch.Name)
	if up == nil {
		return nil, removedChannel(ch)
	}
	prov, b := up.Provider, up.Bounds
	u, hdr, err := prov.(adapters.RealtimeProvider).RealtimeDial(&adapters.Upstream{Channel: ch.Name, BaseURL: ch.BaseURL, Key: ch.Key(), Model: ch.UpstreamModel(model)}, x.R)
	if err != nil {
		return nil, &Failure{Err: AsError(err)}
	}
	if x.Trace != nil {
		if hdr == nil {
			hdr = http.Header{}
		}
		e.traceDial(x, ch, ch.UpstreamModel(model), u, hdr, n)
	}
	ctx, cancel := context.WithTimeout(x.R.Context(), b.Dial+b.ResponseHeader)
	// the channel's transport (its dial timeout, TLS, proxy), without a
	// client timeout, which would cut the socket
	conn, resp, err := websocket.Dial(ctx, u, &websocket.DialOptions{
		HTTPClient: &http.Client{Transport: up.Client.Transport, CheckRedirect: noRedirects},
		HTTPHeader: hdr,
	})
	cancel()
	switch {
	case err == nil:
		conn.SetReadLimit(int64(b.MaxStreamEvent))
		x.UpstreamID = UpstreamRequestID(prov, resp.Header)
		if x.Trace != nil {
			x.Trace.AttemptAnswered(resp.StatusCode)
		}
		return conn, nil
	case x.R.Context().Err() != nil:
		return nil, ClientClosed()
	case resp != nil && resp.StatusCode != http.StatusSwitchingProtocols:
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		return nil, e.UpstreamFailure(ch, prov.DecodeError(resp.StatusCode, body), resp.Header)
	}
	return nil, &Failure{Channel: true, Detail: MaskKeys(err.Error(), ch.Keys), Err: adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI,
		"the upstream channel %q could not open a Realtime session", ch.Name)}
}
