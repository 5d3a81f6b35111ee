package gatewaycmd

import (
	"encoding/json"
	"time"

	"github.com/caddy-model-gateway/gateway/account"
	"github.com/caddy-model-gateway/gateway/store"
)

// The commands print the account API's views (account.ViewUser and the
// rest), with every time as a timestamp: one shape for a person reading the
// terminal and a script reading the web API, one way of writing a time.

// timestamp is a time printed in RFC 3339, UTC; the zero time, which the
// store uses for never (an expiry) and not yet (a redemption), is null.
type timestamp time.Time

func (t timestamp) MarshalJSON() ([]byte, error) {
	tt := time.Time(t)
	if tt.IsZero() {
		return []byte("null"), nil
	}
	return json.Marshal(tt.UTC().Format(time.RFC3339))
}

// userView is account.UserView with its time as a timestamp (the API's
// is unix seconds, which new-api's console scripts expect).
type userView struct {
	account.UserView
	CreatedAt timestamp `json:"created_at"`
}

func viewUser(u *store.User) userView {
	return userView{UserView: account.ViewUser(u), CreatedAt: timestamp(u.CreatedAt)}
}

// tokenView is account.TokenView with its owner, and an expiry that is
// null for a key that never expires rather than absent.
type tokenView struct {
	account.TokenView
	UserID    int64     `json:"user_id"`
	ExpiresAt timestamp `json:"expires_at"`
	CreatedAt timestamp `json:"created_at"`
}

func viewToken(t *store.Token) tokenView {
	return tokenView{TokenView: account.ViewToken(t), UserID: t.UserID, ExpiresAt: timestamp(t.ExpiresAt), CreatedAt: timestamp(t.CreatedAt)}
}

func viewTokens(tokens []*store.Token) []tokenView {
	out := make([]tokenView, 0, len(tokens))
	for _, t := range tokens {
		out = append(out, viewToken(t))
	}
	return out
}

// codeView is account.CodeView with null, not absent, for a code not yet
// redeemed or that never expires.
type codeView struct {
	account.CodeView
	CreatedAt  timestamp `json:"created_at"`
	RedeemedAt timestamp `json:"redeemed_at"`
	ExpiresAt  timestamp `json:"expires_at"`
}

func viewCodes(codes []*store.RedemptionCode) []codeView {
	views := account.ViewCodes(codes)
	out := make([]codeView, 0, len(codes))
	for i, c := range codes {
		v := codeView{CodeView: views[i], CreatedAt: timestamp(c.CreatedAt), RedeemedAt: timestamp(c.RedeemedAt), ExpiresAt: timestamp(c.ExpiresAt)}
		if v.Status == "" {
			v.Status = store.CodeEnabled // the store's "" is enabled
		}
		out = append(out, v)
	}
	return out
}
