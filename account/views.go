package account

import (
	"time"

	"github.com/caddy-model-gateway/gateway/store"
)

// The views are what the web API and the CLI show of account objects:
// one shape for both, and never a password hash or a key's hash.

// UserView is a user as shown. The invitation fields carry new-api's
// names (aff_code, aff_quota), which console scripts written for it
// expect.
type UserView struct {
	ID           int64  `json:"id"`
	Username     string `json:"username"`
	Role         string `json:"role"`
	Status       string `json:"status"`
	Quota        int64  `json:"quota"`
	UsedQuota    int64  `json:"used_quota"`
	RequestCount int64  `json:"request_count"`
	AffCode      string `json:"aff_code"`
	AffQuota     int64  `json:"aff_quota"`
	CreatedAt    int64  `json:"created_at"`
	// Limits are the user's own rate limits over all of their keys; a zero
	// field means the gateway's default.
	Limits store.Limits `json:"limits"`
}

// ViewUser returns u as shown.
func ViewUser(u *store.User) UserView {
	return UserView{ID: u.ID, Username: u.Username, Role: u.Role, Status: u.Status, Quota: u.Quota,
		UsedQuota: u.UsedQuota, RequestCount: u.RequestCount, AffCode: u.InviteCode,
		AffQuota: u.InvitationQuota, CreatedAt: u.CreatedAt.Unix(), Limits: u.Limits}
}

// TokenView is a token as its owner sees it: a prefix, never the key.
type TokenView struct {
	ID         int64    `json:"id"`
	Name       string   `json:"name"`
	KeyPrefix  string   `json:"key_prefix"`
	Status     string   `json:"status"`
	QuotaLimit int64    `json:"quota_limit"`
	UsedQuota  int64    `json:"used_quota"`
	Models     []string `json:"models"`
	ExpiresAt  string   `json:"expires_at,omitempty"` // RFC 3339; absent: never
	CreatedAt  string   `json:"created_at"`
	// Limits are the key's rate limits (set by an administrator); a zero
	// field means the user's or the gateway's default.
	Limits store.Limits `json:"limits"`
	// Management says the key reaches the account and admin API.
	Management bool   `json:"management"`
	Key        string `json:"key,omitempty"` // only in the answer that creates it
}

// ViewToken returns t as shown.
func ViewToken(t *store.Token) TokenView {
	v := TokenView{ID: t.ID, Name: t.Name, KeyPrefix: t.KeyPrefix, Status: t.Status, QuotaLimit: t.QuotaLimit,
		UsedQuota: t.UsedQuota, Models: t.Models, CreatedAt: t.CreatedAt.UTC().Format(time.RFC3339), Limits: t.Limits,
		Management: t.Management}
	if v.Models == nil {
		v.Models = []string{}
	}
	if !t.ExpiresAt.IsZero() {
		v.ExpiresAt = t.ExpiresAt.UTC().Format(time.RFC3339)
	}
	return v
}

// CodeView is a redemption code as administrators see it.
type CodeView struct {
	ID         int64  `json:"id"`
	Code       string `json:"code"`
	Quota      int64  `json:"quota"`
	Status     string `json:"status"`
	UsedBy     int64  `json:"used_by"`
	CreatedAt  string `json:"created_at"`
	RedeemedAt string `json:"redeemed_at,omitempty"`
	ExpiresAt  string `json:"expires_at,omitempty"`
	Name       string `json:"name"` // the batch's name, "" for none
	// Plan and PlanDays: what a plan code grants instead of quota
	Plan     string `json:"plan,omitempty"`
	PlanDays int64  `json:"plan_days,omitempty"`
}

// ViewCodes returns codes as shown.
func ViewCodes(codes []*store.RedemptionCode) []CodeView {
	out := make([]CodeView, len(codes))
	for i, c := range codes {
		v := CodeView{ID: c.ID, Code: c.Code, Quota: c.Quota, Status: c.Status, UsedBy: c.UsedBy, Name: c.Name,
			Plan: c.Plan, PlanDays: c.PlanDays, CreatedAt: c.CreatedAt.UTC().Format(time.RFC3339)}
		if !c.RedeemedAt.IsZero() {
			v.RedeemedAt = c.RedeemedAt.UTC().Format(time.RFC3339)
		}
		if !c.ExpiresAt.IsZero() {
			v.ExpiresAt = c.ExpiresAt.UTC().Format(time.RFC3339)
		}
		out[i] = v
	}
	return out
}
