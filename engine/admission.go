package engine

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/billing"
)

// AdmissionError words a refusal of billing.Gate.Admit for the client.
// header, when not nil, gets the Retry-After of a refusal that passes;
// shortfall, a format with one %s for the amount, ends the message of a
// reservation the quota does not cover, saying what the caller can change
// (lower max_tokens, a shorter duration).
func AdmissionError(err error, header http.Header, shortfall string) *adapters.Error {
	var (
		rate  *billing.Refusal
		usage *billing.UsageRefusal
		quota *billing.QuotaRefusal
		win   *billing.WindowRefusal
		plan  *billing.PlanModelError
		ae    *adapters.Error
	)
	switch {
	case errors.As(err, &win):
		return WindowError(win, header)
	case errors.As(err, &plan):
		return &adapters.Error{Status: http.StatusForbidden, Type: adapters.ErrPermission, Code: "model_not_in_plan",
			Message: "your plan " + plan.Plan + " does not cover the model " + plan.Model + ", and it does not let your balance pay for other models: use a model of the plan, or ask the operator"}
	case errors.As(err, &rate):
		secs := max(int64((rate.RetryAfter+time.Second-1)/time.Second), 1)
		if header != nil {
			header.Set("Retry-After", strconv.FormatInt(secs, 10))
		}
		return &adapters.Error{Status: http.StatusTooManyRequests, Type: adapters.ErrRateLimit, Code: "rate_limit_exceeded",
			Message: fmt.Sprintf("rate limit reached: this %s may make %s; try again in %d seconds", rate.Of, describeLimit(rate), secs)}
	case errors.As(err, &usage):
		if header != nil {
			header.Set("Retry-After", "1")
		}
		msg := "billing is unavailable: the gateway cannot record usage right now, so it relays no priced request; try again shortly"
		if errors.Is(err, billing.ErrQueueFull) {
			msg = "the gateway is overloaded: its usage queue is full; try again shortly"
		}
		return &adapters.Error{Status: http.StatusServiceUnavailable, Type: adapters.ErrOverloaded, Code: "billing_unavailable", Message: msg}
	case errors.As(err, &quota):
		if quota.Available <= 0 {
			return QuotaError("your quota is used up: top up your account and try again")
		}
		return QuotaError("your remaining quota does not cover this " + fmt.Sprintf(shortfall, FormatUnits(quota.Amount)))
	case errors.As(err, &ae):
		return ae
	}
	return adapters.Errorf(http.StatusServiceUnavailable, adapters.ErrAPI, "the request could not be admitted: %v", err)
}

func describeLimit(r *billing.Refusal) string {
	switch r.Limit {
	case "rpm":
		return fmt.Sprintf("%d requests a minute", r.Value)
	case "tpm":
		return fmt.Sprintf("%d tokens a minute", r.Value)
	}
	return fmt.Sprintf("%d requests at once", r.Value)
}

// QuotaError is a 429 for quota: the client must top up, not retry.
func QuotaError(msg string) *adapters.Error {
	return &adapters.Error{Status: http.StatusTooManyRequests, Type: adapters.ErrInsufficientQuota, Code: "insufficient_quota", Message: msg}
}

// FormatUnits shows quota units as USD.
func FormatUnits(u int64) string {
	return fmt.Sprintf("%d.%06d USD", u/billing.UnitsPerUSD, u%billing.UnitsPerUSD)
}
