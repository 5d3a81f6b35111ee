package caddymodule

import (
	"bytes"
	"errors"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/engine"
	"github.com/caddy-model-gateway/gateway/internal/bodies"
	"github.com/caddy-model-gateway/gateway/tasks/taskapi"
)

func init() {
	caddy.RegisterModule(Relay{})
}

// Relay serves every model endpoint: it decodes the caller's request,
// resolves the model to channels, reserves quota, sends the request through
// the channel's adapter, relays the answer (streams event by event), meters
// it and settles the charge. It must run after gateway_auth.
type Relay struct {
	app *App
	log *zap.Logger
	// engine is the app's, logging as this handler
	engine *engine.Engine
	// done is closed when this configuration is unloaded (a reload, a
	// shutdown): Realtime sessions, which outlive requests, end then
	done <-chan struct{}
	// batches answers the Files and Batch APIs
	batches *taskapi.API
}

// CaddyModule returns the Caddy module information.
func (Relay) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.gateway_relay",
		New: func() caddy.Module { return new(Relay) },
	}
}

// Provision finds the gateway app.
func (h *Relay) Provision(ctx caddy.Context) error {
	h.log = ctx.Logger()
	h.done = ctx.Done()
	app, err := gatewayApp(ctx)
	if err != nil {
		return err
	}
	h.app = app
	e := *app.engine
	e.Log = h.log
	h.engine = &e
	h.batches = app.taskAPI(h.log)
	return nil
}

func (h *Relay) ServeHTTP(w http.ResponseWriter, r *http.Request, _ caddyhttp.Handler) error {
	a := h.app
	rt := a.routeOf(r)
	id := identityFrom(r.Context())
	if id == nil {
		return writeError(w, rt.dialect, &adapters.Error{Status: http.StatusUnauthorized, Type: adapters.ErrAuthentication,
			Message: "no API key was checked: put gateway_auth before gateway_relay in the Caddyfile"})
	}
	if taskapi.IsBatchPath(r.URL.Path) {
		return h.batches.ServeBatches(w, r, rt.dialect, id)
	}
	switch rt.op {
	case adapters.OpListModels, adapters.OpGetModel:
		return h.serveModels(w, r, rt, id)
	case adapters.OpChat, adapters.OpCompletion, adapters.OpEmbedding, adapters.OpCountTokens, adapters.OpResponses, adapters.OpRerank:
	case adapters.OpRealtime:
		return h.serveRealtime(w, r, rt, id)
	case adapters.OpRealtimeClientSecret:
		return h.serveClientSecret(w, r, rt, id)
	case adapters.OpImage, adapters.OpSpeech, adapters.OpTranscription:
		return h.serveMedia(w, r, rt, id)
	case adapters.OpUpgrade:
		// answered at once, so a client that tries a socket first falls
		// back to plain HTTP instead of retrying
		return writeError(w, rt.dialect, adapters.Errorf(http.StatusUpgradeRequired, adapters.ErrInvalidRequest,
			"%s is served over HTTP only, not as a WebSocket: POST to it instead", r.URL.Path))
	case adapters.OpUnknown:
		return writeError(w, rt.dialect, adapters.Errorf(http.StatusNotFound, adapters.ErrInvalidRequest,
			"unknown endpoint %s %s: see the gateway's README for the paths it serves", r.Method, r.URL.Path))
	default:
		return writeError(w, rt.dialect, adapters.Errorf(http.StatusNotFound, adapters.ErrInvalidRequest,
			"%s %s is not served by this gateway yet", r.Method, r.URL.Path))
	}

	// the database stays open until this request's row is queued
	db := a.db
	db.enter()
	defer db.leave()
	// every request past authentication gets a usage row, refused ones too
	x := &engine.Exchange{W: w, R: r, Dialect: rt.dialect, ID: id, Start: time.Now(), Req: &adapters.Request{Op: rt.op}, RequestID: requestIDOf(r), Settled: true}
	defer h.engine.Settle(x)
	// what no body could change is refused before the body is read
	if e := h.engine.Precheck(x); e != nil {
		return a.refuseUnread(w, r, func() error { return h.engine.Refuse(x, e) })
	}
	req, unread, e := h.decode(x, rt)
	if unread {
		return a.refuseUnread(w, r, func() error { return h.engine.Refuse(x, e) })
	}
	if e != nil {
		return x.Fail(e)
	}
	x.Req = req
	return h.engine.Relay(x)
}

// decode reads and decodes the request body within the gateway's bounds:
// its size, the bytes of bodies being decoded at once across the process
// and by the caller, the pre-scan (duplicate keys, element counts) and
// the model name. unread is true for a refusal that left the body unread.
func (h *Relay) decode(x *engine.Exchange, rt route) (req *adapters.Request, unread bool, e *adapters.Error) {
	a := h.app
	body, held, err := a.inflight.ReadRequest(x.R, a.MaxRequestBody, bodyOwner(x.R, x.ID))
	defer a.inflight.Give(held)
	switch {
	case errors.Is(err, bodies.ErrTooLarge):
		return nil, true, adapters.Errorf(http.StatusRequestEntityTooLarge, adapters.ErrRequestTooLarge,
			"the request body is larger than the gateway's limit of %d bytes", a.MaxRequestBody)
	case bodies.Busy(err):
		return nil, true, a.bodyBusy(err, x.W.Header(), false)
	case err != nil:
		return nil, false, bodyReadError(x.R, err)
	}
	req, e = h.decodeBody(x, rt, body)
	return req, false, e
}

// decodeBody decodes a body read whole.
func (h *Relay) decodeBody(x *engine.Exchange, rt route, body []byte) (*adapters.Request, *adapters.Error) {
	a := h.app
	var err error
	var req *adapters.Request
	if trimmed := bytes.TrimLeft(body, " \t\r\n"); len(trimmed) > 0 && trimmed[0] == '{' {
		if e := adapters.PreScan(body, a.MaxElements); e != nil {
			err = e // (a nil *Error is never stored in err)
		}
	}
	if err == nil {
		req, err = rt.dialect.DecodeRequest(rt.op, body, x.R)
	}
	if err != nil {
		// an unknown model is a 404 whatever else is wrong with the body;
		// a body that decodes has its model checked at admission, so only
		// a refused one is peeked at
		if m := rt.dialect.PeekModel(rt.op, body, x.R); m != "" {
			if a.channels.Has(m) {
				x.Req.Model = m // the refusal is counted under its model
				return nil, asError(err)
			}
			if e := checkModelName(m); e != nil {
				return nil, e // not echoed back, nor kept
			}
			x.Req.Model = m
			return nil, engine.UnknownModel(m)
		}
		return nil, asError(err)
	}
	if e := checkModelName(req.Model); e != nil {
		return nil, e
	}
	x.Req.Model = req.Model
	if n := imageURLs(req); n > 0 {
		if n > a.MaxFetchedImages {
			return nil, adapters.BadRequest("the request gives %d images by URL, more than the gateway's limit of %d: send the others inline as base64", n, a.MaxFetchedImages)
		}
		// each image is fetched once for the request, not once per channel tried
		x.R = x.R.WithContext(adapters.WithImageFetcher(x.R.Context(), a.fetch.NewFetcher()))
	}
	return req, nil
}

// Interface guards.
var (
	_ caddyhttp.MiddlewareHandler = (*Relay)(nil)
	_ caddy.Provisioner           = (*Relay)(nil)
)
