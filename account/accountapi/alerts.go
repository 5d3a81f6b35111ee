package accountapi

import (
	"net/http"
	"slices"

	"github.com/caddy-model-gateway/gateway/account"
	"github.com/caddy-model-gateway/gateway/store"
)

// Budget alerts in the API (docs/alerts.md): a user lists the crossings of
// their own budgets and sets thresholds on their keys; an administrator
// lists everyone's.

// alertRoutes adds the alert endpoints to the mux.
func (h *Handler) alertRoutes(m *http.ServeMux) {
	m.HandleFunc("GET /api/user/alerts", h.user(h.ownAlerts))
	m.HandleFunc("GET /api/admin/alerts", h.admin(h.allAlerts))
	m.HandleFunc("GET /api/user/tokens/{id}/alerts", h.user(h.keyAlerts))
	m.HandleFunc("PUT /api/user/tokens/{id}/alerts", h.user(h.setKeyAlerts))
}

// alertList is a page of alerts.
type alertList struct {
	Data []*store.Alert `json:"data"`
}

func (h *Handler) ownAlerts(_ http.ResponseWriter, r *http.Request, c *caller) (any, error) {
	return h.alerts(r, store.AlertFilter{UserID: c.user.ID})
}

func (h *Handler) allAlerts(_ http.ResponseWriter, r *http.Request, _ *caller) (any, error) {
	id, err := queryID(r, "user_id", "a user's id")
	if err != nil {
		return nil, err
	}
	return h.alerts(r, store.AlertFilter{UserID: id})
}

func (h *Handler) alerts(r *http.Request, f store.AlertFilter) (any, error) {
	limit, err := queryID(r, "limit", "a number of alerts from 1 to 1000")
	if err != nil {
		return nil, err
	}
	f.Limit = int(min(limit, 1000))
	list, err := h.store.ListAlerts(r.Context(), f)
	if err != nil {
		return nil, err
	}
	if list == nil {
		list = []*store.Alert{}
	}
	return alertList{Data: list}, nil
}

// keyThresholds is a key's own alert thresholds, in percent.
type keyThresholds struct {
	Thresholds []int `json:"thresholds"`
}

func (h *Handler) keyAlerts(_ http.ResponseWriter, r *http.Request, c *caller) (any, error) {
	id, err := pathID(r)
	if err != nil {
		return nil, err
	}
	if _, err := account.OwnToken(r.Context(), h.store, c.user.ID, id); err != nil {
		return nil, err
	}
	ts, err := h.store.KeyAlertThresholds(r.Context(), id)
	if err != nil {
		return nil, err
	}
	return keyThresholds{Thresholds: append([]int{}, ts...)}, nil
}

func (h *Handler) setKeyAlerts(_ http.ResponseWriter, r *http.Request, c *caller) (any, error) {
	id, err := pathID(r)
	if err != nil {
		return nil, err
	}
	if _, err := account.OwnToken(r.Context(), h.store, c.user.ID, id); err != nil {
		return nil, err
	}
	var in keyThresholds
	if err := decode(r, &in); err != nil {
		return nil, err
	}
	slices.Sort(in.Thresholds)
	if err := store.CheckThresholds(in.Thresholds); err != nil {
		return nil, badRequest("invalid_thresholds", `%v: send {"thresholds":[50,80,100]}, whole percentages from 1 to 100, [] for none`, err)
	}
	if err := h.store.SetKeyAlertThresholds(r.Context(), id, in.Thresholds); err != nil {
		return nil, err
	}
	return keyThresholds{Thresholds: append([]int{}, in.Thresholds...)}, nil
}
