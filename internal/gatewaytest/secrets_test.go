package gatewaytest

import (
	"strings"
	"testing"
)

// TestLeakedSecretsFinds: the suite-wide check finds a recorded key in a
// recorded log, and names the line.
func TestLeakedSecretsFinds(t *testing.T) {
	buf := &syncBuffer{}
	buf.Write([]byte(`{"level":"info","msg":"fine"}` + "\n" + `{"level":"error","msg":"oops","key":"sk-canary-123456"}` + "\n"))
	Secret("sk-canary-123456")
	recordLogs(t.Name(), buf)
	leaks := LeakedSecrets()
	if len(leaks) != 1 || !strings.Contains(leaks[0], `"msg":"oops"`) || strings.Contains(leaks[0], "fine") {
		t.Fatalf("leaks = %q", leaks)
	}
	// forget the canary, so the package's own check stays clean
	journal.mu.Lock()
	journal.logs = journal.logs[:len(journal.logs)-1]
	journal.mu.Unlock()
}
