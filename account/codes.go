package account

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/caddy-model-gateway/gateway/keys"
	"github.com/caddy-model-gateway/gateway/store"
)

// CreateCodes makes count redemption codes worth quota units each.
func CreateCodes(ctx context.Context, st store.Store, count int, quota int64, expiresAt time.Time) ([]*store.RedemptionCode, error) {
	return CreateCodeBatch(ctx, st, "", count, quota, expiresAt)
}

// CreateCodeBatch makes count codes as CreateCodes does, named as one
// batch (name may be empty).
func CreateCodeBatch(ctx context.Context, st store.Store, name string, count int, quota int64, expiresAt time.Time) ([]*store.RedemptionCode, error) {
	var worth error
	if quota <= 0 {
		worth = inputErrorf("quota must be a positive number of units (1,000,000 = 1 USD)")
	}
	return createCodes(ctx, st, store.RedemptionCode{Name: name, Quota: quota, ExpiresAt: expiresAt}, count, worth)
}

// createCodes stores count codes like proto, each with a code of its own,
// after the checks every batch passes, in order: its name, what a code is
// worth (worth, the caller's verdict), its size, its expiry.
func createCodes(ctx context.Context, st store.Store, proto store.RedemptionCode, count int, worth error) ([]*store.RedemptionCode, error) {
	proto.Name = strings.TrimSpace(proto.Name)
	if err := checkBatchName(proto.Name); err != nil {
		return nil, err
	}
	if worth != nil {
		return nil, worth
	}
	if count <= 0 || count > MaxCodesAtOnce {
		return nil, inputErrorf("count must be between 1 and %d", MaxCodesAtOnce)
	}
	if !proto.ExpiresAt.IsZero() && !proto.ExpiresAt.After(time.Now()) {
		return nil, inputErrorf("expiry must be in the future")
	}
	codes := make([]*store.RedemptionCode, count)
	for i := range codes {
		code, err := keys.Random("", codeLen)
		if err != nil {
			return nil, err
		}
		c := proto
		c.Code = code
		codes[i] = &c
	}
	if err := st.CreateRedemptionCodes(ctx, codes); err != nil {
		return nil, err
	}
	return codes, nil
}

// ErrCodeRefused is the one answer for a code that is unknown, used,
// disabled or expired: which of these it was would help a guesser.
var ErrCodeRefused = errors.New("this redemption code cannot be used: check that you typed it correctly")

// Redeem credits a code's quota to userID and returns the amount.
func Redeem(ctx context.Context, st store.Store, userID int64, code string) (int64, error) {
	code = strings.TrimSpace(code)
	if code == "" {
		return 0, inputErrorf("key is required: the redemption code to redeem")
	}
	n, err := st.Redeem(ctx, code, userID)
	if errors.Is(err, store.ErrNotFound) {
		return 0, ErrCodeRefused
	}
	return n, err
}

// CheckCodePlan refuses, before it is redeemed, a code granting a plan
// that known says the gateway does not define (minted for a misspelt
// plan, or the plan since taken out of the Caddyfile): redeemed, it would
// grant a plan nothing applies. A code it cannot find is left to Redeem.
func CheckCodePlan(ctx context.Context, st store.Store, code string, known func(kind, name string) bool) error {
	code = strings.TrimSpace(code)
	if code == "" {
		return nil
	}
	// the store finds codes by a part of them; an exact match is the code
	codes, err := st.ListRedemptionCodes(ctx, store.CodeFilter{Search: code, Limit: 10})
	if err != nil {
		return err
	}
	for _, c := range codes {
		if c.Code == code && c.Plan != "" && !known("plan", c.Plan) {
			return invalidf("unknown_plan", "this code grants the plan %q, which this gateway does not offer: ask its administrator for another code", c.Plan)
		}
	}
	return nil
}

// Transfer moves amount units (all of it when amount is 0) of userID's
// invitation quota into their quota and returns how much moved.
func Transfer(ctx context.Context, st store.Store, userID, amount int64, all bool) (int64, error) {
	if all {
		u, err := st.UserByID(ctx, userID)
		if err != nil {
			return 0, err
		}
		if u.InvitationQuota <= 0 {
			return 0, inputErrorf("there is no invitation quota to transfer")
		}
		amount = u.InvitationQuota
	} else if amount <= 0 {
		return 0, inputErrorf("quota must be a positive number of units")
	}
	err := st.TransferInvitationQuota(ctx, userID, amount)
	if errors.Is(err, store.ErrInsufficientQuota) {
		if all {
			// spent by a concurrent transfer between the read and the move
			return 0, inputErrorf("the invitation quota changed while transferring: try again")
		}
		return 0, inputErrorf("quota %d exceeds your invitation quota", amount)
	}
	if err != nil {
		return 0, err
	}
	return amount, nil
}
