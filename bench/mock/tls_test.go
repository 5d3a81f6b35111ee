package mock

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/caddy-model-gateway/gateway/bench/load"
)

// The TLS listener serves the mock over HTTP/2 to a client that trusts
// only the certificate it wrote, as Caddy does through SSL_CERT_FILE.
func TestListenTLSServesHTTP2(t *testing.T) {
	certFile := filepath.Join(t.TempDir(), "cert.pem")
	ln, err := ListenTLS("127.0.0.1:0", certFile)
	if err != nil {
		t.Fatal(err)
	}
	srv := NewServer(New(0))
	go srv.Serve(ln)
	defer srv.Close()

	pem, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		t.Fatalf("no certificate in %s", certFile)
	}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, ForceAttemptHTTP2: true}}
	resp, err := c.Post("https://"+ln.Addr().String()+"/v1/chat/completions", "application/json", bytes.NewReader(load.ChatBody))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || resp.ProtoMajor != 2 || !bytes.Contains(body, []byte(`"chat.completion"`)) {
		t.Fatalf("status %d over %s: %.200s", resp.StatusCode, resp.Proto, body)
	}
}
