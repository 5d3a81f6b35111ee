// Package alerts announces budget crossings: when what a subject spent
// reaches a threshold the operator (or a key's owner) set, a percentage of
// a spending window, of a balance or of a key's limit, the gateway POSTs a
// signed webhook, once per crossing whatever the number of instances.
//
// The request path never waits on it: the usage writer tells the Notifier
// which users and keys its commits charged (a non-blocking, bounded set),
// and the Notifier's worker reads what they spent from the store (where
// every instance's committed spend is), claims each threshold reached in
// the store (one row per crossing, unique: the instance whose insert wins
// announces it) and hands the claimed alert to a bounded delivery queue.
// The claimed row is the outbox: an alert the queue had no room for, or
// whose instance died before sending, is leased and sent by whichever
// instance's poller comes to it after the claimer's lease. Deliveries are
// retried with exponential backoff within bounded attempts and age.
//
// It imports no Caddy package; caddymodule parses the alerts block and
// wires the Notifier to the usage writer.
package alerts

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/caddy-model-gateway/gateway/store"
)

// Config is what the operator sets (docs/alerts.md).
type Config struct {
	// Webhook is the URL alerts are POSTed to; "" records alerts for the
	// console only
	Webhook string
	// Secret signs every delivery (HMAC-SHA256); required with Webhook
	Secret string
	// Thresholds are percentages of every spending window and key limit
	Thresholds []int
	// BalanceThresholds are percentages of a user's balance spent: of
	// what was credited, the balance left plus what was spent
	BalanceThresholds []int
	// Timeout bounds one delivery attempt (default 10s)
	Timeout time.Duration
	// MaxAttempts bounds the attempts of one alert (default 8)
	MaxAttempts int
	// MaxAge gives an alert up this long after its crossing (default 24h)
	MaxAge time.Duration
	// Backoff is the wait before the first retry, doubled each attempt up
	// to MaxBackoff (defaults 1s and 10m)
	Backoff, MaxBackoff time.Duration
	// Queue bounds the alerts waiting for a delivery worker (default 256);
	// past it they wait in the outbox
	Queue int
	// Workers deliver at once (default 4)
	Workers int
	// Poll is how often the outbox is looked at for alerts due (default
	// 10s)
	Poll time.Duration
	// Check is the shortest time between two looks at what the committed
	// usage spent (default 1s): commits in between are looked at together
	Check time.Duration
	// AllowPrivate lets the webhook reach loopback and private addresses,
	// which the gateway's address policy refuses otherwise
	AllowPrivate bool
	// Keep is how long alerts of calendar and rolling windows are kept
	// (default 90 days, at least MinKeep); those of lifetime windows,
	// balances and key limits are kept for good, as they are their claims
	Keep time.Duration
}

// MinKeep is the shortest Keep: longer than the longest period (a month),
// so a period's claims outlive it.
const MinKeep = 35 * 24 * time.Hour

func (c *Config) defaults() {
	if c.Timeout <= 0 {
		c.Timeout = 10 * time.Second
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 8
	}
	if c.MaxAge <= 0 {
		c.MaxAge = 24 * time.Hour
	}
	if c.Backoff <= 0 {
		c.Backoff = time.Second
	}
	if c.MaxBackoff <= 0 {
		c.MaxBackoff = 10 * time.Minute
	}
	c.MaxBackoff = max(c.MaxBackoff, c.Backoff)
	if c.Queue <= 0 {
		c.Queue = 256
	}
	if c.Workers <= 0 {
		c.Workers = 4
	}
	if c.Poll <= 0 {
		c.Poll = 10 * time.Second
	}
	if c.Check <= 0 {
		c.Check = time.Second
	}
	if c.Keep <= 0 {
		c.Keep = 90 * 24 * time.Hour
	}
}

// Validate refuses a configuration that cannot work.
func (c *Config) Validate() error {
	if c.Webhook != "" {
		u, err := url.Parse(c.Webhook)
		if err != nil || !u.IsAbs() || u.Host == "" || (u.Scheme != "https" && u.Scheme != "http") {
			return fmt.Errorf("alerts: webhook must be an absolute http or https URL")
		}
		if c.Secret == "" {
			return errors.New("alerts: a webhook needs a secret to sign with (secret {env.ALERTS_SECRET})")
		}
	}
	if c.Keep > 0 && c.Keep < MinKeep {
		return fmt.Errorf("alerts: keep %s is shorter than %s: a month's alerts must outlive the month", c.Keep, MinKeep)
	}
	if err := store.CheckThresholds(c.Thresholds); err != nil {
		return fmt.Errorf("alerts: thresholds: %w", err)
	}
	if err := store.CheckThresholds(c.BalanceThresholds); err != nil {
		return fmt.Errorf("alerts: balance_thresholds: %w", err)
	}
	return nil
}

// ParsePercent reads a threshold: "80%" or "80".
func ParsePercent(s string) (int, error) {
	var n int
	if _, err := fmt.Sscanf(strings.TrimSuffix(s, "%"), "%d", &n); err != nil || fmt.Sprint(n) != strings.TrimSuffix(s, "%") {
		return 0, fmt.Errorf("threshold %q is not a whole percentage such as 80%%", s)
	}
	if n < 1 || n > 100 {
		return 0, fmt.Errorf("threshold %q is not between 1%% and 100%%", s)
	}
	return n, nil
}

// union is a's and b's thresholds, sorted, each once.
func union(a, b []int) []int {
	out := slices.Concat(a, b)
	slices.Sort(out)
	return slices.Compact(out)
}
