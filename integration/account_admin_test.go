package integration

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
)

// Administration: the admin API over users, tokens, codes and usage, the
// limits an administrator sets, and the database files that hold the
// accounts.

func TestAccountAdmin(t *testing.T) {
	g := startAccounts(t, "on", 1000)
	admin := loggedIn(t, g, "boss", 0, "admin")
	user := loggedIn(t, g, "worker", 0, "user")
	other := loggedIn(t, g, "peer", 0, "admin")
	rootPW := strings.TrimSpace(g.CLI("user", "passwd", "--username", "root"))
	root := newClient(t, g)
	root.ok(http.MethodPost, "/api/user/login", map[string]string{"username": "root", "password": rootPW})

	var users struct {
		Data []apiUser
		Next string `json:"next_cursor"`
	}
	admin.ok(http.MethodGet, "/api/admin/users", nil).decode(t, &users)
	if len(users.Data) != 4 || users.Data[0].Username != "root" {
		t.Fatalf("users: %+v", users.Data)
	}
	workerID := user.self().ID

	var made apiUser
	admin.ok(http.MethodPost, "/api/admin/users", map[string]any{"username": "hired", "password": "long-enough", "quota": 42}).decode(t, &made)
	if made.Role != "user" || made.Quota != 42 {
		t.Fatalf("created %+v", made)
	}
	admin.do(http.MethodPost, "/api/admin/users", map[string]any{"username": "hired", "password": "long-enough"}).apiErr(t, 400, "invalid_request")
	admin.do(http.MethodPost, "/api/admin/users", map[string]any{"username": "x2", "password": "long-enough", "role": "admin"}).apiErr(t, 403, "role_not_allowed")
	root.do(http.MethodPost, "/api/admin/users", map[string]any{"username": "x3", "password": "long-enough", "role": "root"}).apiErr(t, 403, "role_not_allowed")
	root.ok(http.MethodPost, "/api/admin/users", map[string]any{"username": "deputy", "password": "long-enough", "role": "admin"})

	workerPath := fmt.Sprint("/api/admin/users/", workerID)
	var changed apiUser
	admin.ok(http.MethodPatch, workerPath, map[string]any{"quota_delta": 3_000_000}).decode(t, &changed)
	if changed.Quota != 3_000_000 {
		t.Fatalf("after adjust: %+v", changed)
	}
	admin.do(http.MethodPatch, workerPath, map[string]any{"quota_delta": -3_000_001}).apiErr(t, 400, "invalid_quota")
	admin.do(http.MethodPatch, workerPath, map[string]any{"role": "admin"}).apiErr(t, 403, "role_not_allowed")
	admin.do(http.MethodPatch, workerPath, map[string]any{"status": "sleeping"}).apiErr(t, 400, "invalid_status")
	admin.do(http.MethodPatch, fmt.Sprint("/api/admin/users/", other.self().ID), map[string]any{"status": "disabled"}).apiErr(t, 403, "not_allowed")
	admin.do(http.MethodPatch, fmt.Sprint("/api/admin/users/", admin.self().ID), map[string]any{"status": "disabled"}).apiErr(t, 403, "not_allowed")
	admin.do(http.MethodPatch, "/api/admin/users/1", map[string]any{"quota_delta": 5}).apiErr(t, 403, "not_allowed")
	admin.do(http.MethodPatch, "/api/admin/users/99999", map[string]any{"quota_delta": 5}).apiErr(t, 404, "not_found")
	// an administrator's own balance is root's to change, not theirs
	adminPath := fmt.Sprint("/api/admin/users/", admin.self().ID)
	admin.do(http.MethodPatch, adminPath, map[string]any{"quota_delta": 1_000_000}).apiErr(t, 403, "not_allowed")
	if q := admin.self().Quota; q != 0 {
		t.Fatalf("an administrator credited themself: quota %d", q)
	}
	root.ok(http.MethodPatch, adminPath, map[string]any{"quota_delta": 5})
	root.ok(http.MethodPatch, "/api/admin/users/1", map[string]any{"quota_delta": 5})

	// disabling logs the user out and keeps them out
	admin.ok(http.MethodPatch, workerPath, map[string]any{"status": "disabled"})
	user.do(http.MethodGet, "/api/user/self", nil).apiErr(t, 401, "session_expired")
	newClient(t, g).do(http.MethodPost, "/api/user/login", map[string]string{"username": "worker", "password": "password-worker"}).
		apiErr(t, 401, "invalid_credentials")
	admin.ok(http.MethodPatch, workerPath, map[string]any{"status": "enabled"})
	user.login("worker")

	root.ok(http.MethodPatch, workerPath, map[string]any{"role": "admin"}).decode(t, &changed)
	if changed.Role != "admin" {
		t.Fatalf("root's promotion: %+v", changed)
	}
	root.ok(http.MethodPatch, workerPath, map[string]any{"role": "user"})
	// a role change ends the user's sessions
	user.do(http.MethodGet, "/api/user/self", nil).apiErr(t, 401, "session_expired")
	user.login("worker")

	// codes
	var codes struct {
		Data []struct {
			ID        int64  `json:"id"`
			Code      string `json:"code"`
			Quota     int64  `json:"quota"`
			Status    string `json:"status"`
			ExpiresAt string `json:"expires_at"`
			UsedBy    int64  `json:"used_by"`
		}
		Next string `json:"next_cursor"`
	}
	expires := time.Now().Add(time.Hour).UTC().Truncate(time.Second).Format(time.RFC3339)
	admin.ok(http.MethodPost, "/api/admin/codes", map[string]any{"count": 3, "quota": 1_000, "expires_at": expires}).decode(t, &codes)
	if len(codes.Data) != 3 || codes.Data[0].Quota != 1_000 || codes.Data[0].ExpiresAt != expires || len(codes.Data[0].Code) < 20 {
		t.Fatalf("created codes %+v", codes.Data)
	}
	first, second := codes.Data[0], codes.Data[1]
	admin.do(http.MethodPost, "/api/admin/codes", map[string]any{"count": 1, "quota": 0}).apiErr(t, 400, "invalid_request")
	admin.do(http.MethodPost, "/api/admin/codes", map[string]any{"count": 10001, "quota": 1}).apiErr(t, 400, "invalid_request")
	admin.do(http.MethodPost, "/api/admin/codes", map[string]any{"quota": 1, "expires_at": "2000-01-01T00:00:00Z"}).apiErr(t, 400, "invalid_request")
	admin.ok(http.MethodPatch, fmt.Sprint("/api/admin/codes/", first.ID), map[string]any{"status": "disabled"})
	admin.do(http.MethodPatch, fmt.Sprint("/api/admin/codes/", first.ID), map[string]any{"status": "gone"}).apiErr(t, 400, "invalid_status")
	admin.do(http.MethodPatch, "/api/admin/codes/99999", map[string]any{"status": "disabled"}).apiErr(t, 404, "not_found")
	user.do(http.MethodPost, "/api/user/topup", map[string]string{"key": first.Code}).apiErr(t, 400, "invalid_redemption_code")
	user.ok(http.MethodPost, "/api/user/topup", map[string]string{"key": second.Code})
	admin.ok(http.MethodGet, "/api/admin/codes", nil).decode(t, &codes)
	states := map[int64]string{}
	for _, c := range codes.Data {
		states[c.ID] = fmt.Sprint(c.Status, c.UsedBy != 0)
	}
	if states[first.ID] != "disabledfalse" || states[second.ID] != "enabledtrue" {
		t.Fatalf("code states %v", states)
	}

	// all usage, and one user's
	if s := chatOnce(t, g, g.AddToken("worker"), "w"); s != 200 {
		t.Fatal(s)
	}
	if s := chatOnce(t, g, g.AddToken("peer", "--name", "p"), "p"); s == 0 {
		t.Fatal(s)
	}
	g.WaitUsage("worker", 1)
	g.WaitUsage("peer", 1)
	var all usagePage
	admin.ok(http.MethodGet, "/api/admin/usage", nil).decode(t, &all)
	if len(all.Data) != 2 {
		t.Fatalf("all usage: %+v", all.Data)
	}
	admin.ok(http.MethodGet, fmt.Sprint("/api/admin/usage?user_id=", workerID), nil).decode(t, &all)
	if len(all.Data) != 1 || all.Data[0].UserID != workerID {
		t.Fatalf("worker's usage: %+v", all.Data)
	}
	admin.do(http.MethodGet, "/api/admin/usage?user_id=x", nil).apiErr(t, 400, "invalid_user_id")
}

// TestAccountAdminSetsLimits: an administrator sets a key's and a user's
// rate limits through the account API; they hold on the next request, the
// owner sees them, 0 clears one, and nobody else can set them.
func TestAccountAdminSetsLimits(t *testing.T) {
	g := startAccounts(t, "on", 1000)
	admin := loggedIn(t, g, "boss", 0, "admin")
	user := loggedIn(t, g, "capped", 10_000_000, "user")
	key := g.AddToken("capped", "--name", "first")
	other := g.AddToken("capped", "--name", "second")

	var own struct{ Data []apiToken }
	user.ok(http.MethodGet, "/api/user/tokens", nil).decode(t, &own)
	var firstID int64
	for _, tk := range own.Data {
		if tk.Name == "first" {
			firstID = tk.ID
		}
	}
	if firstID == 0 {
		t.Fatalf("tokens: %+v", own.Data)
	}
	tokenPath := fmt.Sprint("/api/admin/tokens/", firstID)

	// a user cannot lift, or set, limits; bad values are refused
	user.do(http.MethodPatch, tokenPath, map[string]any{"limits": map[string]any{"rpm": 1000}}).apiErr(t, 403, "")
	admin.do(http.MethodPatch, tokenPath, map[string]any{"limits": map[string]any{"rpm": -1}}).apiErr(t, 400, "invalid_limits")
	admin.do(http.MethodPatch, tokenPath, map[string]any{}).apiErr(t, 400, "invalid_request")
	admin.do(http.MethodPatch, "/api/admin/tokens/99999", map[string]any{"limits": map[string]any{"rpm": 1}}).apiErr(t, 404, "not_found")
	rootKey := g.AddToken("root", "--name", "root-key")
	var rootTokens struct{ Data []apiToken }
	rootPW := strings.TrimSpace(g.CLI("user", "passwd", "--username", "root"))
	root := newClient(t, g)
	root.ok(http.MethodPost, "/api/user/login", map[string]string{"username": "root", "password": rootPW})
	root.ok(http.MethodGet, "/api/user/tokens", nil).decode(t, &rootTokens)
	if len(rootTokens.Data) != 1 || rootKey == "" {
		t.Fatalf("root's tokens: %+v", rootTokens.Data)
	}
	admin.do(http.MethodPatch, fmt.Sprint("/api/admin/tokens/", rootTokens.Data[0].ID), map[string]any{"limits": map[string]any{"rpm": 1}}).apiErr(t, 403, "not_allowed")

	var set apiToken
	admin.ok(http.MethodPatch, tokenPath, map[string]any{"limits": map[string]any{"rpm": 2, "tpm": 1_000_000}}).decode(t, &set)
	if set.Limits.RPM != 2 || set.Limits.TPM != 1_000_000 || set.Limits.MaxParallel != 0 {
		t.Fatalf("set limits answer: %+v", set.Limits)
	}
	user.ok(http.MethodGet, "/api/user/tokens", nil).decode(t, &own)
	for _, tk := range own.Data {
		if tk.ID == firstID && tk.Limits.RPM != 2 {
			t.Fatalf("the owner sees %+v", tk.Limits)
		}
	}
	// the cache was told: the very next requests are limited
	for i, want := range []int{200, 200, 429} {
		if s := chatOnce(t, g, key, "x"); s != want {
			t.Fatalf("request %d on a 2 rpm key: %d, want %d", i+1, s, want)
		}
	}
	if s := chatOnce(t, g, other, "x"); s != 200 {
		t.Fatalf("the user's other key is not limited, got %d", s)
	}

	// a user's limit holds over all of their keys
	var u apiUser
	admin.ok(http.MethodPatch, fmt.Sprint("/api/admin/users/", user.self().ID), map[string]any{"limits": map[string]any{"rpm": 3}}).decode(t, &u)
	var withLimits struct {
		Limits struct{ RPM int64 } `json:"limits"`
	}
	user.ok(http.MethodGet, "/api/user/self", nil).decode(t, &withLimits)
	if withLimits.Limits.RPM != 3 {
		t.Fatalf("the user sees limits %+v", withLimits.Limits)
	}
	// counted from when the limit is set, over both keys
	for i, k := range []string{other, other, key} {
		if i == 2 {
			// the first key's own 2 rpm still holds
			if s := chatOnce(t, g, k, "x"); s != 429 {
				t.Fatalf("first key, over its own rpm: %d", s)
			}
			continue
		}
		if s := chatOnce(t, g, k, "x"); s != 200 {
			t.Fatalf("request %d under the user's 3 rpm: %d", i+1, s)
		}
	}
	if s := chatOnce(t, g, other, "x"); s != 200 {
		t.Fatalf("third request under the user's 3 rpm: %d", s)
	}
	if s := chatOnce(t, g, other, "x"); s != 429 {
		t.Fatalf("over the user's 3 rpm: %d", s)
	}
	admin.do(http.MethodPatch, fmt.Sprint("/api/admin/users/", user.self().ID), map[string]any{"limits": map[string]any{"max_parallel": -2}}).apiErr(t, 400, "invalid_limits")
	admin.ok(http.MethodPatch, fmt.Sprint("/api/admin/users/", user.self().ID), map[string]any{"limits": map[string]any{"rpm": 0}})
	if s := chatOnce(t, g, other, "x"); s != 200 {
		t.Fatalf("after clearing the user's rpm: %d", s)
	}
}

// TestAccountDatabaseFilesPrivate starts the gateway on a database path
// whose directory does not exist yet: the directory is made 0700, and the
// database and its WAL files, which hold password and key hashes and
// redemption codes, 0600 whatever the umask lets through.
func TestAccountDatabaseFilesPrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "fresh", "data")
	db := filepath.Join(dir, "gateway.db")
	g := gatewaytest.Start(t, accountConfig("off", 1000, 1000).withDatabase(db).String(), nil)
	// a write, so the WAL and its index are in use
	loggedIn(t, g, "owner", 0, "user")

	info, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if perm := info.Mode().Perm(); perm != 0o700 {
		t.Errorf("database directory is %v, want -rwx------", perm)
	}
	for _, name := range []string{"gateway.db", "gateway.db-wal", "gateway.db-shm", "gateway.db-journal"} {
		info, err := os.Stat(filepath.Join(dir, name))
		if errors.Is(err, fs.ErrNotExist) && name == "gateway.db-journal" {
			continue // WAL mode needs no rollback journal; if one appears, it must be private too
		}
		if err != nil {
			t.Fatal(err)
		}
		if perm := info.Mode().Perm(); perm != 0o600 {
			t.Errorf("%s is %v, want -rw-------", name, perm)
		}
	}
}

// TestAccountDatabaseFilesMadePrivate: a database an older gateway left
// readable by everyone (0644, with its WAL) is made private when the
// gateway opens it.
func TestAccountDatabaseFilesMadePrivate(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "gateway.db")
	g := gatewaytest.Start(t, accountConfig("off", 1000, 1000).withDatabase(db).String(), nil)
	loggedIn(t, g, "owner", 0, "user")
	g.Kill() // the WAL and its index stay behind, as after a crash
	for _, name := range []string{"gateway.db", "gateway.db-wal", "gateway.db-shm"} {
		if err := os.Chmod(filepath.Join(dir, name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	g.Restart()
	newClient(t, g).login("owner")
	for _, name := range []string{"gateway.db", "gateway.db-wal", "gateway.db-shm"} {
		info, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if perm := info.Mode().Perm(); perm != 0o600 {
			t.Errorf("%s is %v after the gateway opened it, want -rw-------", name, perm)
		}
	}
}
