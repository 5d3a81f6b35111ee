package caddymodule

import (
	"errors"
	"fmt"
	"mime"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/billing"
	"github.com/caddy-model-gateway/gateway/engine"
	"github.com/caddy-model-gateway/gateway/internal/bodies"
	"github.com/caddy-model-gateway/gateway/keys"
)

// Media endpoints: image generations and edits, speech, transcriptions.
//
// Uploads (image edits, transcriptions) are multipart bodies whose file
// parts are spooled to unlinked temporary files as they arrive, never held
// in memory, and streamed from there into the upstream's body through a
// pipe. They are spooled rather than piped straight through because the
// fields that route and price the request may come after the files: the
// official OpenAI Go SDK writes its fields in alphabetical order, so
// "image" and "file" come before "model", "n", "size" and "quality". With
// the whole form in hand the gateway validates it, reserves its exact
// worst case before anything is sent, and can fail over to another
// channel by re-sending the same bytes from disk.

// defaultMaxUploadSize is max_upload_size's default: OpenAI's own limit
// for an audio file.
const defaultMaxUploadSize = 25 << 20

// defaultMaxInflightUploads is max_inflight_uploads' default.
const defaultMaxInflightUploads = 1 << 30

// parseImagePrice reads `image [<size> [<quality>]] <usd>`; "*" stands for
// any size or quality.
func parseImagePrice(d *caddyfile.Dispenser, model string, pc *PriceConfig) error {
	args := d.RemainingArgs()
	if len(args) < 1 || len(args) > 3 {
		return d.Errf("price %s: image takes [<size> [<quality>]] <usd per image>, e.g. 'image 1024x1024 hd 0.08'", model)
	}
	ic := ImagePriceConfig{Price: args[len(args)-1]}
	if len(args) > 1 && args[0] != "*" {
		ic.Size = args[0]
	}
	if len(args) > 2 && args[1] != "*" {
		ic.Quality = args[1]
	}
	if _, err := billing.ParseUSD(ic.Price); err != nil {
		return d.Errf("price %s: image: %v", model, err)
	}
	pc.Images = append(pc.Images, ic)
	return nil
}

// errUploadsFull refuses an upload the disk budget has no room for.
var errUploadsFull = adapters.Errorf(http.StatusServiceUnavailable, adapters.ErrOverloaded,
	"the gateway is receiving too many uploads at once: retry shortly")

// serveMedia serves image generations and edits, speech and
// transcriptions: decode (spooling an upload), admit and reserve, try the
// channels whose family serves the endpoint, relay, settle.
func (h *Relay) serveMedia(w http.ResponseWriter, r *http.Request, rt route, id *keys.Identity) error {
	a := h.app
	db := a.db
	db.enter()
	defer db.leave()
	x := &engine.Exchange{W: w, R: r, Dialect: rt.dialect, ID: id, Start: time.Now(), Req: &adapters.Request{Op: rt.op}, RequestID: requestIDOf(r), Media: &engine.Media{}}
	defer h.engine.Settle(x)
	// what no body could change is refused before the upload is read
	if e := h.engine.Precheck(x); e != nil {
		return a.refuseUnread(w, r, func() error { return h.engine.Refuse(x, e) })
	}
	req, cleanup, unread, e := h.decodeMedia(x, rt)
	defer cleanup()
	if unread {
		return a.refuseUnread(w, r, func() error { return h.engine.Refuse(x, e) })
	}
	if e != nil {
		return x.Fail(e)
	}
	x.Req = req
	return h.engine.ServeMedia(x)
}

// decodeMedia reads a media request: a multipart body is spooled into a
// form (bounded by max_upload_size, its bytes on disk held in
// max_inflight_uploads as they arrive) for the dialect to read; any other
// body is read within max_request_body and decoded as JSON. cleanup
// removes the spooled files; unread is true for a refusal that left the
// body unread.
func (h *Relay) decodeMedia(x *engine.Exchange, rt route) (req *adapters.Request, cleanup func(), unread bool, e *adapters.Error) {
	noop := func() {}
	ct, params, _ := mime.ParseMediaType(x.R.Header.Get("Content-Type"))
	if ct != "multipart/form-data" {
		req, unread, e := h.decode(x, rt)
		return req, noop, unread, e
	}
	ud, ok := rt.dialect.(adapters.UploadDecoder)
	if !ok {
		return nil, noop, true, adapters.BadRequest("this endpoint does not take multipart/form-data")
	}
	form, cleanup, err := bodies.SpoolForm(x.R, params["boundary"], h.app.MaxUploadSize, h.app.spooled, bodyOwner(x.R, x.ID))
	switch {
	case errors.Is(err, bodies.ErrTooLarge):
		return nil, cleanup, true, &adapters.Error{Status: http.StatusRequestEntityTooLarge, Type: adapters.ErrRequestTooLarge, Code: "upload_too_large",
			Message: fmt.Sprintf("the upload is larger than the gateway's limit of %d bytes (max_upload_size): send a smaller file", h.app.MaxUploadSize)}
	case bodies.Busy(err):
		return nil, cleanup, true, h.app.bodyBusy(err, x.W.Header(), true)
	case err != nil:
		var e *adapters.Error
		if errors.As(err, &e) {
			return nil, cleanup, false, e
		}
		if e := bodyReadError(x.R, err); e.Status != http.StatusBadRequest {
			return nil, cleanup, false, e
		}
		h.log.Warn("upload could not be read", zap.Error(err))
		return nil, cleanup, false, adapters.BadRequest("the multipart/form-data body could not be read: %v", err)
	}
	req, err = ud.DecodeUpload(rt.op, form, x.R)
	if err != nil {
		return nil, cleanup, false, asError(err)
	}
	if e := checkModelName(req.Model); e != nil {
		return nil, cleanup, false, e
	}
	return req, cleanup, false, nil
}
