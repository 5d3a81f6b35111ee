// Package oidc signs people in to the gateway's console through an OpenID
// Connect provider: the authorization code flow with PKCE, a state and a
// nonce kept in a sealed value the browser carries (in a cookie) between
// the two legs, the ID token verified against the provider's keys, the
// email's domain checked, and the user found or created on first sign-in
// with the role the provider's claim gives.
//
// It knows nothing of cookies, routes or Caddy and must not import Caddy:
// Start gives the provider's address and the value to keep, Finish takes
// them back and returns the store's user; the caller starts the session.
package oidc

import (
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	gooidc "github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/caddy-model-gateway/gateway/account"
	"github.com/caddy-model-gateway/gateway/keys"
	"github.com/caddy-model-gateway/gateway/store"
)

// Config is one OpenID Connect provider as the operator configured it
// (the JSON config's, and the Caddyfile's `sso oidc` block through Set).
type Config struct {
	// Issuer is the provider's issuer URL; discovery reads
	// <Issuer>/.well-known/openid-configuration.
	Issuer       string `json:"issuer"`
	ClientID     string `json:"client_id"`
	ClientSecret string `json:"client_secret"`
	// RedirectURL is the callback address registered with the provider;
	// empty means the address the browser reached the gateway by.
	RedirectURL string `json:"redirect_url,omitempty"`
	// AllowedDomains are the email domains that may sign in; "*" allows
	// any (for a provider that only has the operator's own people).
	AllowedDomains []string `json:"allowed_domains"`
	// RoleClaim names the ID token claim (a dotted path into nested
	// objects, such as realm_access.roles) whose value "admin", alone or
	// in a list, makes the user an administrator; any other value a
	// plain user. Empty: the provider does not set roles.
	RoleClaim string `json:"role_claim,omitempty"`
	// HTTPClient reaches the provider; nil means one with a 15s timeout.
	HTTPClient *http.Client `json:"-"`
}

// Set sets one option of the Caddyfile's `sso oidc` block from its
// values: allowed_domains takes one or more, the others one each.
func (c *Config) Set(opt string, args []string) error {
	if opt == "allowed_domains" {
		if len(args) == 0 {
			return errors.New("allowed_domains takes one or more email domains, or * for any")
		}
		c.AllowedDomains = append(c.AllowedDomains, args...)
		return nil
	}
	if len(args) != 1 {
		return fmt.Errorf("sso oidc: %s takes one value", opt)
	}
	switch opt {
	case "issuer":
		c.Issuer = args[0]
	case "client_id":
		c.ClientID = args[0]
	case "client_secret":
		c.ClientSecret = args[0]
	case "redirect_url":
		c.RedirectURL = args[0]
	case "role_claim":
		c.RoleClaim = args[0]
	default:
		return fmt.Errorf("sso oidc: unrecognized option %q (known: issuer, client_id, client_secret, allowed_domains, role_claim, redirect_url)", opt)
	}
	return nil
}

// Provider signs people in through one OpenID Connect provider. It is
// safe for concurrent use.
type Provider struct {
	cfg    Config
	store  store.Store
	seal   *sealer
	client *http.Client

	mu sync.Mutex
	// op is the provider as discovered; nil until the first sign-in that
	// reaches it, so a provider that is down does not stop the gateway
	// from starting, and a failed discovery is tried again next time
	op *gooidc.Provider
}

// New checks cfg and returns a Provider over st. It does not contact the
// provider: the first sign-in does.
func New(cfg Config, st store.Store) (*Provider, error) {
	u, err := url.Parse(cfg.Issuer)
	switch {
	case cfg.Issuer == "" || err != nil || u.Host == "" || u.Scheme != "https" && u.Scheme != "http":
		return nil, fmt.Errorf("issuer must be the provider's http(s) URL, not %q", cfg.Issuer)
	case cfg.ClientID == "":
		return nil, errors.New("client_id is required")
	case cfg.ClientSecret == "":
		return nil, errors.New("client_secret is required (write it as {env.NAME} to keep it out of the config)")
	case len(cfg.AllowedDomains) == 0:
		return nil, errors.New("allowed_domains is required: the email domains that may sign in, or * for any")
	}
	if cfg.RedirectURL != "" {
		if r, err := url.Parse(cfg.RedirectURL); err != nil || r.Host == "" || r.Scheme != "https" && r.Scheme != "http" {
			return nil, fmt.Errorf("redirect_url must be an absolute http(s) URL, not %q", cfg.RedirectURL)
		}
	}
	cfg.AllowedDomains = slices.Clone(cfg.AllowedDomains)
	for i, d := range cfg.AllowedDomains {
		cfg.AllowedDomains[i] = strings.ToLower(strings.TrimPrefix(d, "@"))
	}
	client := cfg.HTTPClient
	if client == nil {
		client = &http.Client{Timeout: 15 * time.Second}
	}
	return &Provider{cfg: cfg, store: st, client: client,
		seal: newSealer(cfg.ClientSecret, cfg.Issuer+"\x00"+cfg.ClientID)}, nil
}

// Issuer is the provider's issuer URL: what links name it by.
func (p *Provider) Issuer() string { return p.cfg.Issuer }

// Reason says why a sign-in failed, in words a page can look up; it
// never carries a token, a code or the provider's own message.
type Reason string

const (
	// Unavailable: the provider could not be reached or discovered.
	Unavailable Reason = "unavailable"
	// Expired: the sign-in took too long, was started in another browser,
	// or its state did not match (a forged or replayed callback).
	Expired Reason = "expired"
	// Denied: the provider refused, or the person cancelled.
	Denied Reason = "denied"
	// Failed: the code exchange or the ID token's check failed.
	Failed Reason = "failed"
	// NoEmail: the ID token has no email (the email scope not granted).
	NoEmail Reason = "no_email"
	// EmailUnverified: the provider does not vouch for the email.
	EmailUnverified Reason = "email_unverified"
	// DomainNotAllowed: the email's domain is not in allowed_domains.
	DomainNotAllowed Reason = "domain_not_allowed"
	// Disabled: the account exists and an administrator disabled it.
	Disabled Reason = "account_disabled"
	// NameTaken: an account signing in with a password already has the
	// name this sign-in would take.
	NameTaken Reason = "name_taken"
)

// Failure is a sign-in that did not succeed. Err is for the operator's
// log; Reason is what the person is told.
type Failure struct {
	Reason Reason
	Err    error
}

func (f *Failure) Error() string {
	if f.Err == nil {
		return "single sign-on: " + string(f.Reason)
	}
	return "single sign-on: " + string(f.Reason) + ": " + f.Err.Error()
}

func (f *Failure) Unwrap() error { return f.Err }

func fail(r Reason, format string, args ...any) error {
	return &Failure{Reason: r, Err: fmt.Errorf(format, args...)}
}

// flowLifetime bounds the time between Start and Finish: long enough to
// type a password and answer a second factor at the provider.
const flowLifetime = 10 * time.Minute

// flow is what the browser carries, sealed, between Start and Finish.
type flow struct {
	State    string `json:"s"`
	Nonce    string `json:"n"`
	Verifier string `json:"v"`
	Redirect string `json:"r"`
	Expires  int64  `json:"e"`
}

// Start begins a sign-in. callback is the gateway's callback address as
// the browser reaches it (used unless Config.RedirectURL is set). It
// returns the provider's authorization address to send the browser to and
// the sealed value the browser must bring back to Finish.
func (p *Provider) Start(ctx context.Context, callback string) (authURL, sealed string, err error) {
	op, err := p.discover(ctx)
	if err != nil {
		return "", "", err
	}
	f := flow{Verifier: oauth2.GenerateVerifier(), Redirect: cmp.Or(p.cfg.RedirectURL, callback),
		Expires: time.Now().Add(flowLifetime).Unix()}
	if f.State, err = keys.Random("", 32); err != nil {
		return "", "", err
	}
	if f.Nonce, err = keys.Random("", 32); err != nil {
		return "", "", err
	}
	if sealed, err = p.seal.seal(f); err != nil {
		return "", "", err
	}
	authURL = p.oauth(op, f.Redirect).AuthCodeURL(f.State, oauth2.S256ChallengeOption(f.Verifier), gooidc.Nonce(f.Nonce))
	return authURL, sealed, nil
}

// Finish completes a sign-in from the provider's answer (its state and
// code) and the sealed value Start gave, and returns the user to log in.
// Every refusal is a *Failure.
func (p *Provider) Finish(ctx context.Context, sealed, state, code string) (*store.User, error) {
	var f flow
	if sealed == "" || p.seal.open(sealed, &f) != nil {
		return nil, fail(Expired, "no sign-in in progress in this browser (the flow cookie is missing or not ours)")
	}
	if time.Now().Unix() > f.Expires {
		return nil, fail(Expired, "the sign-in was started more than %s ago", flowLifetime)
	}
	if state == "" || !same(state, f.State) {
		return nil, fail(Expired, "the callback's state does not match this browser's sign-in")
	}
	if code == "" {
		return nil, fail(Failed, "the callback carries no authorization code")
	}
	op, err := p.discover(ctx)
	if err != nil {
		return nil, err
	}
	tok, err := p.oauth(op, f.Redirect).Exchange(gooidc.ClientContext(ctx, p.client), code, oauth2.VerifierOption(f.Verifier))
	if err != nil {
		return nil, fail(Failed, "exchanging the authorization code: %s", exchangeError(err))
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return nil, fail(Failed, "the token answer has no id_token")
	}
	idt, err := op.Verifier(&gooidc.Config{ClientID: p.cfg.ClientID}).Verify(gooidc.ClientContext(ctx, p.client), raw)
	if err != nil {
		return nil, fail(Failed, "checking the ID token: %v", err)
	}
	if !same(idt.Nonce, f.Nonce) {
		return nil, fail(Failed, "the ID token's nonce is not this sign-in's")
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		return nil, fail(Failed, "reading the ID token's claims: %v", err)
	}
	email, err := p.checkEmail(claims)
	if err != nil {
		return nil, err
	}
	return p.user(ctx, idt.Subject, email, p.role(claims))
}

// exchangeError describes a failed code exchange without the token
// endpoint's body, which is the provider's to word and may echo what was
// sent.
func exchangeError(err error) string {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		if re.ErrorCode != "" {
			return "the provider answered " + re.ErrorCode
		}
		if re.Response != nil {
			return "the provider answered " + re.Response.Status
		}
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return "the token endpoint could not be reached: " + ue.Err.Error()
	}
	return "the token endpoint's answer could not be read"
}

// discover reads the provider's configuration once it can.
func (p *Provider) discover(ctx context.Context) (*gooidc.Provider, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.op != nil {
		return p.op, nil
	}
	// not the request's context alone: the discovered provider keeps this
	// context's client for fetching keys long after the request ends
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	op, err := gooidc.NewProvider(gooidc.ClientContext(dctx, p.client), p.cfg.Issuer)
	if err != nil {
		return nil, &Failure{Reason: Unavailable, Err: fmt.Errorf("discovering %s: %w", p.cfg.Issuer, err)}
	}
	p.op = op
	return op, nil
}

func (p *Provider) oauth(op *gooidc.Provider, redirect string) *oauth2.Config {
	return &oauth2.Config{ClientID: p.cfg.ClientID, ClientSecret: p.cfg.ClientSecret, Endpoint: op.Endpoint(),
		RedirectURL: redirect, Scopes: []string{gooidc.ScopeOpenID, "email", "profile"}}
}

// checkEmail returns the token's email, lowercased, once the provider
// vouches for it and its domain may sign in.
func (p *Provider) checkEmail(claims map[string]any) (string, error) {
	email, _ := claims["email"].(string)
	email = strings.ToLower(strings.TrimSpace(email))
	at := strings.LastIndexByte(email, '@')
	if at <= 0 || at == len(email)-1 {
		return "", fail(NoEmail, "the ID token has no usable email claim: ask for the email scope")
	}
	// some providers (Amazon Cognito) send the flag as a string
	if v := claims["email_verified"]; v != true && v != "true" {
		return "", fail(EmailUnverified, "the provider does not say %s is verified", email)
	}
	domain := email[at+1:]
	for _, d := range p.cfg.AllowedDomains {
		if d == "*" || d == domain {
			return email, nil
		}
	}
	return "", fail(DomainNotAllowed, "%s is not in allowed_domains", domain)
}

// role is the role the claim gives, or "" when no claim is configured.
// It is never root: the one root account is made at bootstrap.
func (p *Provider) role(claims map[string]any) string {
	if p.cfg.RoleClaim == "" {
		return ""
	}
	var v any = claims
	for _, part := range strings.Split(p.cfg.RoleClaim, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return store.RoleUser
		}
		v = m[part]
	}
	values, ok := v.([]any)
	if !ok {
		values = []any{v}
	}
	for _, x := range values {
		if s, ok := x.(string); ok && strings.EqualFold(s, store.RoleAdmin) {
			return store.RoleAdmin
		}
	}
	return store.RoleUser
}

// passwordMark is the password hash of a user made by single sign-on: not
// a bcrypt hash, so no password ever matches it, and it names the
// provider's subject, so a later sign-in with the same email is the same
// account only when it is the same person at the same provider.
func (p *Provider) passwordMark(subject string) string {
	sum := sha256.Sum256([]byte(p.cfg.Issuer + "\x00" + subject))
	return "!oidc:" + hex.EncodeToString(sum[:])
}

// user finds the account this sign-in is, or makes it: named by the
// email, which the provider vouched for and which is unique to a person.
// An account of that name that signs in with a password is refused, not
// taken over: someone could have registered the name in advance.
func (p *Provider) user(ctx context.Context, subject, email, role string) (*store.User, error) {
	if subject == "" {
		return nil, fail(Failed, "the ID token has no subject")
	}
	if err := account.CheckUsername(email); err != nil {
		return nil, fail(NoEmail, "the email %q cannot be a username: %v", email, err)
	}
	// an account an administrator linked to this identity comes first:
	// it keeps its name and password
	u, err := account.LinkedUser(ctx, p.store, p.cfg.Issuer, subject, email)
	switch {
	case err == nil:
	case !errors.Is(err, store.ErrNotFound):
		return nil, fmt.Errorf("finding the account linked to %q: %w", email, err)
	default:
		mark := p.passwordMark(subject)
		u, err = p.store.UserByName(ctx, email)
		if errors.Is(err, store.ErrNotFound) {
			u, err = p.create(ctx, email, mark, role)
		}
		if err != nil {
			return nil, err
		}
		if u.PasswordHash != mark {
			return nil, fail(NameTaken, "the account %q is not this provider's subject (it signs in with a password, or came from another provider): an administrator can link it to this identity", email)
		}
	}
	if u.Status != store.UserEnabled {
		return nil, fail(Disabled, "the account %q is disabled", email)
	}
	if role != "" && u.Role != role && u.Role != store.RoleRoot {
		if err := p.store.SetUserRole(ctx, u.ID, role); err != nil {
			return nil, fmt.Errorf("setting %q's role from the provider's claim: %w", email, err)
		}
		u.Role = role
	}
	return u, nil
}

// create makes the account on first sign-in. Two first sign-ins at once
// both try; the loser reads the winner's.
func (p *Provider) create(ctx context.Context, email, mark, role string) (*store.User, error) {
	invite, err := keys.Random("", 10)
	if err != nil {
		return nil, err
	}
	u := &store.User{Username: email, PasswordHash: mark, Role: cmp.Or(role, store.RoleUser), InviteCode: invite}
	err = p.store.CreateUser(ctx, u)
	if errors.Is(err, store.ErrConflict) {
		existing, err := p.store.UserByName(ctx, email)
		if errors.Is(err, store.ErrNotFound) {
			// another name that reads the same ("Alice@corp.example")
			return nil, fail(NameTaken, "an account whose name reads as %q exists already (it signs in with a password, or came from another provider)", email)
		}
		return existing, err
	}
	if err != nil {
		return nil, fmt.Errorf("creating %q on first sign-in: %w", email, err)
	}
	return u, nil
}

// same compares secrets in constant time.
func same(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }
