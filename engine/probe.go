package engine

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/internal/bodies"
)

// Probe is an operator's test of one channel: a one-token chat request
// sent through exactly that channel, bypassing planning, failover and
// billing. It is an observation, not traffic: it does not count toward
// the channel's health (an operator's repeated tests neither eject a
// channel nor hide its failures) and is not metered.

// ProbeResult is what a probe found.
type ProbeResult struct {
	Channel string
	Model   string
	// OK: the upstream answered 2xx with a body the adapter could read.
	OK bool
	// Status is the upstream's status when it answered, else the status a
	// client would have been given (502, 504).
	Status  int
	Latency time.Duration
	// Error is what a client would have been told, Detail what the
	// upstream or the transport said (keys masked); both empty when OK.
	Error, Detail string
	UpstreamID    string
	Usage         adapters.Usage
	// Reply is the start of the answer's text.
	Reply string
}

// probePrompt is what a probe asks: one token of answer is enough.
const probePrompt = "Reply with the word ok."

// Probe sends a one-token chat request for model (the channel's first
// model when empty) through the channel named, within the channel's
// timeouts. A refusal to probe (no such channel, a model it does not
// serve, a family that does not chat) is an *adapters.Error; an upstream
// that fails is a result with OK false.
func (e *Engine) Probe(ctx context.Context, channel, model string) (*ProbeResult, error) {
	ch := e.Channels.Channel(channel)
	up := e.Upstreams.Get(channel)
	if ch == nil || up == nil {
		return nil, adapters.Errorf(http.StatusNotFound, adapters.ErrNotFound, "there is no channel %q", channel)
	}
	if model == "" && len(ch.Models) > 0 {
		model = ch.Models[0]
	}
	if !slices.Contains(ch.Models, model) {
		if _, mapped := ch.ModelMap[model]; !mapped {
			return nil, adapters.Errorf(http.StatusBadRequest, adapters.ErrInvalidRequest,
				"channel %q does not serve the model %q: it serves %s", channel, model, strings.Join(ch.Models, ", "))
		}
	}
	cp, ok := up.Provider.(adapters.ChatProvider)
	if !ok {
		return nil, adapters.Errorf(http.StatusBadRequest, adapters.ErrInvalidRequest,
			"channel %q (%s) does not chat, so it cannot be tested with a one-token request", channel, ch.Type)
	}
	one := int64(1)
	// no client dialect: every family translates the neutral request
	req := &adapters.Request{Op: adapters.OpChat, Model: model, Chat: &adapters.ChatRequest{
		Messages:  []adapters.Message{{Role: adapters.RoleUser, Parts: []adapters.Part{{Type: adapters.PartText, Text: probePrompt}}}},
		MaxTokens: &one,
	}}
	x := &Exchange{R: (&http.Request{}).WithContext(ctx), Req: req, Start: time.Now()}
	res := &ProbeResult{Channel: channel, Model: model}
	at := NewAttempt(ctx, up.Bounds.Timeout, up.Bounds.StreamIdle, false)
	defer at.End()
	resp, f := e.send(x, at, ch, up, cp.NewRequest, 1)
	res.UpstreamID = x.UpstreamID
	if f != nil {
		res.Latency = time.Since(x.Start)
		res.Status, res.Error, res.Detail = f.UpstreamStatus, f.Err.Message, f.Detail
		if res.Status == 0 {
			res.Status = f.Err.Status
		}
		return res, nil
	}
	defer resp.Body.Close()
	res.Status = resp.StatusCode
	body, err := bodies.ReadBounded(resp, up.Bounds.MaxResponseBody)
	res.Latency = time.Since(x.Start)
	switch {
	case errors.Is(at.Cause(), ErrTimeout):
		res.Error = "the upstream did not finish its answer within " + up.Bounds.Timeout.String() + " (its timeout)"
		return res, nil
	case err != nil:
		res.Error, res.Detail = "the upstream answer broke off or was too large", MaskKeys(err.Error(), ch.Keys)
		return res, nil
	}
	out, err := cp.DecodeResponse(req, body)
	if err != nil {
		res.Error, res.Detail = "the upstream answer could not be read", MaskKeys(err.Error(), ch.Keys)
		return res, nil
	}
	res.OK, res.Usage = true, out.Usage
	for _, p := range out.Message.Parts {
		res.Reply += p.Text
	}
	if len(res.Reply) > 200 {
		res.Reply = res.Reply[:200]
	}
	return res, nil
}
