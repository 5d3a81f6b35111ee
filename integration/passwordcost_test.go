package integration

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"github.com/caddy-model-gateway/gateway/account"
	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
)

// TestPasswordCost: GATEWAY_PASSWORD_COST sets the bcrypt cost of the
// passwords a gateway and its commands hash (the test harness sets the
// lowest for its hundreds of gateways); the gateway warns of a cost below
// the default at start, a login checks a hash at the cost it was made
// with, and a value that is no bcrypt cost stops the command, naming the
// variable. TestExampleRunsWithoutKeys checks the default cost of a run
// without it.
func TestPasswordCost(t *testing.T) {
	t.Setenv(account.PasswordCostEnv, "5")
	g := gatewaytest.Start(t, accountConfig("off", 1000, 1000).String(), nil)
	createUser(g, "pat", 0, "user")
	for _, name := range []string{"root", "pat"} {
		if cost, err := bcrypt.Cost([]byte(g.User(name).PasswordHash)); err != nil || cost != 5 {
			t.Errorf("%s's password hash: cost %d, %v; want 5", name, cost, err)
		}
	}
	waitLog(t, g.Logs, fmt.Sprintf("bcrypt cost 5, below the default %d (%s)", bcrypt.DefaultCost, account.PasswordCostEnv))
	newClient(t, g).login("pat")
	// a hash made at another cost is checked at its own
	t.Setenv(account.PasswordCostEnv, "6")
	g.CLI("user", "passwd", "--username", "pat", "--password", "password-pat")
	if cost, _ := bcrypt.Cost([]byte(g.User("pat").PasswordHash)); cost != 6 {
		t.Errorf("pat's new hash costs %d, want 6", cost)
	}
	newClient(t, g).login("pat")
	newClient(t, g).do(http.MethodPost, "/api/user/login", map[string]string{"username": "pat", "password": "password-nope"}).apiErr(t, 401, "")

	t.Setenv(account.PasswordCostEnv, "3")
	_, errOut, err := g.TryCLI("user", "add", "--username", "quinn", "--password", "password-quinn")
	if err == nil || !strings.Contains(errOut, account.PasswordCostEnv+`="3"`) {
		t.Fatalf("user add at cost 3: %v, %s; want it refused naming %s", err, errOut, account.PasswordCostEnv)
	}
}
