package engine

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/internal/bodies"
	"github.com/caddy-model-gateway/gateway/routing"
)

// relayMedia answers an image or transcription request. An answer the
// client takes as it is streams through, metered on the side; any other
// is read within the channel's max_response_body and timeout, decoded for
// billing and rendered in the client's dialect.
func (e *Engine) relayMedia(x *Exchange, at *Attempt, ch *routing.Channel, b Bounds, prov adapters.MediaProvider, resp *http.Response) error {
	defer at.End()
	defer resp.Body.Close()
	if mm, ok := prov.(adapters.MediaMeter); ok {
		if meter := mm.NewMediaMeter(x.Req); meter != nil {
			return e.relayMetered(x, at, ch, b, resp, meter)
		}
	}
	body, err := bodies.ReadBounded(resp, b.MaxResponseBody)
	x.TTFB = time.Since(x.Start)
	switch {
	case x.R.Context().Err() != nil:
		return x.Fail(adapters.ClientClosed())
	case errors.Is(at.Cause(), ErrTimeout):
		return x.Fail(adapters.Errorf(http.StatusGatewayTimeout, adapters.ErrAPI,
			"the upstream of channel %q did not finish its answer within %s (its timeout)", ch.Name, b.Timeout))
	case errors.Is(err, bodies.ErrTooLarge):
		return x.Fail(adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI,
			"the upstream of channel %q answered with more than the gateway's limit of %d bytes (max_response_body)", ch.Name, b.MaxResponseBody))
	case err != nil:
		return x.Fail(adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI, "the upstream answer of channel %q broke off", ch.Name))
	}
	out, err := prov.DecodeMediaResponse(x.Req, body)
	if err != nil {
		e.Log.Warn("upstream answer unreadable", zap.String("channel", ch.Name), zap.Error(err))
		return x.Fail(adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI, "the upstream answer of channel %q could not be read", ch.Name))
	}
	x.Usage, x.Media.Usage = out.Usage, out.Media
	enc, ok := x.Dialect.(adapters.MediaEncoder)
	if !ok {
		return x.Fail(adapters.BadRequest("this dialect has no media endpoints"))
	}
	encoded, ct, err := enc.EncodeMediaResponse(x.Req, out)
	if err != nil {
		return x.Fail(AsError(err))
	}
	x.W.Header().Set("Content-Type", ct)
	x.Status = http.StatusOK
	x.W.WriteHeader(http.StatusOK)
	_, _ = x.W.Write(encoded)
	return nil
}

// relayMetered streams an answer the client takes as it is (an images
// answer of its own dialect) as it comes, the meter reading what billing
// needs on the side, within the channel's timeout. A failure after the
// first byte aborts the connection, as relaySpeech does.
func (e *Engine) relayMetered(x *Exchange, at *Attempt, ch *routing.Channel, b Bounds, resp *http.Response, meter adapters.MediaMeterWriter) error {
	ct := resp.Header.Get("Content-Type")
	if ct == "" {
		ct = "application/json"
	}
	x.W.Header().Set("Content-Type", ct)
	if resp.ContentLength >= 0 && !resp.Uncompressed {
		x.W.Header().Set("Content-Length", strconv.FormatInt(resp.ContentLength, 10))
	}
	x.Status = http.StatusOK
	x.W.WriteHeader(http.StatusOK)
	err := e.copyAnswer(x, at, ch, b, resp, meter)
	out, merr := meter.Result()
	x.Usage, x.Media.Usage = out.Usage, out.Media
	if merr != nil && err == nil {
		e.Log.Warn("upstream images answer unreadable", zap.String("channel", ch.Name), zap.Error(merr))
	}
	if err != nil {
		panic(http.ErrAbortHandler)
	}
	return nil
}

// copyAnswer copies the upstream's answer to the client (and to side, if
// given) as it comes, flushing each piece. It records how the copy ended
// on the exchange and returns an error when the answer was cut short.
func (e *Engine) copyAnswer(x *Exchange, at *Attempt, ch *routing.Channel, b Bounds, resp *http.Response, side io.Writer) error {
	rc := http.NewResponseController(x.W)
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if x.TTFB == 0 {
				x.TTFB = time.Since(x.Start)
			}
			if side != nil {
				_, _ = side.Write(buf[:n])
			}
			if _, werr := x.W.Write(buf[:n]); werr != nil {
				x.Status, x.ErrMsg = adapters.StatusClientClosed, "client disconnected"
				return nil // nobody to tell
			}
			_ = rc.Flush()
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			if x.R.Context().Err() != nil {
				x.Status, x.ErrMsg = adapters.StatusClientClosed, "client disconnected"
				return nil
			}
			msg := fmt.Sprintf("the upstream answer of channel %q broke off", ch.Name)
			if errors.Is(at.Cause(), ErrTimeout) {
				msg = fmt.Sprintf("the upstream answer of channel %q did not finish within %s (its timeout)", ch.Name, b.Timeout)
			}
			x.Status, x.ErrMsg = http.StatusBadGateway, msg
			e.FailedMidAnswer(ch, &Failure{Channel: true, Err: adapters.Errorf(http.StatusBadGateway, adapters.ErrAPI, "%s", msg),
				Detail: MaskKeys(err.Error(), ch.Keys)})
			return err
		}
	}
}

// relaySpeech streams the upstream's audio to the client as it comes,
// with the upstream's content type, within the channel's timeout. Once the
// first byte is out a failure can only cut the answer short: the
// connection is aborted so the client sees an incomplete body, never a
// clean end.
func (e *Engine) relaySpeech(x *Exchange, at *Attempt, ch *routing.Channel, b Bounds, resp *http.Response) error {
	defer at.End()
	defer resp.Body.Close()
	ct := resp.Header.Get("Content-Type")
	if ct == "" {
		ct = "application/octet-stream"
	}
	hdr := x.W.Header()
	hdr.Set("Content-Type", ct)
	hdr.Set("X-Accel-Buffering", "no")
	x.Status = http.StatusOK
	x.W.WriteHeader(http.StatusOK)
	if err := e.copyAnswer(x, at, ch, b, resp, nil); err != nil {
		panic(http.ErrAbortHandler)
	}
	return nil
}
