package caddymodule

import (
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/alerts"
)

// AlertsConfig is the gateway's budget alerts (docs/alerts.md): the
// thresholds crossed, and the webhook told of each crossing once.
type AlertsConfig struct {
	// Webhook is the URL each crossing is POSTed to; placeholders
	// ({env.X}, {file.X}) are replaced. Without one, alerts are shown in
	// the console only.
	Webhook string `json:"webhook,omitempty"`
	// Secret signs every delivery (HMAC-SHA256 over "timestamp.body");
	// give it as a placeholder so the config never holds it.
	Secret string `json:"secret,omitempty"`
	// Thresholds are percentages of every spending window and key limit.
	Thresholds []int `json:"thresholds,omitempty"`
	// BalanceThresholds are percentages of a user's balance spent.
	BalanceThresholds []int `json:"balance_thresholds,omitempty"`
	// Timeout bounds one delivery attempt. Default 10s.
	Timeout caddy.Duration `json:"timeout,omitempty"`
	// MaxAttempts and MaxAge bound an alert's deliveries. Defaults 8, 24h.
	MaxAttempts int            `json:"max_attempts,omitempty"`
	MaxAge      caddy.Duration `json:"max_age,omitempty"`
	// Backoff is the first retry's wait, doubled up to MaxBackoff.
	// Defaults 1s, 10m.
	Backoff    caddy.Duration `json:"backoff,omitempty"`
	MaxBackoff caddy.Duration `json:"max_backoff,omitempty"`
	// Queue bounds alerts waiting for a delivery worker (default 256);
	// Workers deliver at once (default 4).
	Queue   int `json:"queue,omitempty"`
	Workers int `json:"workers,omitempty"`
	// PollInterval is how often the outbox is read (default 10s);
	// CheckInterval the shortest time between two looks at committed
	// spend (default 1s).
	PollInterval  caddy.Duration `json:"poll_interval,omitempty"`
	CheckInterval caddy.Duration `json:"check_interval,omitempty"`
	// AllowPrivateAddresses lets the webhook reach loopback and private
	// addresses, which the gateway's address policy refuses otherwise.
	AllowPrivateAddresses bool `json:"allow_private_addresses,omitempty"`
	// Keep is how long alerts of calendar and rolling windows are kept.
	// Default 90 days, at least 35.
	Keep caddy.Duration `json:"keep,omitempty"`
}

// notifier makes this configuration's notifier on its database.
func (c *AlertsConfig) notifier(a *App, repl *caddy.Replacer) (*alerts.Notifier, error) {
	cfg := alerts.Config{
		Webhook: repl.ReplaceAll(c.Webhook, ""), Secret: repl.ReplaceAll(c.Secret, ""),
		Thresholds: c.Thresholds, BalanceThresholds: c.BalanceThresholds,
		Timeout: time.Duration(c.Timeout), MaxAttempts: c.MaxAttempts, MaxAge: time.Duration(c.MaxAge),
		Backoff: time.Duration(c.Backoff), MaxBackoff: time.Duration(c.MaxBackoff),
		Queue: c.Queue, Workers: c.Workers,
		Poll: time.Duration(c.PollInterval), Check: time.Duration(c.CheckInterval),
		AllowPrivate: c.AllowPrivateAddresses, Keep: time.Duration(c.Keep),
	}
	return alerts.New(cfg, a.db.Store, a.gate.Budgets, a.log.Named("alerts"))
}

// startAlerts starts the notifier and hangs it on the usage writer, whose
// commits it judges; a reload's new configuration takes the hook over.
func (a *App) startAlerts() {
	if a.alerts == nil {
		return
	}
	a.alerts.Start()
	a.unhookAlerts = a.db.Writer.OnCommitted(a.alerts.Committed)
	a.log.Debug("budget alerts on", zap.Bool("webhook", a.Alerts.Webhook != ""))
}

func (a *App) stopAlerts() {
	if a.alerts == nil {
		return
	}
	if a.unhookAlerts != nil {
		a.unhookAlerts()
	}
	a.alerts.Stop()
}
