package accountapi

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/caddy-model-gateway/gateway/account"
	"github.com/caddy-model-gateway/gateway/billing"
	"github.com/caddy-model-gateway/gateway/store"
)

type credentials struct {
	Username string `json:"username"`
	Password string `json:"password"`
	AffCode  string `json:"aff_code,omitempty"`
}

func (h *Handler) login(w http.ResponseWriter, r *http.Request) (any, error) {
	if crossOrigin(r) {
		return nil, errCrossSite
	}
	var in credentials
	if err := decode(r, &in); err != nil {
		return nil, err
	}
	if in.AffCode != "" {
		return nil, badRequest("invalid_request", "aff_code belongs to registration, not login")
	}
	u, err := h.gate.LogIn(r.Context(), h.clientNetwork(r), in.Username, in.Password)
	if err != nil {
		return nil, err
	}
	// a user with a second factor gets a pending login, not a session
	pending, err := h.gate.StartSecondStep(r.Context(), u)
	if err != nil {
		return nil, err
	}
	if pending != nil {
		return secondStepAnswer{Required: true, Token: pending.Token, Methods: pending.Methods,
			ExpiresIn: int(pending.Expires / time.Second)}, nil
	}
	return h.startSession(w, r, u)
}

func (h *Handler) register(w http.ResponseWriter, r *http.Request) (any, error) {
	if err := h.gate.RegistrationOpen(); err != nil {
		return nil, err
	}
	if crossOrigin(r) {
		return nil, errCrossSite
	}
	var in credentials
	if err := decode(r, &in); err != nil {
		return nil, err
	}
	u, err := h.gate.Register(r.Context(), h.clientNetwork(r), in.Username, in.Password, in.AffCode)
	if err != nil {
		return nil, err
	}
	return account.ViewUser(u), nil
}

func (h *Handler) logout(w http.ResponseWriter, r *http.Request) (any, error) {
	c, ok := h.sessions.cookie(r)
	if !ok {
		return struct{}{}, nil // logged out already
	}
	if !sameOrigin(r) || !jsonBody(r) {
		return nil, errCrossSite
	}
	if err := h.sessions.Logins.End(r.Context(), c.Value); err != nil {
		return nil, err
	}
	h.sessions.setCookie(w, r, "", 0)
	return struct{}{}, nil
}

// logoutAll ends every session of the caller, this one included: for a
// lost or shared device, with the session or with a key.
func (h *Handler) logoutAll(w http.ResponseWriter, r *http.Request, c *caller) (any, error) {
	if err := h.sessions.Logins.EndAll(r.Context(), c.user.ID); err != nil {
		return nil, err
	}
	if _, ok := h.sessions.cookie(r); ok {
		h.sessions.setCookie(w, r, "", 0)
	}
	return struct{}{}, nil
}

// changePassword sets the caller's password, given the current one, and
// ends every other session of theirs; the session that asked stays.
func (h *Handler) changePassword(_ http.ResponseWriter, r *http.Request, c *caller) (any, error) {
	var in struct {
		CurrentPassword string `json:"current_password"`
		Password        string `json:"password"`
	}
	if err := decode(r, &in); err != nil {
		return nil, err
	}
	keep := ""
	if sc, ok := h.sessions.cookie(r); ok && bearerKey(r) == "" {
		keep = sc.Value
	}
	if err := h.gate.ChangePassword(r.Context(), h.clientNetwork(r), c.user, in.CurrentPassword, in.Password, keep); err != nil {
		return nil, err
	}
	return struct{}{}, nil
}

func (h *Handler) topup(_ http.ResponseWriter, r *http.Request, c *caller) (any, error) {
	var in struct {
		Key string `json:"key"`
	}
	if err := decode(r, &in); err != nil {
		return nil, err
	}
	if err := account.CheckCodePlan(r.Context(), h.store, in.Key, h.knownBudget); err != nil {
		return nil, err
	}
	// the plan before, so the answer can tell a plan code's plan and end
	before, err := h.store.UserBudget(r.Context(), c.user.ID)
	if err != nil {
		return nil, err
	}
	added, err := h.gate.Redeem(r.Context(), h.clientNetwork(r), c.user.ID, in.Key)
	if err != nil {
		return nil, err
	}
	// spendable at once, not after the ledger's next sync with the store
	h.ledger.Credit(c.user.ID, added)
	if h.budgets != nil {
		h.budgets.Forget(c.user.ID, 0) // a plan code's plan applies at once
	}
	return h.redeemed(r, c.user.ID, added, before)
}

// redeemed is the answer to a topup: what the code added, the balance,
// and for a plan code the plan and when it ends.
func (h *Handler) redeemed(r *http.Request, userID, added int64, before store.UserBudget) (any, error) {
	out := map[string]any{"quota_added": added}
	u, err := h.store.UserByID(r.Context(), userID)
	if err != nil {
		return nil, err
	}
	out["quota"] = u.Quota
	after, err := h.store.UserBudget(r.Context(), userID)
	if err != nil {
		return nil, err
	}
	if after.Plan != "" && (after.Plan != before.Plan || !after.PlanUntil.Equal(before.PlanUntil)) {
		out["plan"] = after.Plan
		if !after.PlanUntil.IsZero() {
			out["plan_until"] = after.PlanUntil.UTC().Format(time.RFC3339)
		}
	}
	return out, nil
}

func (h *Handler) affTransfer(_ http.ResponseWriter, r *http.Request, c *caller) (any, error) {
	var in struct {
		Quota *int64 `json:"quota"`
	}
	if err := decode(r, &in); err != nil {
		return nil, err
	}
	var amount int64
	if in.Quota != nil {
		amount = *in.Quota
		if amount <= 0 {
			return nil, badRequest("invalid_quota", "quota must be a positive number of units, or left out to move all of it")
		}
		// said in dollars: the console shows this to a person
		if amount > c.user.InvitationQuota {
			return nil, badRequest("invalid_request", "%s is more than your invitation quota of %s", dollars(amount), dollars(c.user.InvitationQuota))
		}
	}
	moved, err := account.Transfer(r.Context(), h.store, c.user.ID, amount, in.Quota == nil)
	if err != nil {
		return nil, err
	}
	h.ledger.Credit(c.user.ID, moved)
	u, err := h.store.UserByID(r.Context(), c.user.ID)
	if err != nil {
		return nil, err
	}
	return map[string]int64{"transferred": moved, "quota": u.Quota, "aff_quota": u.InvitationQuota}, nil
}

// listModels lists the models the caller can ask for: served and priced,
// each with its price and whether it chats (what the playground can run).
// A caller using a key limited to some models sees only those.
func (h *Handler) listModels(_ http.ResponseWriter, _ *http.Request, c *caller) (any, error) {
	out := []Model{}
	for _, m := range h.served() {
		if c.token == nil || len(c.token.Models) == 0 || slices.Contains(c.token.Models, m.ID) {
			out = append(out, m)
		}
	}
	return map[string]any{"data": out}, nil
}

// served is every model served and priced.
func (h *Handler) served() []Model {
	if h.models == nil {
		return nil
	}
	return h.models()
}

// checkModels refuses a key's model list naming a model that is not
// served: such a key would be refused on every request for it.
func (h *Handler) checkModels(models []string) error {
	served := h.served()
	ids := make([]string, len(served))
	for i, m := range served {
		ids[i] = m.ID
	}
	for _, m := range models {
		if g, ok := strings.CutPrefix(strings.TrimSpace(m), billing.GroupPrefix); ok && h.budgets != nil && h.budgets.Models[g] != nil {
			continue // a model group (models_group in the Caddyfile)
		}
		if m = strings.TrimSpace(m); m != "" && !slices.Contains(ids, m) {
			return badRequest("unknown_model", "there is no model %q on this gateway: pick from GET /api/user/models (%s)", m, strings.Join(ids, ", "))
		}
	}
	return nil
}

func (h *Handler) listTokens(_ http.ResponseWriter, r *http.Request, c *caller) (any, error) {
	tokens, err := h.store.ListTokens(r.Context(), c.user.ID)
	if err != nil {
		return nil, err
	}
	out := make([]account.TokenView, len(tokens))
	for i, t := range tokens {
		out[i] = account.ViewToken(t)
	}
	return map[string]any{"data": out}, nil
}

// tokenInput is a token's fields in a request; absent fields keep their
// value on update.
type tokenInput struct {
	Name       *string   `json:"name"`
	QuotaLimit *int64    `json:"quota_limit"`
	Models     *[]string `json:"models"`
	// ExpiresAt is RFC 3339; "" means never.
	ExpiresAt *string `json:"expires_at"`
	Status    *string `json:"status"`
	// Management makes a management key (new keys only, and only with the
	// session: a key never makes one).
	Management *bool `json:"management"`
}

func (in *tokenInput) apply(spec *account.TokenSpec) error {
	if in.Name != nil {
		spec.Name = *in.Name
	}
	if in.QuotaLimit != nil {
		spec.QuotaLimit = *in.QuotaLimit
	}
	if in.Models != nil {
		spec.Models = *in.Models
	}
	if in.ExpiresAt != nil {
		spec.ExpiresAt = time.Time{}
		if *in.ExpiresAt != "" {
			t, err := time.Parse(time.RFC3339, *in.ExpiresAt)
			if err != nil {
				return badRequest("invalid_expires_at", "expires_at must be an RFC 3339 time such as 2030-01-02T15:04:05Z, or \"\" for never")
			}
			spec.ExpiresAt = t
		}
	}
	return nil
}

func (h *Handler) createToken(_ http.ResponseWriter, r *http.Request, c *caller) (any, error) {
	var in tokenInput
	if err := decode(r, &in); err != nil {
		return nil, err
	}
	if in.Status != nil {
		return nil, badRequest("invalid_request", "a new token is always enabled: leave out status")
	}
	if in.Models != nil {
		if err := h.checkModels(*in.Models); err != nil {
			return nil, err
		}
	}
	var spec account.TokenSpec
	if err := in.apply(&spec); err != nil {
		return nil, err
	}
	if in.Management != nil {
		spec.Management = *in.Management
	}
	if c.token != nil {
		if spec.Management {
			return nil, &apiError{status: http.StatusForbidden, typ: errPermission, code: "key_too_wide",
				msg: "a management key is made by a signed-in user, never with a key: sign in to the console to make one"}
		}
		// a key made with a key keeps its rate limits too
		spec.Limits = c.token.Limits
		if err := account.KeyWithin(c.token, spec, 0); err != nil {
			return nil, err
		}
	}
	var (
		key string
		t   *store.Token
		err error
	)
	if c.token != nil && c.token.QuotaLimit > 0 {
		// what the new key may spend comes out of the limited key's limit
		key, t, err = account.CreateTokenFrom(r.Context(), h.store, c.token, spec)
		if err == nil {
			h.keys.Forget(c.token.KeyHash)
		}
	} else {
		key, t, err = account.CreateToken(r.Context(), h.store, c.user.ID, spec)
	}
	if err != nil {
		return nil, err
	}
	v := account.ViewToken(t)
	v.Key = key
	return v, nil
}

func (h *Handler) updateToken(_ http.ResponseWriter, r *http.Request, c *caller) (any, error) {
	id, err := pathID(r)
	if err != nil {
		return nil, err
	}
	t, err := account.OwnToken(r.Context(), h.store, c.user.ID, id)
	if err != nil {
		return nil, err
	}
	var in tokenInput
	if err := decode(r, &in); err != nil {
		return nil, err
	}
	if in.Management != nil && *in.Management != t.Management {
		return nil, badRequest("invalid_request", "whether a key is a management key is set when it is made: make a new key instead")
	}
	if c.token != nil {
		// a key changes only keys no wider than itself (itself included)
		if err := account.KeyWithin(c.token, account.SpecOf(t), t.UsedQuota); err != nil {
			return nil, err
		}
	}
	// only a changed list is checked: a key may keep a model since removed
	if in.Models != nil && !slices.Equal(*in.Models, t.Models) {
		if err := h.checkModels(*in.Models); err != nil {
			return nil, err
		}
	}
	spec := account.SpecOf(t)
	if err := in.apply(&spec); err != nil {
		return nil, err
	}
	if c.token != nil {
		if err := account.KeyWithin(c.token, spec, t.UsedQuota); err != nil {
			return nil, err
		}
		// a limited key gave a key made from it part of its own limit: more
		// is given by making another key, never by raising this one's
		if c.token.QuotaLimit > 0 && t.ID != c.token.ID && spec.QuotaLimit > t.QuotaLimit {
			return nil, &apiError{status: http.StatusForbidden, typ: errPermission, code: "key_too_wide",
				msg: "a limited management key does not raise another key's quota_limit: make a new key, which takes its limit from yours"}
		}
	}
	status := t.Status
	if in.Status != nil {
		status = *in.Status
	}
	updated, err := account.UpdateToken(r.Context(), h.store, c.user.ID, t.ID, spec, status)
	if err != nil {
		return nil, err
	}
	h.keys.Forget(t.KeyHash)
	return account.ViewToken(updated), nil
}

func (h *Handler) deleteToken(_ http.ResponseWriter, r *http.Request, c *caller) (any, error) {
	id, err := pathID(r)
	if err != nil {
		return nil, err
	}
	if c.token != nil {
		t, err := account.OwnToken(r.Context(), h.store, c.user.ID, id)
		if err != nil {
			return nil, err
		}
		if err := account.KeyWithin(c.token, account.SpecOf(t), t.UsedQuota); err != nil {
			return nil, err
		}
	}
	t, err := account.DeleteToken(r.Context(), h.store, c.user.ID, id)
	if err != nil {
		return nil, err
	}
	h.keys.Forget(t.KeyHash)
	return struct{}{}, nil
}

func (h *Handler) usage(_ http.ResponseWriter, r *http.Request, c *caller) (any, error) {
	var f store.UsageFilter
	if err := usageQuery(r, &f); err != nil {
		return nil, err
	}
	if r.URL.Query().Has("user_id") {
		return nil, badRequest("invalid_request", "user_id is for administrators (GET /api/admin/usage); this lists your own usage")
	}
	f.UserID = c.user.ID
	return h.listUsage(r, f)
}

// dailySpend answers one entry per UTC day for the last days (default 30,
// at most 366) days, today included, zero-filled.
func (h *Handler) dailySpend(_ http.ResponseWriter, r *http.Request, c *caller) (any, error) {
	days := 30
	if v := r.URL.Query().Get("days"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 366 {
			return nil, badRequest("invalid_days", "days must be a whole number from 1 to 366, not %q", v)
		}
		days = n
	}
	out, err := account.DailySpend(r.Context(), h.store, c.user.ID, days)
	if err != nil {
		return nil, err
	}
	return map[string]any{"data": out}, nil
}
