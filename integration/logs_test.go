package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
)

// waitLog waits until logs() holds want, and returns what it holds.
func waitLog(t *testing.T, logs func() string, want string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		text := logs()
		if strings.Contains(text, want) {
			return text
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the log:\n%s", want, text)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestExampleLogHidesRealtimeSubprotocolKey: a browser can send its key
// only as the WebSocket subprotocol openai-insecure-api-key.<key>; the
// example's access log must not hold it.
func TestExampleLogHidesRealtimeSubprotocolKey(t *testing.T) {
	example, err := os.ReadFile(filepath.Join("..", "Caddyfile.example"))
	if err != nil {
		t.Fatal(err)
	}
	fake := gatewaytest.NewFakeOpenAI(t, "sk-example-realtime-upstream")
	fake.SetRealtimeUsage(realtimeTurn)
	port := gatewaytest.FreePort(t)
	t.Setenv("GATEWAY_ADDR", fmt.Sprintf(":%d", port))
	t.Setenv("GATEWAY_ADMIN", fmt.Sprintf("127.0.0.1:%d", gatewaytest.FreePort(t)))
	t.Setenv("GATEWAY_DB", filepath.Join(t.TempDir(), "gateway.db"))
	t.Setenv("OPENAI_BASE_URL", fake.BaseURL())
	t.Setenv("OPENAI_API_KEY", "sk-example-realtime-upstream")
	gw := gatewaytest.Start(t, string(example), gatewaytest.Vars{"PORT": fmt.Sprint(port)})
	gw.DBPath = os.Getenv("GATEWAY_DB")
	key := gw.AddUser("browser", 5_000_000)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, fmt.Sprintf("ws://127.0.0.1:%d/v1/realtime?model=%s", port, realtimeModel), &websocket.DialOptions{
		Subprotocols: []string{"realtime", "openai-insecure-api-key." + key, "openai-beta.realtime-v1"}})
	if err != nil {
		t.Fatal(err)
	}
	if c.Subprotocol() != "realtime" {
		t.Fatalf("negotiated %q, want realtime", c.Subprotocol())
	}
	c.Close(websocket.StatusNormalClosure, "")

	logs := waitLog(t, gw.Logs, `"uri":"/v1/realtime?model=`+realtimeModel)
	if strings.Contains(logs, key) {
		t.Fatalf("the access log holds the key sent as a subprotocol:\n%s", logs)
	}
	// the other subprotocols are still there to debug a negotiation
	if !strings.Contains(logs, "openai-beta.realtime-v1") {
		t.Fatalf("the access log lost the request's other subprotocols:\n%s", logs)
	}
}
