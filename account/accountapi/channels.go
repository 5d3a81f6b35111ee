package accountapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/caddy-model-gateway/gateway/account"
)

// Channels made at runtime: POST /api/admin/channels makes one, PATCH
// /api/admin/channels/{name} changes the fields it is given (keys replaced
// only when given, "disabled" to take it out of service and back), DELETE
// removes it. They live in the database and every instance applies them
// at its next request; the Caddyfile's channels are listed beside them,
// read-only. Keys are never answered, only a masked prefix.

// Runtime is the runtime configuration the admin API edits; the Caddy
// layer implements it (validation needs the adapters and the fetch
// policy), this package answers and audits.
type Runtime interface {
	// ChannelSetups lists every channel's setup: the Caddyfile's first,
	// in their order, then the database's by name.
	ChannelSetups(ctx context.Context) ([]*ChannelSetup, error)
	// PutChannel makes the channel of fields (create) or changes the
	// fields given of the database's channel name; it answers the setup
	// before (nil when made) and after. A refusal is a *Refusal.
	PutChannel(ctx context.Context, name string, fields map[string]json.RawMessage, create bool) (before, after *ChannelSetup, err error)
	// DeleteChannel removes a database channel and answers what it was.
	DeleteChannel(ctx context.Context, name string) (*ChannelSetup, error)
	// PriceSetups lists every price: the Caddyfile's, then the database's.
	PriceSetups(ctx context.Context) ([]*PriceSetup, error)
	// PutPrice makes (create) or replaces the database's price of model,
	// given as the JSON of the price type; it answers the price before
	// (nil when made) and after. A refusal is a *Refusal.
	PutPrice(ctx context.Context, model string, price json.RawMessage, create bool) (before, after *PriceSetup, err error)
	// DeletePrice removes a database price and answers what it was.
	DeletePrice(ctx context.Context, model string) (*PriceSetup, error)
}

// PriceSetup is one model's price and where it is set.
type PriceSetup struct {
	Model  string `json:"model"`
	Source string `json:"source"`
	// Price is the price as the gateway reads it, in quota units (see
	// Model.Price)
	Price     json.RawMessage `json:"price"`
	UpdatedAt *time.Time      `json:"updated_at,omitempty"`
}

// Sources of a channel's setup.
const (
	SourceCaddyfile = "caddyfile"
	SourceDatabase  = "database"
)

// ChannelSetup is how a channel is set up, keys masked: what the console
// shows and edits.
type ChannelSetup struct {
	Name string `json:"name"`
	// Source is caddyfile (read-only here) or database
	Source    string            `json:"source"`
	Type      string            `json:"type"`
	BaseURL   string            `json:"base_url"`
	Models    []string          `json:"models"`
	ModelMap  map[string]string `json:"model_map,omitempty"`
	Priority  int               `json:"priority"`
	Weight    int               `json:"weight"`
	KeyPrefix string            `json:"key_prefix"`
	Keys      int               `json:"keys"`
	Disabled  bool              `json:"disabled"`
	// Config is a database channel's configuration as stored, keys left
	// out (adapter options and timeouts included)
	Config json.RawMessage `json:"config,omitempty"`
	// LastTest is a database channel's last test, as the test answered it
	LastTest  json.RawMessage `json:"last_test,omitempty"`
	UpdatedAt *time.Time      `json:"updated_at,omitempty"`
}

// Refusal is a runtime change refused, in the API's terms: Status 400 for
// bad input, 404 for no such channel, 409 for a name taken.
type Refusal struct {
	Status int
	Code   string
	Msg    string
}

func (r *Refusal) Error() string { return r.Msg }

func (h *Handler) runtimeRoutes(m *http.ServeMux) {
	m.HandleFunc("POST /api/admin/channels", h.admin(h.createChannel))
	m.HandleFunc("PATCH /api/admin/channels/{name}", h.admin(h.updateChannel))
	m.HandleFunc("DELETE /api/admin/channels/{name}", h.admin(h.deleteChannel))
	m.HandleFunc("GET /api/admin/prices", h.admin(h.listPrices))
	m.HandleFunc("POST /api/admin/prices", h.admin(h.createPrice))
	m.HandleFunc("PATCH /api/admin/prices/{model}", h.admin(h.updatePrice))
	m.HandleFunc("DELETE /api/admin/prices/{model}", h.admin(h.deletePrice))
}

// Prices kept in the database: GET /api/admin/prices lists every price
// with its source, POST makes one ({"model": ..., "price": {...}}, the
// price in quota units as GET /api/user/models shows it), PATCH
// /api/admin/prices/{model} replaces it ({"price": {...}}), DELETE
// removes it; the Caddyfile's are read-only.

type priceBody struct {
	Model string          `json:"model"`
	Price json.RawMessage `json:"price"`
}

func (h *Handler) listPrices(_ http.ResponseWriter, r *http.Request, _ *caller) (any, error) {
	if h.runtime == nil {
		return nil, errNoRuntime
	}
	list, err := h.runtime.PriceSetups(r.Context())
	if err != nil {
		return nil, err
	}
	if list == nil {
		list = []*PriceSetup{}
	}
	return map[string]any{"data": list}, nil
}

func (h *Handler) createPrice(_ http.ResponseWriter, r *http.Request, c *caller) (any, error) {
	if h.runtime == nil {
		return nil, errNoRuntime
	}
	var in priceBody
	if err := decode(r, &in); err != nil {
		return nil, err
	}
	_, after, err := h.runtime.PutPrice(r.Context(), in.Model, in.Price, true)
	if err != nil {
		return nil, err
	}
	h.audit(r.Context(), c, account.AuditPriceCreate, "price:"+in.Model, nil, priceFields(after))
	return after, nil
}

func (h *Handler) updatePrice(_ http.ResponseWriter, r *http.Request, c *caller) (any, error) {
	if h.runtime == nil {
		return nil, errNoRuntime
	}
	var in struct {
		Price json.RawMessage `json:"price"`
	}
	if err := decode(r, &in); err != nil {
		return nil, err
	}
	model := r.PathValue("model")
	before, after, err := h.runtime.PutPrice(r.Context(), model, in.Price, false)
	if err != nil {
		return nil, err
	}
	h.audit(r.Context(), c, account.AuditPriceUpdate, "price:"+model, priceFields(before), priceFields(after))
	return after, nil
}

func (h *Handler) deletePrice(_ http.ResponseWriter, r *http.Request, c *caller) (any, error) {
	if h.runtime == nil {
		return nil, errNoRuntime
	}
	model := r.PathValue("model")
	before, err := h.runtime.DeletePrice(r.Context(), model)
	if err != nil {
		return nil, err
	}
	h.audit(r.Context(), c, account.AuditPriceDelete, "price:"+model, priceFields(before), nil)
	return map[string]any{"deleted": model}, nil
}

func priceFields(p *PriceSetup) account.Fields {
	if p == nil {
		return nil
	}
	return account.Fields{"price": p.Price}
}

var errNoRuntime = &apiError{status: http.StatusNotFound, typ: errNotFound, code: "no_runtime_configuration",
	msg: "this gateway keeps no channels in its database"}

func (h *Handler) createChannel(_ http.ResponseWriter, r *http.Request, c *caller) (any, error) {
	if h.runtime == nil {
		return nil, errNoRuntime
	}
	var fields map[string]json.RawMessage
	if err := decode(r, &fields); err != nil {
		return nil, err
	}
	var name string
	if raw, ok := fields["name"]; !ok || json.Unmarshal(raw, &name) != nil || name == "" {
		return nil, badRequest("invalid_channel", "give the channel a \"name\"")
	}
	_, after, err := h.runtime.PutChannel(r.Context(), name, fields, true)
	if err != nil {
		return nil, err
	}
	h.audit(r.Context(), c, account.AuditChannelCreate, "channel:"+name, nil, setupFields(after))
	return after, nil
}

func (h *Handler) updateChannel(_ http.ResponseWriter, r *http.Request, c *caller) (any, error) {
	if h.runtime == nil {
		return nil, errNoRuntime
	}
	var fields map[string]json.RawMessage
	if err := decode(r, &fields); err != nil {
		return nil, err
	}
	name := r.PathValue("name")
	before, after, err := h.runtime.PutChannel(r.Context(), name, fields, false)
	if err != nil {
		return nil, err
	}
	h.audit(r.Context(), c, account.AuditChannelUpdate, "channel:"+name, setupFields(before), setupFields(after))
	return after, nil
}

func (h *Handler) deleteChannel(_ http.ResponseWriter, r *http.Request, c *caller) (any, error) {
	if h.runtime == nil {
		return nil, errNoRuntime
	}
	name := r.PathValue("name")
	before, err := h.runtime.DeleteChannel(r.Context(), name)
	if err != nil {
		return nil, err
	}
	h.audit(r.Context(), c, account.AuditChannelDelete, "channel:"+name, setupFields(before), nil)
	return map[string]any{"deleted": name}, nil
}

// setupFields is what the audit log keeps of a setup: never a key, only
// its masked prefix and how many there are.
func setupFields(s *ChannelSetup) account.Fields {
	if s == nil {
		return nil
	}
	f := account.Fields{"type": s.Type, "base_url": s.BaseURL, "models": s.Models, "priority": s.Priority,
		"weight": s.Weight, "key_prefix": s.KeyPrefix, "keys": s.Keys, "disabled": s.Disabled}
	if len(s.ModelMap) > 0 {
		f["model_map"] = s.ModelMap
	}
	return f
}

// refusalError puts a Refusal in the API's error shape.
func refusalError(err error) (*apiError, bool) {
	var ref *Refusal
	if !errors.As(err, &ref) {
		return nil, false
	}
	typ := errInvalidRequest
	switch ref.Status {
	case http.StatusNotFound:
		typ = errNotFound
	case http.StatusForbidden:
		typ = errPermission
	}
	return &apiError{status: ref.Status, typ: typ, code: ref.Code, msg: ref.Msg}, true
}

// setupsByName indexes the setups, nil when there is no runtime.
func (h *Handler) setupsByName(ctx context.Context) (map[string]*ChannelSetup, []*ChannelSetup, error) {
	if h.runtime == nil {
		return nil, nil, nil
	}
	list, err := h.runtime.ChannelSetups(ctx)
	if err != nil {
		return nil, nil, err
	}
	by := make(map[string]*ChannelSetup, len(list))
	for _, s := range list {
		by[s.Name] = s
	}
	return by, list, nil
}

// testParallelism bounds the tests "test all" runs at once: each is one
// request upstream, and a gateway with many channels must not burst.
const testParallelism = 4

// testAllChannels answers POST /api/admin/channels/test_all: one
// one-token request per model of every channel in service here, at most
// testParallelism at once, in the channels' and models' order.
func (h *Handler) testAllChannels(_ http.ResponseWriter, r *http.Request, c *caller) (any, error) {
	if h.testChan == nil || h.channels == nil {
		return nil, &apiError{status: http.StatusNotFound, typ: errNotFound, code: "no_channels", msg: "this gateway has no channels to test"}
	}
	type job struct{ channel, model string }
	var jobs []job
	for _, s := range h.channels() {
		for _, m := range s.Models {
			jobs = append(jobs, job{s.Name, m})
		}
	}
	results := make([]*ChannelTest, len(jobs))
	sem := make(chan struct{}, testParallelism)
	var wg sync.WaitGroup
	for i, j := range jobs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			res, err := h.testChan(r.Context(), j.channel, j.model)
			if err != nil {
				res = &ChannelTest{Channel: j.channel, Model: j.model, Error: err.Error()}
			}
			results[i] = res
		}()
	}
	wg.Wait()
	var ok, failed int
	var cost int64
	for _, res := range results {
		if res.OK {
			ok++
		} else {
			failed++
		}
		cost += res.Cost
	}
	h.audit(r.Context(), c, account.AuditChannelTest, "channels", nil, account.Fields{"tests": len(results), "ok": ok, "failed": failed})
	return map[string]any{"data": results, "ok": ok, "failed": failed, "cost": cost}, nil
}
