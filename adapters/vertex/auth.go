package vertex

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Scope is the OAuth scope the gateway asks for: Vertex AI takes the
// cloud-platform scope.
const Scope = "https://www.googleapis.com/auth/cloud-platform"

// jwtBearer is the grant type of a signed assertion (RFC 7523).
const jwtBearer = "urn:ietf:params:oauth:grant-type:jwt-bearer"

// assertionLife is how long a signed assertion is valid: Google takes at
// most an hour.
const assertionLife = time.Hour

// refreshMargin is how long before its expiry a token stops being used,
// so none expires on the way to the API.
const refreshMargin = 2 * time.Minute

// maxTokenAnswer bounds the token endpoint's answer.
const maxTokenAnswer = 64 << 10

// serviceAccount is what the gateway reads of a service account's JSON
// key file. The private key never leaves this struct: no error, log line
// or String method shows it.
type serviceAccount struct {
	email     string
	keyID     string
	projectID string
	tokenURI  string
	key       *rsa.PrivateKey
}

// parseServiceAccount reads a service account's JSON key file. Its errors
// name the member that is wrong, never a value of the file.
func parseServiceAccount(raw string) (*serviceAccount, error) {
	raw = strings.TrimSpace(raw)
	if !strings.HasPrefix(raw, "{") {
		return nil, errors.New("the key is not a service account's JSON key file: write key {file./path/to/service-account.json}")
	}
	var f struct {
		Type         string `json:"type"`
		ProjectID    string `json:"project_id"`
		PrivateKeyID string `json:"private_key_id"`
		PrivateKey   string `json:"private_key"`
		ClientEmail  string `json:"client_email"`
		TokenURI     string `json:"token_uri"`
	}
	if err := json.Unmarshal([]byte(raw), &f); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, fmt.Errorf("the service account file is not valid JSON (at byte %d)", se.Offset)
		}
		return nil, errors.New("the service account file is not a JSON object of strings")
	}
	if f.Type != "" && f.Type != "service_account" {
		return nil, fmt.Errorf("the key file is of type %q, not a service account's (\"type\": \"service_account\")", f.Type)
	}
	if f.ClientEmail == "" {
		return nil, errors.New("the service account file has no client_email")
	}
	if f.PrivateKey == "" {
		return nil, errors.New("the service account file has no private_key")
	}
	u, err := url.Parse(f.TokenURI)
	if f.TokenURI == "" || err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, errors.New("the service account file's token_uri is missing or not an http(s) URL")
	}
	key, err := parseRSAKey(f.PrivateKey)
	if err != nil {
		return nil, err
	}
	return &serviceAccount{email: f.ClientEmail, keyID: f.PrivateKeyID, projectID: f.ProjectID, tokenURI: f.TokenURI, key: key}, nil
}

// parseRSAKey reads the PEM private key: PKCS #8, as Google writes it, or
// PKCS #1.
func parseRSAKey(s string) (*rsa.PrivateKey, error) {
	block, _ := pem.Decode([]byte(s))
	if block == nil {
		return nil, errors.New("the service account's private_key is not a PEM block")
	}
	if k, err := x509.ParsePKCS8PrivateKey(block.Bytes); err == nil {
		rk, ok := k.(*rsa.PrivateKey)
		if !ok {
			return nil, errors.New("the service account's private_key is not an RSA key")
		}
		return rk, nil
	}
	if k, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
		return k, nil
	}
	return nil, errors.New("the service account's private_key cannot be read (want a PKCS #8 or PKCS #1 RSA key)")
}

// assertion signs the JWT the token endpoint exchanges for an access
// token (RS256; RFC 7523 section 2.1).
func (sa *serviceAccount) assertion(now time.Time) (string, error) {
	header := map[string]string{"alg": "RS256", "typ": "JWT"}
	if sa.keyID != "" {
		header["kid"] = sa.keyID
	}
	claims := map[string]any{
		"iss":   sa.email,
		"scope": Scope,
		"aud":   sa.tokenURI,
		"iat":   now.Unix(),
		"exp":   now.Add(assertionLife).Unix(),
	}
	h, err := json.Marshal(header)
	if err != nil {
		return "", err
	}
	c, err := json.Marshal(claims)
	if err != nil {
		return "", err
	}
	enc := base64.RawURLEncoding
	signed := enc.EncodeToString(h) + "." + enc.EncodeToString(c)
	sum := sha256.Sum256([]byte(signed))
	sig, err := rsa.SignPKCS1v15(rand.Reader, sa.key, crypto.SHA256, sum[:])
	if err != nil {
		return "", errors.New("signing the service account's assertion failed")
	}
	return signed + "." + enc.EncodeToString(sig), nil
}

// tokenSource holds one service account's access token: fetched when
// first needed, used until refreshMargin before it expires, fetched again
// by one caller while the others wait for it (single flight).
type tokenSource struct {
	sa      *serviceAccount
	client  *http.Client
	timeout time.Duration
	now     func() time.Time

	mu       sync.Mutex
	token    string
	expires  time.Time
	inflight *tokenFetch
}

// tokenFetch is one exchange under way; done closes when it ends.
type tokenFetch struct {
	done    chan struct{}
	token   string
	expires time.Time
	err     error
}

// Token returns a valid access token, exchanging an assertion for one if
// the cached one is missing or about to expire. ctx bounds the wait, not
// the exchange, which other callers may be waiting for too.
func (s *tokenSource) Token(ctx context.Context) (string, error) {
	s.mu.Lock()
	if s.token != "" && s.now().Before(s.expires.Add(-refreshMargin)) {
		t := s.token
		s.mu.Unlock()
		return t, nil
	}
	f := s.inflight
	if f == nil {
		f = &tokenFetch{done: make(chan struct{})}
		s.inflight = f
		go s.fetch(f)
	}
	s.mu.Unlock()
	select {
	case <-f.done:
		return f.token, f.err
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// Invalidate drops token if it is still the cached one (the API refused
// it), so the next Token fetches another.
func (s *tokenSource) Invalidate(token string) {
	s.mu.Lock()
	if s.token == token {
		s.token = ""
	}
	s.mu.Unlock()
}

func (s *tokenSource) fetch(f *tokenFetch) {
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	f.token, f.expires, f.err = s.exchange(ctx)
	s.mu.Lock()
	if f.err == nil {
		s.token, s.expires = f.token, f.expires
	}
	s.inflight = nil
	s.mu.Unlock()
	close(f.done)
}

// exchange trades a fresh assertion for an access token at the file's
// token_uri. Its errors name the endpoint and Google's error code, never
// the assertion or the token.
func (s *tokenSource) exchange(ctx context.Context) (string, time.Time, error) {
	now := s.now()
	jwt, err := s.sa.assertion(now)
	if err != nil {
		return "", time.Time{}, err
	}
	form := url.Values{"grant_type": {jwtBearer}, "assertion": {jwt}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.sa.tokenURI, strings.NewReader(form))
	if err != nil {
		return "", time.Time{}, fmt.Errorf("vertex: token_uri: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := s.client.Do(req)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("vertex: exchanging the service account %s's assertion at %s: %w", s.sa.email, s.sa.tokenURI, unwrapURLError(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxTokenAnswer+1))
	if err != nil {
		return "", time.Time{}, fmt.Errorf("vertex: reading the token endpoint's answer: %w", err)
	}
	if len(body) > maxTokenAnswer {
		return "", time.Time{}, fmt.Errorf("vertex: the token endpoint %s answered more than %d bytes", s.sa.tokenURI, maxTokenAnswer)
	}
	var w struct {
		AccessToken string `json:"access_token"`
		ExpiresIn   int64  `json:"expires_in"`
		TokenType   string `json:"token_type"`
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	_ = json.Unmarshal(body, &w)
	if resp.StatusCode/100 != 2 || w.AccessToken == "" {
		reason := strings.TrimSpace(w.Error + ": " + w.Description)
		if w.Error == "" {
			reason = "no access token in its answer"
		}
		return "", time.Time{}, fmt.Errorf("vertex: the token endpoint %s refused the service account %s (HTTP %d, %s)", s.sa.tokenURI, s.sa.email, resp.StatusCode, oneLine(reason))
	}
	if w.ExpiresIn <= 0 {
		w.ExpiresIn = 3600
	}
	return w.AccessToken, now.Add(time.Duration(w.ExpiresIn) * time.Second), nil
}

// unwrapURLError drops url.Error's method and URL, which say nothing the
// message does not.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// oneLine bounds a reason from the token endpoint to one short line.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

// sourceKey carries a request's token source from NewRequest to the
// transport.
type sourceKey struct{}

// transport adds the channel's access token to each call and, when the
// API refuses it with a 401, fetches another and sends the call once more.
type transport struct {
	base http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (t *transport) RoundTrip(r *http.Request) (*http.Response, error) {
	src, _ := r.Context().Value(sourceKey{}).(*tokenSource)
	if src == nil {
		return t.base.RoundTrip(r)
	}
	tok, err := src.Token(r.Context())
	if err != nil {
		closeBody(r)
		return nil, err
	}
	resp, err := t.base.RoundTrip(authorized(r, r.Body, tok))
	if err != nil || resp.StatusCode != http.StatusUnauthorized || r.GetBody == nil {
		return resp, err
	}
	// the token was revoked or expired early: one more try with a new one
	body, err := r.GetBody()
	if err != nil {
		return resp, nil
	}
	src.Invalidate(tok)
	fresh, err := src.Token(r.Context())
	if err != nil || fresh == tok {
		body.Close()
		return resp, nil
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return t.base.RoundTrip(authorized(r, body, fresh))
}

// authorized is r with body and the access token, r itself unchanged.
func authorized(r *http.Request, body io.ReadCloser, token string) *http.Request {
	out := r.Clone(r.Context())
	out.Body = body
	out.Header.Set("Authorization", "Bearer "+token)
	return out
}

func closeBody(r *http.Request) {
	if r.Body != nil {
		r.Body.Close()
	}
}

// withBody replaces a built request's body (a bytes body, resendable).
func withBody(hr *http.Request, body []byte) {
	hr.Body = io.NopCloser(bytes.NewReader(body))
	hr.ContentLength = int64(len(body))
	hr.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
}
