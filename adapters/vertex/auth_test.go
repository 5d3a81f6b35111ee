package vertex

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// testAccount is a service account made for one test, and its file.
type testAccount struct {
	key  *rsa.PrivateKey
	file string
}

func newTestAccount(t *testing.T, tokenURI string) testAccount {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKCS8PrivateKey(key)
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
	b, _ := json.Marshal(map[string]string{"type": "service_account", "project_id": "my-project", "private_key_id": "kid-1",
		"private_key": string(pemKey), "client_email": "gw@my-project.iam.gserviceaccount.com", "token_uri": tokenURI})
	return testAccount{key: key, file: string(b)}
}

// TestAssertion checks the signed JWT: RS256 over header.claims with the
// account's key, and the claims Google's token endpoint checks.
func TestAssertion(t *testing.T) {
	acct := newTestAccount(t, "https://oauth2.googleapis.com/token")
	sa, err := parseServiceAccount(acct.file)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_700_000_000, 0)
	jwt, err := sa.assertion(now)
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		t.Fatalf("assertion has %d parts", len(parts))
	}
	sig, _ := base64.RawURLEncoding.DecodeString(parts[2])
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err := rsa.VerifyPKCS1v15(&acct.key.PublicKey, crypto.SHA256, sum[:], sig); err != nil {
		t.Fatalf("signature does not verify: %v", err)
	}
	var head map[string]string
	var claims map[string]any
	hb, _ := base64.RawURLEncoding.DecodeString(parts[0])
	cb, _ := base64.RawURLEncoding.DecodeString(parts[1])
	_ = json.Unmarshal(hb, &head)
	_ = json.Unmarshal(cb, &claims)
	if head["alg"] != "RS256" || head["typ"] != "JWT" || head["kid"] != "kid-1" {
		t.Errorf("header %v", head)
	}
	want := map[string]any{"iss": "gw@my-project.iam.gserviceaccount.com", "scope": Scope,
		"aud": "https://oauth2.googleapis.com/token", "iat": float64(now.Unix()), "exp": float64(now.Add(time.Hour).Unix())}
	if fmt.Sprint(claims) != fmt.Sprint(want) {
		t.Errorf("claims %v, want %v", claims, want)
	}
}

// TestParseServiceAccountRefusals: each way a file can be wrong has its
// own message, and none repeats a byte of the file.
func TestParseServiceAccountRefusals(t *testing.T) {
	good := newTestAccount(t, "https://oauth2.googleapis.com/token")
	var f map[string]string
	_ = json.Unmarshal([]byte(good.file), &f)
	edit := func(k, v string) string {
		g := map[string]string{}
		for a, b := range f {
			g[a] = b
		}
		if v == "" {
			delete(g, k)
		} else {
			g[k] = v
		}
		b, _ := json.Marshal(g)
		return string(b)
	}
	cases := []struct{ name, file, msg string }{
		{"plain key", "AIzaSyA-secret-api-key", "not a service account's JSON key file"},
		{"not json", `{"private_key": "-----BEGIN`, "not valid JSON"},
		{"other type", edit("type", "authorized_user"), `type "authorized_user"`},
		{"no email", edit("client_email", ""), "no client_email"},
		{"no key", edit("private_key", ""), "no private_key"},
		{"bad key", edit("private_key", "-----BEGIN PRIVATE KEY-----\nc2VjcmV0LWtleS1ieXRlcw==\n-----END PRIVATE KEY-----\n"), "cannot be read"},
		{"no token uri", edit("token_uri", ""), "token_uri"},
	}
	for _, c := range cases {
		_, err := parseServiceAccount(c.file)
		if err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%s: %v, want %q", c.name, err, c.msg)
			continue
		}
		for _, secret := range []string{"secret", "BEGIN", "AIza"} {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("%s: the error shows the file: %v", c.name, err)
			}
		}
	}
}

// tokenServer is a token endpoint that counts exchanges and can hold
// them until released.
type tokenServer struct {
	*httptest.Server
	n       atomic.Int64
	life    int64
	hold    chan struct{}
	refuse  atomic.Bool
	started chan struct{}
}

func newTokenServer(t *testing.T) *tokenServer {
	s := &tokenServer{life: 3600}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		if r.PostForm.Get("grant_type") != jwtBearer || r.PostForm.Get("assertion") == "" {
			w.WriteHeader(400)
			return
		}
		if s.started != nil {
			s.started <- struct{}{}
		}
		if s.hold != nil {
			<-s.hold
		}
		n := s.n.Add(1)
		w.Header().Set("Content-Type", "application/json")
		if s.refuse.Load() {
			w.WriteHeader(400)
			fmt.Fprint(w, `{"error":"invalid_grant","error_description":"Invalid JWT Signature."}`)
			return
		}
		fmt.Fprintf(w, `{"access_token":"tok-%d","expires_in":%d,"token_type":"Bearer"}`, n, s.life)
	}))
	t.Cleanup(s.Close)
	return s
}

func newSource(t *testing.T, ts *tokenServer, now func() time.Time) *tokenSource {
	sa, err := parseServiceAccount(newTestAccount(t, ts.URL).file)
	if err != nil {
		t.Fatal(err)
	}
	return &tokenSource{sa: sa, client: ts.Client(), timeout: 5 * time.Second, now: now}
}

// TestTokenCachedUntilShortlyBeforeExpiry: one exchange serves every call
// until refreshMargin before the token expires, then one more.
func TestTokenCachedUntilShortlyBeforeExpiry(t *testing.T) {
	ts := newTokenServer(t)
	clock := time.Unix(1_700_000_000, 0)
	src := newSource(t, ts, func() time.Time { return clock })
	for range 5 {
		if tok, err := src.Token(context.Background()); err != nil || tok != "tok-1" {
			t.Fatalf("token %q, %v", tok, err)
		}
	}
	clock = clock.Add(time.Hour - refreshMargin - time.Second)
	if tok, _ := src.Token(context.Background()); tok != "tok-1" {
		t.Fatalf("a token still valid was refreshed: %q", tok)
	}
	clock = clock.Add(2 * time.Second)
	if tok, _ := src.Token(context.Background()); tok != "tok-2" {
		t.Fatalf("a token about to expire was used: %q", tok)
	}
	if n := ts.n.Load(); n != 2 {
		t.Fatalf("%d exchanges, want 2", n)
	}
}

// TestTokenSingleFlight: callers that need a token at once share one
// exchange.
func TestTokenSingleFlight(t *testing.T) {
	ts := newTokenServer(t)
	ts.hold, ts.started = make(chan struct{}), make(chan struct{}, 100)
	src := newSource(t, ts, time.Now)
	var wg sync.WaitGroup
	got := make(chan string, 50)
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tok, _ := src.Token(context.Background())
			got <- tok
		}()
	}
	<-ts.started // the one exchange is under way; every caller waits on it or finds the token
	close(ts.hold)
	wg.Wait()
	close(got)
	for tok := range got {
		if tok != "tok-1" {
			t.Fatalf("a caller got %q", tok)
		}
	}
	if n := ts.n.Load(); n != 1 {
		t.Fatalf("%d exchanges for 50 concurrent callers, want 1", n)
	}
}

// TestTokenRefusalIsClear: the token endpoint's refusal names the account
// and Google's reason, never the assertion.
func TestTokenRefusalIsClear(t *testing.T) {
	ts := newTokenServer(t)
	ts.refuse.Store(true)
	src := newSource(t, ts, time.Now)
	_, err := src.Token(context.Background())
	if err == nil || !strings.Contains(err.Error(), "invalid_grant: Invalid JWT Signature.") || !strings.Contains(err.Error(), "gw@my-project") {
		t.Fatalf("error %v", err)
	}
	if strings.Contains(err.Error(), "eyJ") {
		t.Fatalf("the error holds the assertion: %v", err)
	}
}

// TestTransportRefreshesOnceOn401: a 401 drops the token, a new one is
// fetched and the call sent once more with the same body; a second 401
// is the answer.
func TestTransportRefreshesOnceOn401(t *testing.T) {
	ts := newTokenServer(t)
	src := newSource(t, ts, time.Now)
	var seen []string
	var bodies []string
	refuse := map[string]bool{"Bearer tok-1": true}
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		seen, bodies = append(seen, r.Header.Get("Authorization")), append(bodies, string(b))
		if refuse[r.Header.Get("Authorization")] {
			w.WriteHeader(401)
			return
		}
		w.WriteHeader(200)
	}))
	defer api.Close()
	client := &http.Client{Transport: &transport{base: http.DefaultTransport}}
	send := func() int {
		ctx := context.WithValue(context.Background(), sourceKey{}, src)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, api.URL, strings.NewReader(`{"contents":[]}`))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if st := send(); st != 200 {
		t.Fatalf("status %d", st)
	}
	if fmt.Sprint(seen) != "[Bearer tok-1 Bearer tok-2]" || bodies[0] != bodies[1] || bodies[1] != `{"contents":[]}` {
		t.Fatalf("calls %v, bodies %q", seen, bodies)
	}
	refuse["Bearer tok-2"], refuse["Bearer tok-3"] = true, true
	seen = nil
	if st := send(); st != 401 {
		t.Fatalf("status %d, want the second 401", st)
	}
	if fmt.Sprint(seen) != "[Bearer tok-2 Bearer tok-3]" {
		t.Fatalf("calls %v: want one retry, not more", seen)
	}
}

// TestTokenEndpointBounded: an endless answer and a silent token endpoint
// are cut off (maxTokenAnswer, token_timeout), with errors that say so.
func TestTokenEndpointBounded(t *testing.T) {
	huge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"access_token":"`)
		chunk := strings.Repeat("a", 4096)
		for range (maxTokenAnswer / 4096) + 8 {
			fmt.Fprint(w, chunk)
		}
	}))
	defer huge.Close()
	sa, _ := parseServiceAccount(newTestAccount(t, huge.URL).file)
	src := &tokenSource{sa: sa, client: huge.Client(), timeout: 5 * time.Second, now: time.Now}
	if _, err := src.Token(context.Background()); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Fatalf("a huge token answer: %v", err)
	}

	release := make(chan struct{})
	silent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release
	}))
	defer silent.Close()
	defer close(release)
	sa, _ = parseServiceAccount(newTestAccount(t, silent.URL).file)
	src = &tokenSource{sa: sa, client: silent.Client(), timeout: 50 * time.Millisecond, now: time.Now}
	if _, err := src.Token(context.Background()); err == nil || !strings.Contains(err.Error(), "deadline exceeded") {
		t.Fatalf("a silent token endpoint: %v", err)
	}
}
