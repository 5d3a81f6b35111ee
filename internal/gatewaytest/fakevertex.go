package gatewaytest

import (
	"bytes"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// VertexAnthropicVersion is the anthropic_version Vertex requires in a
// Claude body.
const VertexAnthropicVersion = "vertex-2023-10-16"

// FakeVertex is Google Cloud's side of Vertex AI as its references
// describe it, checking what the real service checks:
//
//   - POST /token is the OAuth token endpoint of a service account's
//     token_uri: it takes grant_type jwt-bearer and an RS256 assertion,
//     checks its signature against the public key of the service account
//     its iss names (ServiceAccount registers one), its aud (this token
//     endpoint), its scope (cloud-platform), iat and exp (at most an hour
//     apart, not expired), and issues an access token that expires in
//     TokenLife.
//   - /v1/projects/{p}/locations/{l}/publishers/google/models/{m}:generateContent,
//     :streamGenerateContent?alt=sse and :countTokens answer as Gemini does
//     (served by Gemini, a FakeGemini), and
//     publishers/anthropic/models/{m}:rawPredict and :streamRawPredict as
//     Claude does (Claude, a FakeAnthropic), the body without a model and
//     with anthropic_version vertex-2023-10-16. Every call needs a live
//     access token in Authorization: Bearer; a missing, unknown or expired
//     one is refused with Google's 401 (UNAUTHENTICATED).
type FakeVertex struct {
	*httptest.Server
	Project, Location string
	// Gemini and Claude answer the calls to each publisher's models;
	// their Set and Requests are the tests' handle on them.
	Gemini *FakeGemini
	Claude *FakeAnthropic

	mu         sync.Mutex
	accounts   map[string]*rsa.PublicKey // by client_email
	tokens     map[string]vertexToken
	tokenLife  time.Duration
	exchanges  []string // the client_email of each token issued
	calls      []VertexCall
	reject401  bool
	innerKey   string
	tokenCount int
}

type vertexToken struct {
	email   string
	expires time.Time
}

// VertexCall is one call the fake's API received.
type VertexCall struct {
	Path     string
	Identity string // the service account whose token it carried; "" if none was valid
	Status   int    // 401 when the token was refused, else 200 for an answered call
}

// NewFakeVertex starts the fake for one project and location.
func NewFakeVertex(t testing.TB, project, location string) *FakeVertex {
	inner := "vertex-inner-" + randomHex(8)
	f := &FakeVertex{Project: project, Location: location, accounts: map[string]*rsa.PublicKey{},
		tokens: map[string]vertexToken{}, tokenLife: time.Hour, innerKey: inner}
	f.Gemini = &FakeGemini{Key: inner, Videos: &JobStore{}}
	f.Gemini.b = defaultBehavior()
	f.Claude = &FakeAnthropic{Key: inner}
	f.Claude.b = defaultBehavior()
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

// BaseURL is what a vertex channel's base_url names in place of the
// regional endpoint.
func (f *FakeVertex) BaseURL() string { return f.URL }

// TokenURI is the token endpoint a service account file names.
func (f *FakeVertex) TokenURI() string { return f.URL + "/token" }

// SetTokenLife sets the expires_in of the tokens issued from now on.
func (f *FakeVertex) SetTokenLife(d time.Duration) {
	f.mu.Lock()
	f.tokenLife = d
	f.mu.Unlock()
}

// ExpireTokens makes every token issued so far expired, as a revoked or
// early-expired token is: the next call with one gets a 401.
func (f *FakeVertex) ExpireTokens() {
	f.mu.Lock()
	for k, tok := range f.tokens {
		tok.expires = time.Time{}
		f.tokens[k] = tok
	}
	f.mu.Unlock()
}

// RejectAll makes the API refuse every call with a 401, valid token or
// not (a service account whose roles were taken away mid-flight).
func (f *FakeVertex) RejectAll(on bool) {
	f.mu.Lock()
	f.reject401 = on
	f.mu.Unlock()
}

// Exchanges returns the client_email of each access token issued so far.
func (f *FakeVertex) Exchanges() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.exchanges...)
}

// Calls returns the API calls received so far.
func (f *FakeVertex) Calls() []VertexCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]VertexCall(nil), f.calls...)
}

// ServiceAccount makes a service account the fake trusts, with a fresh
// 2048-bit RSA key, and writes its JSON key file into dir as Google's
// console does. It returns the file's path and the account's email. The
// private key is recorded as a secret no gateway log may hold.
func (f *FakeVertex) ServiceAccount(t testing.TB, dir, name string) (path, email string) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	email = name + "@" + f.Project + ".iam.gserviceaccount.com"
	f.mu.Lock()
	f.accounts[email] = &key.PublicKey
	f.mu.Unlock()
	for _, line := range strings.Split(string(pemKey), "\n") {
		if len(line) == 64 {
			Secret(line) // any line of the key's body
			break
		}
	}
	file := map[string]string{
		"type": "service_account", "project_id": f.Project, "private_key_id": randomHex(20),
		"private_key": string(pemKey), "client_email": email, "client_id": "1" + randomHex(10),
		"auth_uri": "https://accounts.google.com/o/oauth2/auth", "token_uri": f.TokenURI(),
		"auth_provider_x509_cert_url": "https://www.googleapis.com/oauth2/v1/certs",
		"universe_domain":             "googleapis.com",
	}
	b, err := json.MarshalIndent(file, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(dir, name+".json")
	if err := os.WriteFile(path, append(b, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	return path, email
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// oauthError is Google's token endpoint's error shape.
func oauthError(w http.ResponseWriter, status int, code, desc string) {
	writeJSONStatus(w, status, map[string]string{"error": code, "error_description": desc})
}

func (f *FakeVertex) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/token" {
		f.serveToken(w, r)
		return
	}
	f.serveAPI(w, r)
}

// serveToken is the OAuth 2.0 token endpoint for signed assertions
// (RFC 7523), as Google's documents it for service accounts.
func (f *FakeVertex) serveToken(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.ParseForm() != nil {
		oauthError(w, 400, "invalid_request", "Invalid request.")
		return
	}
	if r.PostForm.Get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer" {
		oauthError(w, 400, "unsupported_grant_type", "Invalid grant_type: "+r.PostForm.Get("grant_type"))
		return
	}
	parts := strings.Split(r.PostForm.Get("assertion"), ".")
	if len(parts) != 3 {
		oauthError(w, 400, "invalid_grant", "Invalid JWT: Token must be a short-lived token and in a reasonable timeframe.")
		return
	}
	var head struct {
		Alg string `json:"alg"`
		Typ string `json:"typ"`
	}
	var claims struct {
		Iss   string `json:"iss"`
		Scope string `json:"scope"`
		Aud   string `json:"aud"`
		Iat   int64  `json:"iat"`
		Exp   int64  `json:"exp"`
	}
	hb, err1 := base64.RawURLEncoding.DecodeString(parts[0])
	cb, err2 := base64.RawURLEncoding.DecodeString(parts[1])
	sig, err3 := base64.RawURLEncoding.DecodeString(parts[2])
	if err1 != nil || err2 != nil || err3 != nil || json.Unmarshal(hb, &head) != nil || json.Unmarshal(cb, &claims) != nil {
		oauthError(w, 400, "invalid_grant", "Invalid JWT.")
		return
	}
	if head.Alg != "RS256" {
		oauthError(w, 400, "invalid_grant", "Invalid JWT: the algorithm must be RS256.")
		return
	}
	f.mu.Lock()
	pub := f.accounts[claims.Iss]
	f.mu.Unlock()
	if pub == nil {
		oauthError(w, 400, "invalid_grant", "Invalid grant: account not found")
		return
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if rsa.VerifyPKCS1v15(pub, crypto.SHA256, sum[:], sig) != nil {
		oauthError(w, 400, "invalid_grant", "Invalid JWT Signature.")
		return
	}
	now := time.Now().Unix()
	switch {
	case claims.Aud != f.TokenURI():
		oauthError(w, 400, "invalid_grant", "Invalid JWT: Failed audience check.")
		return
	case !strings.Contains(" "+claims.Scope+" ", " https://www.googleapis.com/auth/cloud-platform "):
		oauthError(w, 400, "invalid_scope", "Invalid OAuth scope or ID token audience provided.")
		return
	case claims.Exp <= now || claims.Iat > now+60 || claims.Exp-claims.Iat > 3600 || claims.Exp <= claims.Iat:
		oauthError(w, 400, "invalid_grant", "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check your iat and exp values in the JWT claim.")
		return
	}
	f.mu.Lock()
	f.tokenCount++
	token := fmt.Sprintf("ya29.fake-%d-%s", f.tokenCount, randomHex(24))
	life := f.tokenLife
	f.tokens[token] = vertexToken{email: claims.Iss, expires: time.Now().Add(life)}
	f.exchanges = append(f.exchanges, claims.Iss)
	f.mu.Unlock()
	Secret(token)
	writeJSONStatus(w, 200, map[string]any{"access_token": token, "expires_in": int64(life / time.Second), "token_type": "Bearer"})
}

// vertexUnauthenticated is Google's answer to a call without valid
// credentials.
func vertexUnauthenticated(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="https://accounts.google.com/"`)
	writeJSONStatus(w, 401, map[string]any{"error": map[string]any{"code": 401,
		"message": "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential. See https://developers.google.com/identity/sign-in/web/devconsole-project.",
		"status":  "UNAUTHENTICATED"}})
}

func (f *FakeVertex) serveAPI(w http.ResponseWriter, r *http.Request) {
	identity := ""
	f.mu.Lock()
	tok, ok := f.tokens[strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")]
	if ok && time.Now().Before(tok.expires) && !f.reject401 {
		identity = tok.email
	}
	call := VertexCall{Path: r.URL.Path, Identity: identity, Status: 200}
	if identity == "" {
		call.Status = 401
	}
	f.calls = append(f.calls, call)
	f.mu.Unlock()
	if identity == "" {
		vertexUnauthenticated(w)
		return
	}
	prefix := "/v1/projects/" + f.Project + "/locations/" + f.Location + "/publishers/"
	rest, ok := strings.CutPrefix(r.URL.Path, prefix)
	if !ok || r.Method != http.MethodPost {
		geminiError(w, 404, "The requested URL "+r.URL.Path+" was not found on this server.")
		return
	}
	publisher, rest, _ := strings.Cut(rest, "/models/")
	model, method, _ := strings.Cut(rest, ":")
	switch publisher {
	case "google":
		raw, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(raw))
		if method == "countTokens" && bytes.Contains(raw, []byte(`"generateContentRequest"`)) {
			// Vertex's CountTokensRequest has no such member (the Gemini
			// API's has), and Vertex refuses unknown members
			geminiError(w, 400, `Invalid JSON payload received. Unknown name "generateContentRequest": Cannot find field.`)
			return
		}
		r2 := r.Clone(r.Context())
		r2.URL.Path = "/v1beta/models/" + model + ":" + method
		r2.Header.Del("Authorization")
		r2.Header.Set("x-goog-api-key", f.innerKey)
		f.Gemini.serve(w, r2)
	case "anthropic":
		f.serveClaude(w, r, model, method)
	default:
		geminiError(w, 404, "Publisher Model `projects/"+f.Project+"/locations/"+f.Location+"/publishers/"+publisher+"/models/"+model+"` not found.")
	}
}

// serveClaude checks what Vertex asks of a Claude body and hands it to
// Claude as Anthropic's API takes it.
func (f *FakeVertex) serveClaude(w http.ResponseWriter, r *http.Request, model, method string) {
	raw, _ := io.ReadAll(r.Body)
	var body map[string]json.RawMessage
	if json.Unmarshal(raw, &body) != nil {
		anthropicError(w, 400, "invalid_request_error", "The request body is not valid JSON.")
		return
	}
	if string(body["anthropic_version"]) != `"`+VertexAnthropicVersion+`"` {
		anthropicError(w, 400, "invalid_request_error", "anthropic_version: Input should be '"+VertexAnthropicVersion+"'")
		return
	}
	path := "/v1/messages"
	switch {
	case model == "count-tokens" && method == "rawPredict":
		path = "/v1/messages/count_tokens"
		if _, ok := body["model"]; !ok {
			anthropicError(w, 400, "invalid_request_error", "model: Field required")
			return
		}
	case method != "rawPredict" && method != "streamRawPredict":
		geminiError(w, 400, "Invalid method "+method+" for a publisher model of Anthropic")
		return
	default:
		if _, ok := body["model"]; ok {
			anthropicError(w, 400, "invalid_request_error", "model: Extra inputs are not permitted")
			return
		}
		stream := bytes.Equal(bytes.TrimSpace(body["stream"]), []byte("true"))
		if stream != (method == "streamRawPredict") {
			geminiError(w, 400, "streamRawPredict streams and rawPredict does not: the body's stream must agree")
			return
		}
		m, _ := json.Marshal(model)
		body["model"] = m
	}
	delete(body, "anthropic_version")
	inner, _ := json.Marshal(body)
	r2 := r.Clone(r.Context())
	r2.URL.Path = path
	r2.Body = io.NopCloser(bytes.NewReader(inner))
	r2.Header.Del("Authorization")
	r2.Header.Set("x-api-key", f.innerKey)
	r2.Header.Set("anthropic-version", "2023-06-01")
	f.Claude.serve(w, r2)
}
