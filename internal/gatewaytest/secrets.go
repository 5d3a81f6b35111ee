package gatewaytest

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/caddy-model-gateway/gateway/account"
)

// The harness remembers every key a test issued (AddToken) or configured
// (the fakes' upstream keys, and any passed to Secret), and everything
// every gateway process printed, so that one check at the end of a test
// binary can prove that no key reached any log line.
var journal struct {
	mu      sync.Mutex
	secrets map[string]bool
	logs    []gatewayLog
}

type gatewayLog struct {
	test string
	logs *syncBuffer
}

// Secret records a key that must never appear in a gateway's log.
func Secret(key string) {
	if len(key) < 6 {
		return // too short to search for without false alarms
	}
	journal.mu.Lock()
	defer journal.mu.Unlock()
	if journal.secrets == nil {
		journal.secrets = map[string]bool{}
	}
	journal.secrets[key] = true
}

func recordLogs(test string, logs *syncBuffer) {
	journal.mu.Lock()
	defer journal.mu.Unlock()
	journal.logs = append(journal.logs, gatewayLog{test: test, logs: logs})
}

// LeakedSecrets searches every log of every gateway started so far for
// every recorded key, and describes each find.
func LeakedSecrets() []string {
	journal.mu.Lock()
	defer journal.mu.Unlock()
	var out []string
	for _, l := range journal.logs {
		text := l.logs.String()
		for key := range journal.secrets {
			if i := strings.Index(text, key); i >= 0 {
				start := max(0, strings.LastIndexByte(text[:i], '\n')+1)
				end := len(text)
				if j := strings.IndexByte(text[i:], '\n'); j >= 0 {
					end = i + j
				}
				out = append(out, fmt.Sprintf("%s: key %.12s... in the log line: %s", l.test, key, text[start:end]))
			}
		}
	}
	return out
}

// testCost is the bcrypt cost of the passwords a test run's gateways hash.
const testCost = bcrypt.MinCost

// Main runs a package's tests, then fails the run if any gateway's log
// holds a key the tests issued or configured. Use it as TestMain:
//
//	func TestMain(m *testing.M) { gatewaytest.Main(m) }
//
// The gateways and commands it starts hash passwords at bcrypt's lowest
// cost (testCost) unless the environment sets one: a run starts hundreds,
// each hashing a root user's password, and at the default cost bcrypt was
// some 8 % of the run's busy CPU. A test of the default sets it empty.
func Main(m *testing.M) {
	if _, ok := os.LookupEnv(account.PasswordCostEnv); !ok {
		os.Setenv(account.PasswordCostEnv, strconv.Itoa(testCost))
	}
	code := m.Run()
	if err := closeCluster(); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: stopping the tests' PostgreSQL cluster: %v\n", err)
		code = 1
	}
	journal.mu.Lock()
	n, k := len(journal.logs), len(journal.secrets)
	journal.mu.Unlock()
	if leaks := LeakedSecrets(); len(leaks) > 0 {
		fmt.Fprintf(os.Stderr, "FAIL: keys reached the gateway's logs:\n%s\n", strings.Join(leaks, "\n"))
		code = 1
	} else if testing.Verbose() {
		fmt.Fprintf(os.Stderr, "no key of %d found in the logs of %d gateways\n", k, n)
	}
	os.Exit(code)
}
