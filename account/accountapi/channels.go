package accountapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/caddy-model-gateway/gateway/account"
	"github.com/caddy-model-gateway/gateway/store"
)

// Channels made at runtime: POST /api/admin/channels makes one, PATCH
// /api/admin/channels/{name} changes the fields it is given (keys replaced
// only when given, "disabled" to take it out of service and back), DELETE
// removes it. They live in the database and every instance applies them
// at its next request; the Caddyfile's channels are listed beside them,
// read-only. Keys are never answered, only a masked prefix.

// Runtime is the runtime configuration the admin API edits; package
// runtimecfg implements it (validation needs the adapters, which the Caddy
// layer hands it, and the fetch policy), this package answers and audits.
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
	// Items lists every price or plan (kind store.RuntimePrice or
	// store.RuntimePlan): the Caddyfile's, then the database's.
	Items(ctx context.Context, kind string) ([]*ItemSetup, error)
	// PutItem makes (create) or replaces the database's price or plan
	// name, given as the JSON of its configuration type; it answers it
	// before (nil when made) and after. A refusal is a *Refusal.
	PutItem(ctx context.Context, kind, name string, value json.RawMessage, create bool) (before, after *ItemSetup, err error)
	// DeleteItem removes a database price or plan and answers what it was.
	DeleteItem(ctx context.Context, kind, name string) (*ItemSetup, error)
}

// ItemSetup is one price (of a model) or plan and where it is set. Its
// JSON names them as the API's bodies do: {"model", "price"} or
// {"name", "plan"}.
type ItemSetup struct {
	Kind   string
	Name   string
	Source string
	// Value is the price in quota units (see Model.Price) or the plan as
	// the Caddyfile's plans are configured
	Value     json.RawMessage
	UpdatedAt *time.Time
}

// MarshalJSON names the item by its kind.
func (s *ItemSetup) MarshalJSON() ([]byte, error) {
	k := itemKinds[s.Kind]
	m := map[string]any{k.nameField: s.Name, "source": s.Source, k.valueField: s.Value}
	if s.UpdatedAt != nil {
		m["updated_at"] = s.UpdatedAt
	}
	return json.Marshal(m)
}

// itemKind is how the API names a kind of item.
type itemKind struct {
	path, nameField, valueField string
	create, update, remove      string // audit actions
}

var itemKinds = map[string]itemKind{
	store.RuntimePrice: {"prices", "model", "price", account.AuditPriceCreate, account.AuditPriceUpdate, account.AuditPriceDelete},
	store.RuntimePlan:  {"plans", "name", "plan", account.AuditPlanCreate, account.AuditPlanUpdate, account.AuditPlanDelete},
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
	for kind, k := range itemKinds {
		if kind != store.RuntimePlan { // plans: listPlans (userpage.go) answers both views
			m.HandleFunc("GET /api/admin/"+k.path, h.admin(h.listItems(kind)))
		}
		m.HandleFunc("POST /api/admin/"+k.path, h.admin(h.createItem(kind)))
		m.HandleFunc("PATCH /api/admin/"+k.path+"/{name}", h.admin(h.updateItem(kind)))
		m.HandleFunc("DELETE /api/admin/"+k.path+"/{name}", h.admin(h.deleteItem(kind)))
	}
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

// Prices and plans kept in the database: GET /api/admin/prices lists
// every price with its source; POST makes one ({"model": ..., "price":
// {...}}, the price in quota units as GET /api/user/models shows it);
// PATCH /api/admin/prices/{model} replaces it ({"price": {...}}); DELETE
// removes it. /api/admin/plans is the same with {"name": ..., "plan":
// {"windows": {"daily": "5"}, "models": [...], "rpm": ...}}. The
// Caddyfile's are read-only.

func (h *Handler) listItems(kind string) userHandlerFunc {
	return func(_ http.ResponseWriter, r *http.Request, _ *caller) (any, error) {
		if h.runtime == nil {
			return nil, errNoRuntime
		}
		list, err := h.runtime.Items(r.Context(), kind)
		if err != nil {
			return nil, err
		}
		if list == nil {
			list = []*ItemSetup{}
		}
		return map[string]any{"data": list}, nil
	}
}

func (h *Handler) createItem(kind string) userHandlerFunc {
	k := itemKinds[kind]
	return func(_ http.ResponseWriter, r *http.Request, c *caller) (any, error) {
		if h.runtime == nil {
			return nil, errNoRuntime
		}
		var in map[string]json.RawMessage
		if err := decode(r, &in); err != nil {
			return nil, err
		}
		var name string
		if raw, ok := in[k.nameField]; !ok || json.Unmarshal(raw, &name) != nil || name == "" {
			return nil, badRequest("invalid_"+kind, "give the %s's %q", kind, k.nameField)
		}
		for f := range in {
			if f != k.nameField && f != k.valueField {
				return nil, badRequest("invalid_"+kind, "unknown field %q: send %q and %q", f, k.nameField, k.valueField)
			}
		}
		_, after, err := h.runtime.PutItem(r.Context(), kind, name, in[k.valueField], true)
		if err != nil {
			return nil, err
		}
		h.audit(r.Context(), c, k.create, kind+":"+name, nil, itemFields(after))
		return after, nil
	}
}

func (h *Handler) updateItem(kind string) userHandlerFunc {
	k := itemKinds[kind]
	return func(_ http.ResponseWriter, r *http.Request, c *caller) (any, error) {
		if h.runtime == nil {
			return nil, errNoRuntime
		}
		var in map[string]json.RawMessage
		if err := decode(r, &in); err != nil {
			return nil, err
		}
		for f := range in {
			if f != k.valueField {
				return nil, badRequest("invalid_"+kind, "unknown field %q: send %q (the name is in the path)", f, k.valueField)
			}
		}
		name := r.PathValue("name")
		before, after, err := h.runtime.PutItem(r.Context(), kind, name, in[k.valueField], false)
		if err != nil {
			return nil, err
		}
		h.audit(r.Context(), c, k.update, kind+":"+name, itemFields(before), itemFields(after))
		return after, nil
	}
}

func (h *Handler) deleteItem(kind string) userHandlerFunc {
	k := itemKinds[kind]
	return func(_ http.ResponseWriter, r *http.Request, c *caller) (any, error) {
		if h.runtime == nil {
			return nil, errNoRuntime
		}
		name := r.PathValue("name")
		before, err := h.runtime.DeleteItem(r.Context(), kind, name)
		if err != nil {
			return nil, err
		}
		h.audit(r.Context(), c, k.remove, kind+":"+name, itemFields(before), nil)
		return map[string]any{"deleted": name}, nil
	}
}

func itemFields(s *ItemSetup) account.Fields {
	if s == nil {
		return nil
	}
	return account.Fields{itemKinds[s.Kind].valueField: s.Value}
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
