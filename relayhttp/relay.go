// Package relayhttp is the HTTP handling of every model endpoint
// (caddymodule's gateway_relay): it picks what a request asks by its
// dialect and operation, reads its body within the gateway's bounds
// (the body budgets, the multipart spooler, the pre-scan, the model
// name), and hands it to the engine to admit, relay, meter and settle;
// the model lists, media, Realtime sessions and their client secrets
// are served here too, errors in the caller's dialect.
//
// It must not import Caddy: what only the server in front knows (the
// request's id, the client's address, the client secret a request was
// authenticated with, the database's hold across a reload, the end of
// the configuration) comes in as functions and a channel, so the Caddy
// layer wires it and tests run without Caddy.
package relayhttp

import (
	"bytes"
	"errors"
	"net/http"
	"time"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/engine"
	"github.com/caddy-model-gateway/gateway/internal/bodies"
	"github.com/caddy-model-gateway/gateway/internal/serverside"
	"github.com/caddy-model-gateway/gateway/keys"
	"github.com/caddy-model-gateway/gateway/store"
	"github.com/caddy-model-gateway/gateway/tasks/taskapi"
)

// Config is what the handler works with.
type Config struct {
	// Engine admits, relays, meters and settles; its Channels and Gate are
	// the configuration's models and admission.
	Engine *engine.Engine
	// Batches answers the Files and Batch APIs.
	Batches *taskapi.API
	// ClientSecrets keeps the Realtime client secrets keys mint.
	ClientSecrets store.ClientSecretStore
	// Bodies is the process's budget of request bodies in memory, Uploads
	// of uploads spooled to disk, both shared per key and address.
	Bodies, Uploads *bodies.Budget
	// MaxRequestBody bounds a body read whole, MaxUploadSize a multipart
	// upload, MaxElements any one JSON array or object in a body
	// (adapters.PreScan), MaxFetchedImages the images a request gives by
	// URL.
	MaxRequestBody, MaxUploadSize int64
	MaxElements, MaxFetchedImages int
	// Fetch fetches the images a request gives by URL.
	Fetch *adapters.FetchPolicy
	// ClientSecretMaxTTL is the longest a client secret lives; 0: two
	// hours.
	ClientSecretMaxTTL time.Duration
	// Done is closed when this configuration is unloaded (a reload, a
	// shutdown): Realtime sessions, which outlive requests, end then.
	Done <-chan struct{}

	// Request is the log, the database's hold, the request's id and
	// whom its body is counted against (see BodyOwner).
	serverside.Request
	// ClientSecret is the client secret that authenticated the request,
	// nil for a key.
	ClientSecret func(*http.Request) *store.ClientSecret
}

// Handler serves the model endpoints; build it with New.
type Handler struct {
	Config
}

// New returns the handler for cfg; the functions left nil do the
// plainest thing (no hold, no request id, the body counted against the
// key alone, no client secrets).
func New(cfg Config) *Handler {
	cfg.Request.Defaults()
	if cfg.ClientSecret == nil {
		cfg.ClientSecret = func(*http.Request) *store.ClientSecret { return nil }
	}
	return &Handler{Config: cfg}
}

// Serve answers a request the dialect d matched to op, made by id (nil:
// no key was checked).
func (h *Handler) Serve(w http.ResponseWriter, r *http.Request, d adapters.Dialect, op adapters.Operation, id *keys.Identity) error {
	if id == nil {
		return engine.WriteError(w, d, &adapters.Error{Status: http.StatusUnauthorized, Type: adapters.ErrAuthentication,
			Message: "no API key was checked: put gateway_auth before gateway_relay in the Caddyfile"})
	}
	if taskapi.IsBatchPath(r.URL.Path) {
		return h.Batches.ServeBatches(w, r, d, id)
	}
	switch op {
	case adapters.OpListModels, adapters.OpGetModel:
		return h.serveModels(w, r, d, op, id)
	case adapters.OpChat, adapters.OpCompletion, adapters.OpEmbedding, adapters.OpCountTokens, adapters.OpResponses, adapters.OpRerank:
	case adapters.OpRealtime:
		return h.serveRealtime(w, r, d, id)
	case adapters.OpRealtimeClientSecret:
		return h.serveClientSecret(w, r, d, id)
	case adapters.OpImage, adapters.OpSpeech, adapters.OpTranscription:
		return h.serveMedia(w, r, d, op, id)
	case adapters.OpUpgrade:
		// answered at once, so a client that tries a socket first falls
		// back to plain HTTP instead of retrying
		return engine.WriteError(w, d, adapters.Errorf(http.StatusUpgradeRequired, adapters.ErrInvalidRequest,
			"%s is served over HTTP only, not as a WebSocket: POST to it instead", r.URL.Path))
	case adapters.OpUnknown:
		return engine.WriteError(w, d, adapters.Errorf(http.StatusNotFound, adapters.ErrInvalidRequest,
			"unknown endpoint %s %s: see the gateway's README for the paths it serves", r.Method, r.URL.Path))
	default:
		return engine.WriteError(w, d, adapters.Errorf(http.StatusNotFound, adapters.ErrInvalidRequest,
			"%s %s is not served by this gateway yet", r.Method, r.URL.Path))
	}

	// the database stays open until this request's row is queued
	defer h.EnterDatabase()()
	// every request past authentication gets a usage row, refused ones too
	x := &engine.Exchange{W: w, R: r, Dialect: d, ID: id, Start: time.Now(), Req: &adapters.Request{Op: op}, RequestID: h.RequestID(r), Settled: true}
	defer h.Engine.Settle(x)
	// what no body could change is refused before the body is read
	if e := h.Engine.Precheck(x); e != nil {
		return h.refuseUnread(w, r, func() error { return h.Engine.Refuse(x, e) })
	}
	req, unread, e := h.decode(x, op)
	if unread {
		return h.refuseUnread(w, r, func() error { return h.Engine.Refuse(x, e) })
	}
	if e != nil {
		return x.Fail(e)
	}
	x.Req = req
	return h.Engine.Relay(x)
}

// decode reads and decodes the request body within the gateway's bounds:
// its size, the bytes of bodies being decoded at once across the process
// and by the caller, the pre-scan (duplicate keys, element counts) and
// the model name. unread is true for a refusal that left the body unread.
func (h *Handler) decode(x *engine.Exchange, op adapters.Operation) (req *adapters.Request, unread bool, e *adapters.Error) {
	body, held, err := h.Bodies.ReadRequest(x.R, h.MaxRequestBody, h.BodyOwner(x.R, x.ID))
	defer h.Bodies.Give(held)
	switch {
	case errors.Is(err, bodies.ErrTooLarge):
		return nil, true, adapters.Errorf(http.StatusRequestEntityTooLarge, adapters.ErrRequestTooLarge,
			"the request body is larger than the gateway's limit of %d bytes", h.MaxRequestBody)
	case bodies.Busy(err):
		return nil, true, BodyBusy(err, x.W.Header(), h.Bodies, false)
	case err != nil:
		return nil, false, BodyReadError(x.R, err)
	}
	req, e = h.decodeBody(x, op, body)
	return req, false, e
}

// decodeBody decodes a body read whole.
func (h *Handler) decodeBody(x *engine.Exchange, op adapters.Operation, body []byte) (*adapters.Request, *adapters.Error) {
	var err error
	var req *adapters.Request
	if trimmed := bytes.TrimLeft(body, " \t\r\n"); len(trimmed) > 0 && trimmed[0] == '{' {
		if e := adapters.PreScan(body, h.MaxElements); e != nil {
			err = e // (a nil *Error is never stored in err)
		}
	}
	if err == nil {
		req, err = x.Dialect.DecodeRequest(op, body, x.R)
	}
	if err != nil {
		// an unknown model is a 404 whatever else is wrong with the body;
		// a body that decodes has its model checked at admission, so only
		// a refused one is peeked at
		if m := x.Dialect.PeekModel(op, body, x.R); m != "" {
			if h.Engine.Channels.Has(m) {
				x.Req.Model = m // the refusal is counted under its model
				return nil, engine.AsError(err)
			}
			if e := engine.CheckModelName(m); e != nil {
				return nil, e // not echoed back, nor kept
			}
			x.Req.Model = m
			return nil, engine.UnknownModel(m)
		}
		return nil, engine.AsError(err)
	}
	if e := engine.CheckModelName(req.Model); e != nil {
		return nil, e
	}
	x.Req.Model = req.Model
	if n := imageURLs(req); n > 0 {
		if n > h.MaxFetchedImages {
			return nil, adapters.BadRequest("the request gives %d images by URL, more than the gateway's limit of %d: send the others inline as base64", n, h.MaxFetchedImages)
		}
		// each image is fetched once for the request, not once per channel tried
		x.R = x.R.WithContext(adapters.WithImageFetcher(x.R.Context(), h.Fetch.NewFetcher()))
	}
	return req, nil
}

// imageURLs counts the images a chat request gives by URL, which an
// upstream that takes only inline images makes the gateway fetch.
func imageURLs(req *adapters.Request) int {
	if req.Chat == nil {
		return 0
	}
	n := 0
	count := func(parts []adapters.Part) {
		for _, p := range parts {
			if p.Type == adapters.PartImage && p.Image != nil && p.Image.URL != "" {
				n++
			}
		}
	}
	for _, m := range req.Chat.Messages {
		count(m.Parts)
		for _, p := range m.Parts {
			if p.ToolResult != nil {
				count(p.ToolResult.Content)
			}
		}
	}
	return n
}

// serveModels lists the models this key may use, or the one asked for, in
// the caller's dialect. The dialect decodes which model a GET names.
func (h *Handler) serveModels(w http.ResponseWriter, r *http.Request, d adapters.Dialect, op adapters.Operation, id *keys.Identity) error {
	req, err := d.DecodeRequest(op, nil, r)
	if err != nil {
		return engine.WriteError(w, d, engine.AsError(err))
	}
	channels := h.Engine.Channels
	var list []adapters.ModelInfo
	for _, m := range channels.Models() {
		if !h.Engine.Gate.Models().Allows(id.Token.Models, m) {
			continue
		}
		list = append(list, adapters.ModelInfo{ID: m, OwnedBy: channels.Owner(m), Created: 1700000000})
	}
	w.Header().Set("Content-Type", "application/json")
	if op == adapters.OpListModels {
		_, _ = w.Write(d.EncodeModels(list)) // a write error is the client gone
		return nil
	}
	for _, m := range list {
		if m.ID == req.Model {
			_, _ = w.Write(d.EncodeModel(m))
			return nil
		}
	}
	return engine.WriteError(w, d, &adapters.Error{Status: http.StatusNotFound, Type: adapters.ErrNotFound, Code: "model_not_found",
		Message: "the model " + req.Model + " does not exist on this gateway or your key may not use it"})
}
