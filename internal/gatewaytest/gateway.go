// Package gatewaytest starts the real gateway binary from a Caddyfile for
// integration tests, and gives them fake upstreams that speak each vendor's
// wire format. Tests talk to the gateway over loopback with the vendors'
// official SDKs.
package gatewaytest

import (
	"bytes"
	"database/sql"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/caddy-model-gateway/gateway/store/sqlite" // to inspect the gateway's database
)

var (
	buildOnce  sync.Once
	gatewayBin string
	buildErr   error
)

// Binary returns the gateway binary: $GATEWAY_TEST_BINARY when set (make
// test builds it first), otherwise one built once for this test process.
func Binary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		if b := os.Getenv("GATEWAY_TEST_BINARY"); b != "" {
			gatewayBin = b
			return
		}
		dir, err := os.MkdirTemp("", "gatewaytest")
		if err != nil {
			buildErr = err
			return
		}
		gatewayBin = filepath.Join(dir, "caddy")
		cmd := exec.Command("go", "build", "-o", gatewayBin, "./cmd/caddy")
		cmd.Dir = repoRoot()
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return gatewayBin
}

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// FreePort returns a loopback port nobody listens on, and none it
// returned before in this process or another live test process: the
// kernel may hand a port just closed out again at once, and Caddy
// listens with SO_REUSEPORT, so two gateways given the same port (their
// sites or admin endpoints, even from two test binaries that make test
// runs side by side) both bind it and the kernel shares the connections
// between them: a request then reaches the other one (a 404 from its
// admin API, a 401 for a key it does not know).
func FreePort(t testing.TB) int {
	t.Helper()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		portsMu.Lock()
		taken := portsGiven[port]
		portsGiven[port] = true
		portsMu.Unlock()
		if !taken && claimPort(port) {
			return port
		}
	}
	t.Fatal("no loopback port free that was not handed out before")
	return 0
}

// claimPort claims port for this process among test processes on the
// machine: a file named for it in a shared directory holds the claimant's
// pid, and a claim whose process is gone is taken over. A directory that
// cannot be written claims nothing and refuses nothing.
func claimPort(port int) bool {
	dir := filepath.Join(os.TempDir(), "gatewaytest-ports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return true
	}
	path := filepath.Join(dir, strconv.Itoa(port))
	pid := []byte(strconv.Itoa(os.Getpid()))
	for range 2 {
		f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err == nil {
			_, _ = f.Write(pid)
			_ = f.Close()
			return true
		}
		if !os.IsExist(err) {
			return true
		}
		held, _ := os.ReadFile(path)
		other, perr := strconv.Atoi(string(held))
		if perr == nil && (other == os.Getpid() || syscall.Kill(other, 0) == nil) {
			return false // a live process holds it (or one still writing it)
		}
		if perr != nil && len(held) == 0 {
			return false // being written this moment
		}
		_ = os.Remove(path) // its process is gone: take it over
	}
	return false
}

var (
	portsMu    sync.Mutex
	portsGiven = map[int]bool{}
)

// Gateway is a running gateway process.
type Gateway struct {
	t      testing.TB
	URL    string // http://127.0.0.1:port
	Port   int
	Admin  string // admin endpoint address
	Dir    string // scratch directory: Caddyfile, database
	DBPath string
	// DSN is the PostgreSQL database the gateway runs on, as configured
	// ({env.X} placeholders and all); empty on SQLite
	DSN     string
	Config  string // path of the Caddyfile
	cmd     *exec.Cmd
	env     []string // added to the process's environment
	logs    *syncBuffer
	stopped bool
	// mapped: a PostgreSQL run maps each `database sqlite <path>` line of
	// the Caddyfile (at start and at every reload) to a database of its own
	mapped bool
}

// Vars are substituted into a Caddyfile template: {{PORT}}, {{ADMIN}},
// {{DB}}, plus any the test adds. A PORT var picks the port to wait on, for
// a Caddyfile that takes its address from the environment.
type Vars map[string]string

// Start writes the Caddyfile (after substitution) and runs the gateway
// until the test ends.
func Start(t testing.TB, caddyfile string, vars Vars) *Gateway {
	t.Helper()
	return startGateway(t, caddyfile, vars, "", nil, "")
}

// start is Start with the database at dbPath ("": in the scratch
// directory) and env added to the process's environment.
func start(t testing.TB, caddyfile string, vars Vars, dbPath string, env []string) *Gateway {
	t.Helper()
	return startGateway(t, caddyfile, vars, dbPath, env, "")
}

// startGateway is start on the PostgreSQL database at dsn when it is not
// empty; with dsn empty, a PostgreSQL run (DatabaseEnv) maps the
// Caddyfile's SQLite database to one.
func startGateway(t testing.TB, caddyfile string, vars Vars, dbPath string, env []string, dsn string) *Gateway {
	t.Helper()
	skipSQLiteOnly(t)
	dir := t.TempDir()
	if dbPath == "" {
		dbPath = filepath.Join(dir, "gateway.db")
	}
	g := &Gateway{t: t, Dir: dir, DBPath: dbPath, Config: filepath.Join(dir, "Caddyfile"), env: env,
		DSN: dsn, mapped: dsn == "" && OnPostgres()}
	g.logs = &syncBuffer{}
	recordLogs(t.Name(), g.logs)
	g.listen(caddyfile, vars)
	t.Cleanup(func() {
		g.Stop()
		// a binary built with -race reports races here
		if strings.Contains(g.Logs(), "DATA RACE") {
			t.Errorf("the gateway reported a data race")
		}
		if t.Failed() {
			t.Logf("gateway logs%s", logsTail(g.Logs()))
		}
	})
	// FreePort's ports are free when it returns, not when the gateway
	// binds them: another process on the machine (other test processes
	// run beside this one) may take one first; the gateway then cannot
	// start, and starts again on other ports
	for attempt := 1; !g.ready() && attempt < 3; attempt++ {
		if _, fixed := vars["PORT"]; fixed || !strings.Contains(g.Logs(), "address already in use") {
			break
		}
		g.Stop()
		t.Logf("a port the gateway was given was taken before it bound it: starting it on others")
		g.listen(caddyfile, vars)
	}
	g.waitReady()
	return g
}

// listen picks the gateway's ports, writes its configuration and runs it.
func (g *Gateway) listen(caddyfile string, vars Vars) {
	g.Port = FreePort(g.t)
	if p, ok := vars["PORT"]; ok {
		fmt.Sscan(p, &g.Port)
	}
	g.Admin = fmt.Sprintf("127.0.0.1:%d", FreePort(g.t))
	g.URL = fmt.Sprintf("http://127.0.0.1:%d", g.Port)
	g.writeConfig(caddyfile, vars)
	g.run()
}

func (g *Gateway) run() {
	g.cmd = exec.Command(Binary(g.t), "run", "--config", g.Config, "--adapter", "caddyfile")
	g.cmd.Dir = g.Dir
	g.cmd.Env = g.environ()
	g.cmd.Stdout, g.cmd.Stderr = g.logs, g.logs
	if err := g.cmd.Start(); err != nil {
		g.t.Fatal(err)
	}
	g.stopped = false
}

// Kill ends the gateway with SIGKILL: no drain, no cleanup.
func (g *Gateway) Kill() {
	g.t.Helper()
	if g.stopped {
		return
	}
	g.stopped = true
	_ = g.cmd.Process.Kill()
	_ = g.cmd.Wait()
}

// Restart starts the gateway again, with the same configuration and
// directory, after Stop or Kill.
func (g *Gateway) Restart() {
	g.t.Helper()
	if !g.stopped {
		g.Stop()
	}
	g.run()
	g.waitReady()
}

// Signal sends sig to the gateway process.
func (g *Gateway) Signal(sig os.Signal) {
	_ = g.cmd.Process.Signal(sig)
}

// Wait waits for the process to exit (after a signal) and marks it stopped.
func (g *Gateway) Wait() {
	_ = g.cmd.Wait()
	g.stopped = true
}

// LockDatabase takes SQLite's write lock on the gateway's database from a
// connection of the test process (BEGIN IMMEDIATE), as another program
// holding a long transaction would: the gateway's writes fail busy until
// the returned function releases it.
func (g *Gateway) LockDatabase(path string) (unlock func()) {
	g.t.Helper()
	if OnPostgres() {
		// a skip here would come after the test started its load
		g.t.Fatalf("LockDatabase holds SQLite's write lock: name %s in SQLiteOnly, so that a PostgreSQL run skips it before it starts", g.t.Name())
	}
	db, err := sql.Open("sqlite3", "file:"+path+"?_txlock=immediate&_busy_timeout=10000")
	if err != nil {
		g.t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	tx, err := db.Begin()
	if err != nil {
		g.t.Fatal(err)
	}
	var once sync.Once
	unlock = func() {
		once.Do(func() {
			_ = tx.Rollback()
			_ = db.Close()
		})
	}
	g.t.Cleanup(unlock)
	return unlock
}

// environ is the process's environment: the test's, Caddy's data
// directory (where a gateway on PostgreSQL keeps its usage journal) in the
// scratch directory so that instances never share a journal, the
// Caddyfile.example's database on a PostgreSQL run, then the gateway's own.
func (g *Gateway) environ() []string {
	env := os.Environ()
	if os.Getenv("XDG_DATA_HOME") == "" {
		env = append(env, "XDG_DATA_HOME="+filepath.Join(g.Dir, "caddy-data"))
	}
	env = append(env, postgresEnv(g.t)...)
	return append(env, g.env...)
}

func (g *Gateway) writeConfig(caddyfile string, vars Vars) {
	// the test's vars first, so that one may name {{DB}} or {{PORT}}
	var r []string
	for k, v := range vars {
		r = append(r, "{{"+k+"}}", v)
	}
	body := strings.NewReplacer(r...).Replace(caddyfile)
	body = strings.NewReplacer("{{PORT}}", fmt.Sprint(g.Port), "{{ADMIN}}", g.Admin, "{{DB}}", g.DBPath).Replace(body)
	switch {
	case g.mapped:
		var dsn string
		body, dsn = onPostgres(g.t, body, "")
		if g.DSN == "" {
			g.DSN = dsn // the first configuration's database is the one Store inspects
		}
	case g.DSN != "":
		body, _ = onPostgres(g.t, body, g.DSN)
	}
	if err := os.WriteFile(g.Config, []byte(body), 0o600); err != nil {
		g.t.Fatal(err)
	}
}

func (g *Gateway) waitReady() {
	if !g.ready() {
		g.t.Fatalf("gateway did not start listening on port %d:\n%s", g.Port, g.Logs())
	}
}

// ready waits (30s at most) for the gateway process to listen on its port
// and reports whether it does. A dial alone is not enough: it succeeds
// whoever listens there, and a test would then talk to another process
// that took the port before the gateway could. It looks every 5ms (two
// small /proc reads): a start takes about 100ms, and a coarser step added
// half a step to each of the suite's several hundred starts and restarts.
func (g *Gateway) ready() bool {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && !g.exited() {
		if listensOn(g.cmd.Process.Pid, g.Port) {
			return true
		}
		time.Sleep(5 * time.Millisecond)
	}
	return false
}

// exited reports whether the process has ended (it is a zombie until
// Stop or Wait reaps it).
func (g *Gateway) exited() bool {
	if g.cmd.ProcessState != nil {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", g.cmd.Process.Pid))
	if err != nil {
		return true
	}
	// pid (comm) state ...: comm may hold spaces and parentheses
	rest := string(b[bytes.LastIndexByte(b, ')')+1:])
	return strings.HasPrefix(strings.TrimSpace(rest), "Z")
}

// listensOn reports whether process pid holds a TCP socket listening on
// port (IPv4 or IPv6, any address): the kernel's table of listening
// sockets names their inodes, the process's descriptors name its own.
func listensOn(pid, port int) bool {
	inodes := map[string]bool{}
	suffix := fmt.Sprintf(":%04X", port)
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(table)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			f := strings.Fields(line)
			// sl local_address rem_address st ... uid timeout inode
			if len(f) > 9 && strings.HasSuffix(f[1], suffix) && f[3] == "0A" { // TCP_LISTEN
				inodes["socket:["+f[9]+"]"] = true
			}
		}
	}
	if len(inodes) == 0 {
		return false
	}
	dir := fmt.Sprintf("/proc/%d/fd", pid)
	fds, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, fd := range fds {
		if link, err := os.Readlink(filepath.Join(dir, fd.Name())); err == nil && inodes[link] {
			return true
		}
	}
	return false
}

// PeakRSS is the most memory the gateway process has held resident so
// far (VmHWM), in bytes.
func (g *Gateway) PeakRSS() int64 {
	g.t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", g.cmd.Process.Pid))
	if err != nil {
		g.t.Fatalf("reading the gateway's memory: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb int64
			fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), &kb)
			return kb << 10
		}
	}
	g.t.Fatal("no VmHWM in /proc/<pid>/status")
	return 0
}

// Pid is the gateway process's id (tasks' lease owners name it).
func (g *Gateway) Pid() int { return g.cmd.Process.Pid }

// Logs returns everything the process printed so far.
func (g *Gateway) Logs() string { return g.logs.String() }

// Stop stops the gateway gracefully (SIGTERM) and waits for it to exit.
func (g *Gateway) Stop() {
	if g.stopped {
		return
	}
	g.stopped = true
	_ = g.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = g.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = g.cmd.Process.Kill()
		<-done
		g.t.Errorf("gateway did not stop within 30s of SIGTERM")
	}
}

// Reload replaces the configuration with `caddy reload`.
func (g *Gateway) Reload(caddyfile string, vars Vars) {
	g.t.Helper()
	if out, err := g.TryReload(caddyfile, vars); err != nil {
		g.t.Fatalf("caddy reload: %v\n%s", err, out)
	}
}

// TryReload is Reload for a configuration that may be refused: it returns
// what `caddy reload` printed and its error.
func (g *Gateway) TryReload(caddyfile string, vars Vars) (string, error) {
	g.t.Helper()
	return g.TryReloadWith(caddyfile, vars)
}

// TryReloadWith is TryReload with more arguments to `caddy reload`, such
// as --force (a reload of an unchanged configuration, which Caddy
// otherwise skips).
func (g *Gateway) TryReloadWith(caddyfile string, vars Vars, args ...string) (string, error) {
	g.t.Helper()
	g.writeConfig(caddyfile, vars)
	cmd := exec.Command(Binary(g.t), append([]string{"reload", "--config", g.Config, "--adapter", "caddyfile", "--address", g.Admin}, args...)...)
	cmd.Env = g.environ()
	out, err := cmd.CombinedOutput()
	dropIdleConnections()
	return string(out), err
}

// dropIdleConnections closes the default transport's idle connections
// (the SDKs' default client uses it) after a reload: the old server closes
// its keep-alive connections as it shuts down, and a request sent on one
// just before its close arrives is reset, which a client without retries
// reports as the request's error (seen in CI: TestAffinityAcrossReload).
// What a reload does to requests in flight is what tests under load check.
func dropIdleConnections() {
	http.DefaultClient.CloseIdleConnections()
}

// ForceReload runs `caddy reload --force` with the Caddyfile as it is:
// what an operator runs after changing only a file a {file.*} placeholder
// reads (Caddy does not reload a configuration whose text is unchanged).
func (g *Gateway) ForceReload() {
	g.t.Helper()
	cmd := exec.Command(Binary(g.t), "reload", "--force", "--config", g.Config, "--adapter", "caddyfile", "--address", g.Admin)
	cmd.Env = g.environ()
	out, err := cmd.CombinedOutput()
	dropIdleConnections()
	if err != nil {
		g.t.Fatalf("caddy reload --force: %v\n%s", err, out)
	}
}

// CLI runs `caddy gateway <args> --config <Caddyfile>` and returns stdout;
// it fails the test if the command fails.
func (g *Gateway) CLI(args ...string) string {
	g.t.Helper()
	out, errOut, err := g.TryCLI(args...)
	if err != nil {
		g.t.Fatalf("caddy gateway %s: %v\n%s", strings.Join(args, " "), err, errOut)
	}
	return out
}

// TryCLI runs a gateway subcommand and returns stdout, stderr and the error.
func (g *Gateway) TryCLI(args ...string) (string, string, error) {
	cmd := exec.Command(Binary(g.t), append(append([]string{"gateway"}, args...), "--config", g.Config)...)
	cmd.Dir = g.Dir
	cmd.Env = g.environ()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// AddUser creates a user with a quota (units) and returns a new key for it.
func (g *Gateway) AddUser(name string, quota int64, tokenArgs ...string) string {
	g.t.Helper()
	g.CLI("user", "add", "--username", name, "--password", "password-"+name, "--quota", fmt.Sprint(quota))
	return g.AddToken(name, tokenArgs...)
}

// AddToken creates a key for an existing user.
func (g *Gateway) AddToken(user string, args ...string) string {
	g.t.Helper()
	key := strings.TrimSpace(g.CLI(append([]string{"token", "add", "--username", user}, args...)...))
	Secret(key)
	return key
}

// Get sends a GET with a Bearer key.
func (g *Gateway) Do(method, path, key string, body []byte, header http.Header) (*http.Response, []byte) {
	g.t.Helper()
	req, err := http.NewRequest(method, g.URL+path, bytes.NewReader(body))
	if err != nil {
		g.t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if body != nil && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		g.t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return resp, b.Bytes()
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Metrics scrapes the admin endpoint's /metrics and returns every sample,
// keyed by its series as exposed: name{label="value",...} with the labels
// sorted by name, as the text format writes them.
func (g *Gateway) Metrics() map[string]float64 {
	g.t.Helper()
	resp, err := http.Get("http://" + g.Admin + "/metrics")
	if err != nil {
		g.t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		g.t.Fatalf("GET /metrics: %s", resp.Status)
	}
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	out := map[string]float64{}
	for _, line := range strings.Split(b.String(), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(line[i+1:], &v); err != nil {
			continue
		}
		out[line[:i]] = v
	}
	return out
}
