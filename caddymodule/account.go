package caddymodule

import (
	"context"
	"net/http"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/account"
	"github.com/caddy-model-gateway/gateway/account/accountapi"
	"github.com/caddy-model-gateway/gateway/internal/accesslog"
	"github.com/caddy-model-gateway/gateway/routing"
	"github.com/caddy-model-gateway/gateway/runtimecfg"
)

func init() {
	caddy.RegisterModule(Account{})
}

// Account serves the account and admin API under /api/user/ and
// /api/admin/; other requests pass to the next handler. The API is
// accountapi's; this wires it to the gateway app's database and settings.
type Account struct {
	api       *accountapi.Handler
	accessLog *zap.Logger // Caddy's http.log.access, see internal/accesslog
}

// CaddyModule returns the Caddy module information.
func (Account) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.gateway_account",
		New: func() caddy.Module { return new(Account) },
	}
}

// Provision finds the gateway app and builds the API on it.
func (h *Account) Provision(ctx caddy.Context) error {
	app, err := gatewayApp(ctx)
	if err != nil {
		return err
	}
	cfg := account.GateConfig{Registration: app.Registration, InvitationReward: app.InvitationReward,
		InvitationMinPayment: app.InvitationMinPayment, InvitationPlanCodes: app.InvitationPlanCodes}
	if app.SSO != nil && app.SSO.OIDC != nil {
		cfg.SSODomains = app.SSO.OIDC.AllowedDomains
	}
	if c := app.AccountRateLimit; c != nil {
		cfg.Attempts, cfg.Window = c.Attempts, time.Duration(c.Window)
	}
	if c := app.RegistrationRateLimit; c != nil {
		cfg.Signups, cfg.SignupWindow = c.Attempts, time.Duration(c.Window)
	}
	if app.runtime != nil && app.runtime.Key() != nil {
		cfg.SecretsKey = app.runtime.Key() // TOTP secrets kept sealed
	}
	sso, err := app.SSO.oidcProvider(app.db.Store)
	if err != nil {
		return err
	}
	h.accessLog = ctx.Logger(new(caddyhttp.App)).Named("log.access")
	h.api = accountapi.New(accountapi.Config{
		Store:         app.db.Store,
		Keys:          app.db.Keys,
		Ledger:        app.db.Ledger,
		Gate:          account.NewGate(app.db.Store, cfg),
		Sessions:      app.webSessions(),
		Models:        runtimecfg.PricedModels(app.channels, app.priceTable),
		Channels:      app.channelStates,
		TestChannel:   app.testChannel(ctx.Logger()),
		ClientAddress: clientAddress,
		SSO:           sso,
		Log:           ctx.Logger(),
		Budgets:       app.gate.Budgets,
		Runtime:       app.runtime,
		Payments:      app.payments,

		RequireSecondFactorAdmins: app.RequireSecondFactor == "admins",
		ResetLinkLifetime:         time.Duration(app.ResetLinkLifetime),
	})
	return nil
}

func (h *Account) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	if !accountapi.Handles(r.URL.Path) {
		return next.ServeHTTP(w, r)
	}
	// Caddy's access log would show a sign-in's code and state: the line
	// is written instead with the callback's request, and the redirect to
	// the provider, as the log may show them, while the API reads and
	// answers them as they are
	if query, ok := accountapi.LoggableQuery(r); ok {
		logged := r.Clone(r.Context())
		logged.URL.RawQuery = query
		logged.RequestURI = logged.URL.RequestURI()
		var line *accesslog.Line
		if w, line = accesslog.TakeOver(w, logged, h.accessLog, ""); line != nil {
			defer line.Write()
		}
	} else if accountapi.StartsSignIn(r) {
		var line *accesslog.Line
		if w, line = accesslog.TakeOver(w, r, h.accessLog, ""); line != nil {
			line.RedactResponseHeader("Location")
			defer line.Write()
		}
	}
	h.api.ServeHTTP(w, r)
	return nil
}

// channelStates is every channel's health, in configuration order: what
// the admin endpoint's GET /gateway/channels and the console's channels
// page both show.
func (a *App) channelStates() []routing.ChannelState {
	if a.channels == nil {
		return []routing.ChannelState{}
	}
	return a.channels.States()
}

// testChannel is the console's channel test (runtimecfg.ChannelTester)
// through a copy of the engine logging to log.
func (a *App) testChannel(log *zap.Logger) func(context.Context, string, string) (*accountapi.ChannelTest, error) {
	e := *a.engine
	e.Log = log
	return runtimecfg.ChannelTester(&e, a.priceTable, a.runtime)
}

// Interface guards.
var (
	_ caddyhttp.MiddlewareHandler = (*Account)(nil)
	_ caddy.Provisioner           = (*Account)(nil)
)
