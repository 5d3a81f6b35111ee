// Package pgtest starts a throwaway PostgreSQL cluster for tests: initdb in
// a temporary directory, a server on a free loopback port with fsync off, a
// fresh database per test, and everything removed when the tests end. It
// never connects to a server it did not start: readiness is checked through
// the Unix socket in the cluster's own directory.
//
// The binaries come from Debian's postgresql package
// (/usr/lib/postgresql/<version>/bin); `make test-deps` installs it. When
// they are missing, Start fails (never skips): a skipped test would hide the
// missing install step.
//
// PostgreSQL refuses to run as root, so as root the cluster's directory is
// given to the unprivileged postgres user and initdb and the server run with
// that user's credentials. The server is killed when the test process dies,
// so a crashed test leaves no server behind.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Cluster is a running throwaway server.
type Cluster struct {
	dir    string // owns data/, the socket and server.log
	bin    string
	cred   *syscall.Credential
	port   int
	cmd    *exec.Cmd
	exited chan struct{}
	dbs    atomic.Int64
}

// Start starts a cluster of the test's own, stopped when the test ends,
// and returns the DSN of a fresh database in it. Tests that need many
// databases share one cluster instead: New in TestMain, then Database.
func Start(t testing.TB) string {
	t.Helper()
	c, err := New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("pgtest: %v", err)
		}
	})
	return c.Database(t)
}

// New initialises and starts a cluster. Close stops it and removes its files.
func New() (*Cluster, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	cred, err := credential()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("pgtest: give %s to the postgres user: %w", dir, err)
		}
	}
	c := &Cluster{dir: dir, bin: bin, cred: cred}
	if err := c.initdb(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	// The port is free when picked but could be taken before the server
	// binds it; the server then exits and another port is tried.
	for attempt := 0; ; attempt++ {
		port, perr := freePort()
		if perr != nil {
			os.RemoveAll(dir)
			return nil, perr
		}
		err = c.start(port)
		if err == nil {
			return c, nil
		}
		if attempt == 2 || !errors.Is(err, errPortTaken) {
			os.RemoveAll(dir)
			return nil, err
		}
	}
}

// binGlob is where Debian's postgresql package puts each version's
// binaries (not on PATH).
const binGlob = "/usr/lib/postgresql/*/bin"

// binDir finds the newest installed PostgreSQL's binaries.
func binDir() (string, error) { return binDirIn(binGlob) }

func binDirIn(glob string) (string, error) {
	dirs, _ := filepath.Glob(glob)
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", fmt.Errorf("pgtest: no PostgreSQL server binaries in %s; "+
		"run `make test-deps` to install Debian's postgresql package", glob)
}

func version(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

// credential is the postgres user's when running as root (PostgreSQL
// refuses root), nil otherwise.
func credential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("pgtest: running as root needs the postgres user, which the postgresql package creates (`make test-deps`): %w", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("pgtest: postgres user: %w", err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func (c *Cluster) initdb() error {
	cmd := exec.Command(filepath.Join(c.bin, "initdb"), "-D", filepath.Join(c.dir, "data"),
		"-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	cmd.Dir = c.dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pgtest: initdb: %w\n%s", err, out)
	}
	return nil
}

func (c *Cluster) start(port int) error {
	logPath := filepath.Join(c.dir, "server.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o666)
	if err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	defer logFile.Close()
	cmd := exec.Command(filepath.Join(c.bin, "postgres"), "-D", filepath.Join(c.dir, "data"),
		"-p", strconv.Itoa(port),
		"-c", "listen_addresses=127.0.0.1",
		"-c", "unix_socket_directories="+c.dir,
		// throwaway data: nothing needs to survive a crash
		"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "max_connections=200")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("pgtest: start postgres: %w", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	c.port, c.cmd, c.exited = port, cmd, exited

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		select {
		case <-exited:
			out, _ := os.ReadFile(logPath)
			if strings.Contains(string(out), "could not bind") || strings.Contains(string(out), "could not create any TCP/IP sockets") {
				return fmt.Errorf("pgtest: port %d: %w", port, errPortTaken)
			}
			return fmt.Errorf("pgtest: postgres exited while starting:\n%s", out)
		case <-ctx.Done():
			c.Close()
			out, _ := os.ReadFile(logPath)
			return fmt.Errorf("pgtest: postgres did not accept connections within a minute:\n%s", out)
		case <-time.After(50 * time.Millisecond):
		}
		// the socket in the cluster's own directory: never another server
		conn, err := pgx.Connect(ctx, c.socketDSN("postgres"))
		if err == nil {
			conn.Close(ctx)
			return nil
		}
	}
}

// errPortTaken is a port that was free when picked and taken before the
// server bound it.
var errPortTaken = errors.New("the port was taken before the server bound it")

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgtest: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (c *Cluster) socketDSN(db string) string {
	return fmt.Sprintf("host=%s port=%d user=postgres dbname=%s sslmode=disable", c.dir, c.port, db)
}

// DSN is the address of database db over loopback TCP, as a gateway
// would be configured.
func (c *Cluster) DSN(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.port, db)
}

// Database creates a fresh, empty database, dropped when the test ends
// (after the test's own cleanups, which close its connections), and
// returns its DSN.
func (c *Cluster) Database(t testing.TB) string {
	t.Helper()
	return c.create(t, "")
}

// DatabaseFrom is Database made as a copy of the template database
// Template made.
func (c *Cluster) DatabaseFrom(t testing.TB, template string) string {
	t.Helper()
	return c.create(t, template)
}

// Template makes database name, runs prepare on it (a schema's
// migrations, say) and keeps it as a template for DatabaseFrom: copying
// it is cheaper than preparing each database again. It takes no
// connections once made, so that none blocks a copy.
func (c *Cluster) Template(name string, prepare func(dsn string) error) error {
	if err := c.admin(fmt.Sprintf(`CREATE DATABASE %s`, name)); err != nil {
		return fmt.Errorf("pgtest: create template %s: %w", name, err)
	}
	if err := prepare(c.DSN(name)); err != nil {
		return fmt.Errorf("pgtest: prepare template %s: %w", name, err)
	}
	if err := c.admin(fmt.Sprintf(`ALTER DATABASE %s WITH IS_TEMPLATE true ALLOW_CONNECTIONS false`, name)); err != nil {
		return fmt.Errorf("pgtest: keep %s as a template: %w", name, err)
	}
	return nil
}

func (c *Cluster) create(t testing.TB, template string) string {
	t.Helper()
	name := fmt.Sprintf("test_%d", c.dbs.Add(1))
	sql := `CREATE DATABASE ` + name
	if template != "" {
		sql += ` TEMPLATE ` + template
	}
	if err := c.admin(sql); err != nil {
		t.Fatalf("pgtest: create database: %v", err)
	}
	t.Cleanup(func() {
		select {
		case <-c.exited:
			return // the cluster is gone, and its files with it
		default:
		}
		if err := c.admin(fmt.Sprintf(`DROP DATABASE %s WITH (FORCE)`, name)); err != nil {
			t.Errorf("pgtest: drop database: %v", err)
		}
	})
	return c.DSN(name)
}

func (c *Cluster) admin(sql string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.socketDSN("postgres"))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

// Stop stops the server and keeps its data, as a database server that
// goes down mid-run: connections fail until Restart.
func (c *Cluster) Stop() error {
	select {
	case <-c.exited:
		return nil
	default:
	}
	_ = c.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-c.exited:
		return nil
	case <-time.After(30 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.exited
		return errors.New("pgtest: postgres did not stop within 30s; killed")
	}
}

// Restart starts a stopped server again on its port, with its data.
func (c *Cluster) Restart() error {
	select {
	case <-c.exited:
	default:
		return errors.New("pgtest: restart of a server that is running")
	}
	return c.start(c.port)
}

// Close stops the server (a fast shutdown: sessions are ended, nothing
// is flushed that need not be) and removes the cluster's files.
func (c *Cluster) Close() error {
	var err error
	if c.cmd != nil && c.cmd.Process != nil {
		select {
		case <-c.exited:
		default:
			_ = c.cmd.Process.Signal(syscall.SIGINT)
			select {
			case <-c.exited:
			case <-time.After(30 * time.Second):
				_ = c.cmd.Process.Kill()
				<-c.exited
				err = errors.New("postgres did not stop within 30s; killed")
			}
		}
	}
	return errors.Join(err, os.RemoveAll(c.dir))
}
