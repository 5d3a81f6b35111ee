// Package oidctest is an OpenID Connect provider for tests: discovery,
// a JWKS, an authorize endpoint that approves whoever the test says is
// signed in at the provider (no page, no consent), and a token endpoint
// that checks the client's secret, the redirect address and the PKCE
// verifier before issuing an RS256-signed ID token. It is strict where a
// real provider is, so a gateway that skips a step fails against it.
package oidctest

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"
)

// Identity is the person signed in at the provider.
type Identity struct {
	Subject string
	Email   string
	// EmailVerified is the email_verified claim as sent: true, false, a
	// string, or nil to leave it out.
	EmailVerified any
	// Claims are added to the ID token (a role claim, say).
	Claims map[string]any
	// Deny makes the authorize endpoint answer access_denied, as when
	// the person cancels at the provider.
	Deny bool
}

// Provider is a running fake provider; URL is its issuer.
type Provider struct {
	URL          string
	ClientID     string
	ClientSecret string

	key *rsa.PrivateKey
	kid string

	mu        sync.Mutex
	who       Identity
	grants    map[string]grant
	exchanges int
	refusals  []string
	issued    []string
}

type grant struct {
	who       Identity
	redirect  string
	challenge string
	nonce     string
}

// Start runs a provider for the test's lifetime, approving who.
func Start(t testing.TB, clientID, clientSecret string, who Identity) *Provider {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	p := &Provider{ClientID: clientID, ClientSecret: clientSecret, key: key, kid: "test-key-1", who: who, grants: map[string]grant{}}
	m := http.NewServeMux()
	m.HandleFunc("GET /.well-known/openid-configuration", p.discovery)
	m.HandleFunc("GET /jwks", p.jwks)
	m.HandleFunc("GET /authorize", p.authorize)
	m.HandleFunc("POST /token", p.token)
	srv := httptest.NewServer(m)
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	return p
}

// SignIn changes who the provider approves next.
func (p *Provider) SignIn(who Identity) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.who = who
}

// Exchanges is how many codes the token endpoint turned into tokens.
func (p *Provider) Exchanges() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exchanges
}

// Issued are every code and token the provider gave out, for a test to
// look for in logs where none may appear.
func (p *Provider) Issued() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.issued...)
}

// Refusals are the reasons the provider refused requests, in order.
func (p *Provider) Refusals() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.refusals...)
}

func (p *Provider) refuse(w http.ResponseWriter, status int, code, why string) {
	p.mu.Lock()
	p.refusals = append(p.refusals, why)
	p.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": code, "error_description": why})
}

func (p *Provider) discovery(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, map[string]any{
		"issuer":                                p.URL,
		"authorization_endpoint":                p.URL + "/authorize",
		"token_endpoint":                        p.URL + "/token",
		"jwks_uri":                              p.URL + "/jwks",
		"response_types_supported":              []string{"code"},
		"subject_types_supported":               []string{"public"},
		"id_token_signing_alg_values_supported": []string{"RS256"},
		"code_challenge_methods_supported":      []string{"S256"},
		"scopes_supported":                      []string{"openid", "email", "profile"},
	})
}

func (p *Provider) jwks(w http.ResponseWriter, _ *http.Request) {
	pub := p.key.PublicKey
	writeJSON(w, map[string]any{"keys": []map[string]string{{
		"kty": "RSA", "use": "sig", "alg": "RS256", "kid": p.kid,
		"n": b64(pub.N.Bytes()), "e": b64(big.NewInt(int64(pub.E)).Bytes()),
	}}})
}

// authorize approves at once and sends the browser back with a code.
func (p *Provider) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	redirect := q.Get("redirect_uri")
	switch {
	case q.Get("client_id") != p.ClientID:
		p.refuse(w, http.StatusBadRequest, "invalid_client", "unknown client_id "+q.Get("client_id"))
		return
	case q.Get("response_type") != "code":
		p.refuse(w, http.StatusBadRequest, "unsupported_response_type", "response_type must be code")
		return
	case redirect == "":
		p.refuse(w, http.StatusBadRequest, "invalid_request", "no redirect_uri")
		return
	case q.Get("code_challenge") == "" || q.Get("code_challenge_method") != "S256":
		p.refuse(w, http.StatusBadRequest, "invalid_request", "PKCE with S256 is required")
		return
	case q.Get("state") == "" || q.Get("nonce") == "":
		p.refuse(w, http.StatusBadRequest, "invalid_request", "state and nonce are required")
		return
	}
	back, err := url.Parse(redirect)
	if err != nil {
		p.refuse(w, http.StatusBadRequest, "invalid_request", "redirect_uri is not a URL")
		return
	}
	p.mu.Lock()
	who := p.who
	p.mu.Unlock()
	v := back.Query()
	v.Set("state", q.Get("state"))
	if who.Deny {
		v.Set("error", "access_denied")
		v.Set("error_description", "the user cancelled")
	} else {
		code := random()
		p.mu.Lock()
		p.issued = append(p.issued, code)
		p.grants[code] = grant{who: who, redirect: redirect, challenge: q.Get("code_challenge"), nonce: q.Get("nonce")}
		p.mu.Unlock()
		v.Set("code", code)
	}
	back.RawQuery = v.Encode()
	http.Redirect(w, r, back.String(), http.StatusFound)
}

// token turns a code into tokens once, for the client that asked for it,
// with the verifier of its challenge.
func (p *Provider) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		p.refuse(w, http.StatusBadRequest, "invalid_request", "bad form")
		return
	}
	id, secret, ok := r.BasicAuth()
	if ok {
		id, _ = url.QueryUnescape(id)
		secret, _ = url.QueryUnescape(secret)
	} else {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	if id != p.ClientID || secret != p.ClientSecret {
		p.refuse(w, http.StatusUnauthorized, "invalid_client", "wrong client credentials")
		return
	}
	code := r.PostForm.Get("code")
	p.mu.Lock()
	g, found := p.grants[code]
	delete(p.grants, code) // a code is good once
	p.mu.Unlock()
	sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
	switch {
	case r.PostForm.Get("grant_type") != "authorization_code":
		p.refuse(w, http.StatusBadRequest, "unsupported_grant_type", "grant_type must be authorization_code")
		return
	case !found:
		p.refuse(w, http.StatusBadRequest, "invalid_grant", "unknown or used code")
		return
	case r.PostForm.Get("redirect_uri") != g.redirect:
		p.refuse(w, http.StatusBadRequest, "invalid_grant", "redirect_uri differs from the authorize request's")
		return
	case b64(sum[:]) != g.challenge:
		p.refuse(w, http.StatusBadRequest, "invalid_grant", "code_verifier does not match the code_challenge")
		return
	}
	claims := map[string]any{"iss": p.URL, "sub": g.who.Subject, "aud": p.ClientID, "nonce": g.nonce,
		"iat": time.Now().Unix(), "exp": time.Now().Add(5 * time.Minute).Unix()}
	if g.who.Email != "" {
		claims["email"] = g.who.Email
	}
	if g.who.EmailVerified != nil {
		claims["email_verified"] = g.who.EmailVerified
	}
	for k, v := range g.who.Claims {
		claims[k] = v
	}
	idToken, err := p.sign(claims)
	if err != nil {
		p.refuse(w, http.StatusInternalServerError, "server_error", err.Error())
		return
	}
	access := random()
	p.mu.Lock()
	p.exchanges++
	p.issued = append(p.issued, access, idToken)
	p.mu.Unlock()
	writeJSON(w, map[string]any{"access_token": access, "token_type": "Bearer", "expires_in": 300, "id_token": idToken})
}

// sign makes an RS256 JWT of claims with the provider's key.
func (p *Provider) sign(claims map[string]any) (string, error) {
	header, _ := json.Marshal(map[string]string{"alg": "RS256", "typ": "JWT", "kid": p.kid})
	body, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	signing := b64(header) + "." + b64(body)
	sum := sha256.Sum256([]byte(signing))
	sig, err := rsa.SignPKCS1v15(rand.Reader, p.key, crypto.SHA256, sum[:])
	if err != nil {
		return "", fmt.Errorf("signing: %w", err)
	}
	return signing + "." + b64(sig), nil
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

func random() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return b64(b)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
