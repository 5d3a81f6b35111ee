package accountapi

import (
	"net/http"

	"github.com/caddy-model-gateway/gateway/account"
)

// Spending windows in the API: administrators set a user's or a key's
// windows and a user's plan and group; a user reads theirs with
// GET /api/user/self.

// budgetRoutes adds the budget endpoints to the mux.
func (h *Handler) budgetRoutes(m *http.ServeMux) {
	m.HandleFunc("PUT /api/admin/users/{id}/budget", h.admin(h.setUserBudget))
	m.HandleFunc("PUT /api/admin/tokens/{id}/budget", h.admin(h.setKeyBudget))
	m.HandleFunc("PUT /api/admin/users/{id}/plan", h.admin(h.setUserPlan))
}

func (h *Handler) budgetIn(r *http.Request) (int64, account.BudgetChange, error) {
	id, err := pathID(r)
	if err != nil {
		return 0, nil, err
	}
	var in struct {
		Windows account.BudgetChange `json:"windows"`
	}
	if err := decode(r, &in); err != nil {
		return 0, nil, err
	}
	if len(in.Windows) == 0 {
		return 0, nil, badRequest("invalid_request", `send {"windows":{"5h":"10","daily":"20","weekly":"","monthly":"","lifetime":""}}: the windows to set, in USD, "0" to remove one`)
	}
	return id, in.Windows, nil
}

func (h *Handler) setUserBudget(_ http.ResponseWriter, r *http.Request, c *caller) (any, error) {
	id, ch, err := h.budgetIn(r)
	if err != nil {
		return nil, err
	}
	a, err := account.SetUserBudget(r.Context(), h.store, c.user, id, ch)
	if err != nil {
		return nil, err
	}
	h.audit(r.Context(), c, a.Action, a.Target, a.Before, a.After)
	if h.budgets != nil {
		h.budgets.Forget(id, 0)
	}
	return struct{}{}, nil
}

func (h *Handler) setKeyBudget(_ http.ResponseWriter, r *http.Request, c *caller) (any, error) {
	id, ch, err := h.budgetIn(r)
	if err != nil {
		return nil, err
	}
	a, err := account.SetKeyBudget(r.Context(), h.store, c.user, id, ch)
	if err != nil {
		return nil, err
	}
	h.audit(r.Context(), c, a.Action, a.Target, a.Before, a.After)
	if h.budgets != nil {
		h.budgets.Forget(0, id)
	}
	return struct{}{}, nil
}

func (h *Handler) setUserPlan(_ http.ResponseWriter, r *http.Request, c *caller) (any, error) {
	id, err := pathID(r)
	if err != nil {
		return nil, err
	}
	var in account.PlanChange
	if err := decode(r, &in); err != nil {
		return nil, err
	}
	if in.Plan == nil && in.Group == nil {
		return nil, badRequest("invalid_request", `send {"plan":"pro","until":"2026-12-31T00:00:00Z","group":"team"}: a plan, a group or both, "" to remove one`)
	}
	b, a, err := account.SetUserPlan(r.Context(), h.store, c.user, id, in, h.knownBudget)
	if err != nil {
		return nil, err
	}
	h.audit(r.Context(), c, a.Action, a.Target, a.Before, a.After)
	if h.budgets != nil {
		h.budgets.Forget(id, 0)
	}
	return b, nil
}

// selfView is GET /api/user/self: the user and their spending windows.
type selfView struct {
	account.UserView
	Budget *account.BudgetView `json:"budget,omitempty"`
}

func (h *Handler) self(_ http.ResponseWriter, r *http.Request, c *caller) (any, error) {
	v := selfView{UserView: account.ViewUser(c.user)}
	if h.budgets != nil {
		b, err := account.ViewBudget(r.Context(), h.budgets, h.store, c.user, c.token)
		if err != nil {
			return nil, err
		}
		v.Budget = b
	}
	return v, nil
}

// knownBudget says whether the configuration defines the plan or budget
// group named.
func (h *Handler) knownBudget(kind, name string) bool {
	if h.budgets == nil {
		return false
	}
	if kind == "plan" {
		return h.budgets.PlanNamed(name) != nil
	}
	return h.budgets.Groups[name] != nil
}
