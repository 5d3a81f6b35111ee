package relayhttp

import (
	"errors"
	"fmt"
	"mime"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/adapters"
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

// errUploadsFull refuses an upload the disk budget has no room for.
var errUploadsFull = adapters.Errorf(http.StatusServiceUnavailable, adapters.ErrOverloaded,
	"the gateway is receiving too many uploads at once: retry shortly")

// serveMedia serves image generations and edits, speech and
// transcriptions: decode (spooling an upload), admit and reserve, try the
// channels whose family serves the endpoint, relay, settle.
func (h *Handler) serveMedia(w http.ResponseWriter, r *http.Request, d adapters.Dialect, op adapters.Operation, id *keys.Identity) error {
	defer h.EnterDatabase()()
	x := &engine.Exchange{W: w, R: r, Dialect: d, ID: id, Start: time.Now(), Req: &adapters.Request{Op: op}, RequestID: h.RequestID(r), Media: &engine.Media{}}
	defer h.Engine.Settle(x)
	// what no body could change is refused before the upload is read
	if e := h.Engine.Precheck(x); e != nil {
		return h.refuseUnread(w, r, func() error { return h.Engine.Refuse(x, e) })
	}
	req, cleanup, unread, e := h.decodeMedia(x, op)
	defer cleanup()
	if unread {
		return h.refuseUnread(w, r, func() error { return h.Engine.Refuse(x, e) })
	}
	if e != nil {
		return x.Fail(e)
	}
	x.Req = req
	return h.Engine.ServeMedia(x)
}

// decodeMedia reads a media request: a multipart body is spooled into a
// form (bounded by max_upload_size, its bytes on disk held in
// max_inflight_uploads as they arrive) for the dialect to read; any other
// body is read within max_request_body and decoded as JSON. cleanup
// removes the spooled files; unread is true for a refusal that left the
// body unread.
func (h *Handler) decodeMedia(x *engine.Exchange, op adapters.Operation) (req *adapters.Request, cleanup func(), unread bool, e *adapters.Error) {
	noop := func() {}
	ct, params, _ := mime.ParseMediaType(x.R.Header.Get("Content-Type"))
	if ct != "multipart/form-data" {
		req, unread, e := h.decode(x, op)
		return req, noop, unread, e
	}
	ud, ok := x.Dialect.(adapters.UploadDecoder)
	if !ok {
		return nil, noop, true, adapters.BadRequest("this endpoint does not take multipart/form-data")
	}
	form, cleanup, err := bodies.SpoolForm(x.R, params["boundary"], h.MaxUploadSize, h.Uploads, h.BodyOwner(x.R, x.ID))
	switch {
	case errors.Is(err, bodies.ErrTooLarge):
		return nil, cleanup, true, &adapters.Error{Status: http.StatusRequestEntityTooLarge, Type: adapters.ErrRequestTooLarge, Code: "upload_too_large",
			Message: fmt.Sprintf("the upload is larger than the gateway's limit of %d bytes (max_upload_size): send a smaller file", h.MaxUploadSize)}
	case bodies.Busy(err):
		return nil, cleanup, true, BodyBusy(err, x.W.Header(), h.Uploads, true)
	case err != nil:
		var e *adapters.Error
		if errors.As(err, &e) {
			return nil, cleanup, false, e
		}
		if e := BodyReadError(x.R, err); e.Status != http.StatusBadRequest {
			return nil, cleanup, false, e
		}
		h.Log.Warn("upload could not be read", zap.Error(err))
		return nil, cleanup, false, adapters.BadRequest("the multipart/form-data body could not be read: %v", err)
	}
	req, err = ud.DecodeUpload(op, form, x.R)
	if err != nil {
		return nil, cleanup, false, engine.AsError(err)
	}
	if e := engine.CheckModelName(req.Model); e != nil {
		return nil, cleanup, false, e
	}
	return req, cleanup, false, nil
}
