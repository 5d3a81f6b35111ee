package engine

import (
	"math"
	"net/http"
	"slices"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/routing"
)

// Planning: the one place that turns a model into the channels a request
// is tried on. A channel is kept when its family has the capability the
// request needs (adapters.ChatProvider, RerankProvider, MediaProvider,
// RealtimeProvider, TaskProvider); a model whose channels all lack it is
// refused with a 400 naming the channel and what it serves, instead of
// spending attempts on families that cannot answer.

// Plan is the order in which to try the model's channels: those keep
// accepts (nil: all), healthy ones first as routing decides, at most
// MaxAttempts. Channels keep refuses do not spend the retry budget.
func (e *Engine) Plan(model string, keep func(*routing.Channel) bool) []*routing.Channel {
	return e.Channels.PlanFor(model, e.MaxAttempts, keep)
}

// planFor plans a relayed request: Plan, except that a conversation (chat
// or responses, with affinity on) is planned over every channel that may
// serve it, ordered by its binding (pin, affinity.go), and then cut to the
// retry budget.
func (e *Engine) planFor(x *Exchange, keep func(*routing.Channel) bool) []*routing.Channel {
	if e.Affinity == nil || !x.Req.Op.Conversation() {
		return e.Plan(x.Req.Model, keep)
	}
	plan := e.pin(x, e.Channels.PlanFor(x.Req.Model, math.MaxInt, keep))
	if len(plan) > e.MaxAttempts {
		plan = plan[:e.MaxAttempts]
	}
	return plan
}

// provider is ch's family, nil for a channel of no configured upstream.
func (e *Engine) provider(ch *routing.Channel) adapters.Provider {
	if up := e.Upstreams.Get(ch.Name); up != nil {
		return up.Provider
	}
	return nil
}

// Relay admits a chat, completion, embedding, count_tokens, responses or
// rerank request, plans it onto the channels whose family serves its
// operation and serves it (Serve). count_tokens goes only to a family
// whose wire is the client's dialect (a vendor counts only its own) and is
// counted locally when there is none.
func (e *Engine) Relay(x *Exchange) error {
	if ae := e.Admit(x); ae != nil {
		return x.Fail(ae)
	}
	if served, err := e.serveCached(x); served {
		return err
	}
	req := x.Req
	var keep func(*routing.Channel) bool
	switch req.Op {
	case adapters.OpRerank:
		keep = func(ch *routing.Channel) bool {
			_, ok := e.provider(ch).(adapters.RerankProvider)
			return ok
		}
	case adapters.OpCountTokens:
		keep = func(ch *routing.Channel) bool {
			cp, ok := e.provider(ch).(adapters.ChatProvider)
			return ok && cp.WireDialect() == req.Dialect
		}
	default:
		keep = e.answersChat
	}
	plan := e.planFor(x, keep)
	if len(plan) == 0 && req.Op == adapters.OpCountTokens {
		return CountLocally(x)
	}
	if len(plan) == 0 {
		if all := e.Plan(req.Model, nil); len(all) > 0 {
			return x.Fail(Unserved(all[0], e.provider(all[0]), req.Op))
		}
	}
	return e.Serve(x, plan)
}

// Unserved is the 400 for an operation ch's family has no capability for,
// worded by what the family does serve.
func Unserved(ch *routing.Channel, prov adapters.Provider, op adapters.Operation) *adapters.Error {
	_, chat := prov.(adapters.ChatProvider)
	_, rerank := prov.(adapters.RerankProvider)
	_, tasks := prov.(adapters.TaskProvider)
	switch {
	case !chat && rerank:
		return adapters.Unsupported("channel %q (%s) serves only /v1/rerank, not %s requests: use a model of another channel", ch.Name, ch.Type, op)
	case !chat && tasks:
		return adapters.Unsupported("channel %q serves video generation tasks only (POST /api/generate/submit), not %s requests", ch.Name, op)
	}
	return adapters.Unsupported("channel %q (%s) does not serve %s requests", ch.Name, ch.Type, op)
}

// ServeMedia plans an image, speech or transcription request onto the
// channels whose family serves its endpoint, admits it and serves it. A
// model none of whose channels does is refused before anything is
// reserved, naming the endpoint, for a model the key may use (else
// admission's 403 or 404 answers).
func (e *Engine) ServeMedia(x *Exchange) error {
	req := x.Req
	plan := e.Plan(req.Model, func(ch *routing.Channel) bool {
		mp, ok := e.provider(ch).(adapters.MediaProvider)
		return ok && mp.ServesMedia(req)
	})
	if len(plan) == 0 && ModelAllowed(e.Gate.Models(), x.ID.Token, req.Model) == nil {
		if all := e.Plan(req.Model, nil); len(all) > 0 {
			return x.Fail(adapters.Errorf(http.StatusBadRequest, adapters.ErrInvalidRequest,
				"the model %s is served by channel type %s, which has no %s endpoint: use a model whose channel serves %s",
				req.Model, all[0].Type, mediaEndpoint(req), mediaEndpoint(req)))
		}
	}
	if ae := e.Admit(x); ae != nil {
		return x.Fail(ae)
	}
	return e.Serve(x, plan)
}

// mediaEndpoint names the endpoint a media request called, for errors.
func mediaEndpoint(req *adapters.Request) string {
	switch {
	case req.Op == adapters.OpImage && req.Media != nil && req.Media.Edit:
		return "image edits"
	case req.Op == adapters.OpImage:
		return "image generations"
	case req.Op == adapters.OpSpeech:
		return "speech"
	}
	return "transcriptions"
}

// answersChat keeps a channel whose family answers chat, completion,
// embedding and responses requests.
func (e *Engine) answersChat(ch *routing.Channel) bool {
	_, ok := e.provider(ch).(adapters.ChatProvider)
	return ok
}

// RealtimePlan is the model's channels whose family serves Realtime
// sessions, in the order they are tried.
func (e *Engine) RealtimePlan(model string) []*routing.Channel {
	return e.Plan(model, func(ch *routing.Channel) bool {
		_, ok := e.provider(ch).(adapters.RealtimeProvider)
		return ok
	})
}

// ServesRealtime reports whether a channel of the model serves Realtime
// sessions, for the endpoints that refuse a model before opening one.
func (e *Engine) ServesRealtime(model string) bool { return len(e.RealtimePlan(model)) > 0 }

// ChatChannels is the model's channels whose family answers chat requests,
// in the order they are tried: where a batch's lines run when no channel
// takes the batch itself.
func (e *Engine) ChatChannels(model string) []*routing.Channel {
	return e.Plan(model, e.answersChat)
}

// BatchChannels is the model's channels whose family runs batches
// (adapters.BatchProvider) and takes this one, in the order they are
// tried; takes is the batch's own condition on a family (its dialect,
// its operation, its number of lines).
func (e *Engine) BatchChannels(model string, takes func(ch *routing.Channel, bp adapters.BatchProvider) bool) []*routing.Channel {
	return e.Plan(model, func(ch *routing.Channel) bool {
		bp, ok := e.provider(ch).(adapters.BatchProvider)
		return ok && takes(ch, bp)
	})
}

// TaskPlan is what planning a task submit found: the channels that can
// run it as asked, and why others could not.
type TaskPlan struct {
	Channels []*routing.Channel
	// PollingOnly: a task channel was left out because the submit has a
	// callback its family cannot take.
	PollingOnly bool
	// Owned is the first metadata member a kept family owns ("" if none):
	// the submit must be refused.
	Owned string
}

// PlanTask plans a task submit for model onto the channels whose family
// runs tasks, those that take a callback when callback is set. metaKeys
// are the members of the client's metadata, checked against each kept
// family's owned fields.
func (e *Engine) PlanTask(model string, callback bool, metaKeys []string) TaskPlan {
	var tp TaskPlan
	tp.Channels = e.Plan(model, func(ch *routing.Channel) bool {
		p, ok := e.provider(ch).(adapters.TaskProvider)
		if !ok {
			return false
		}
		if callback && !p.CallbackCapable() {
			tp.PollingOnly = true
			return false
		}
		if tp.Owned == "" {
			owned := p.OwnedFields()
			if i := slices.IndexFunc(metaKeys, func(k string) bool { return slices.Contains(owned, k) }); i >= 0 {
				tp.Owned = metaKeys[i]
			}
		}
		return true
	})
	return tp
}
