package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/caddy-model-gateway/gateway/bench/mock"
)

// proc is a child process with its output going to a log file.
type proc struct {
	name   string
	cmd    *exec.Cmd
	log    string
	exited chan struct{}
	err    error // set when exited is closed
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

func start(name, logPath string, cmd *exec.Cmd) (*proc, error) {
	lf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	if cmd.Stdout == nil {
		cmd.Stdout = lf
	}
	cmd.Stderr = lf
	// a bench killed hard must not leave servers behind
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		lf.Close()
		close(p.exited)
	}()
	return p, nil
}

// stop asks the process to shut down gracefully (SIGTERM) and kills it if
// it is still running after grace.
func (p *proc) stop(grace time.Duration) error {
	select {
	case <-p.exited:
		return nil
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return nil
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.exited
		return fmt.Errorf("%s did not stop within %v after SIGTERM; killed", p.name, grace)
	}
}

// logTail is the end of the process's log, for error messages.
func (p *proc) logTail() string {
	b, _ := os.ReadFile(p.log)
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return strings.TrimSpace(string(b))
}

// runMockChild is the body of `bench -mock`: serve the mock upstream and
// print its address on stdout for the parent.
func runMockChild(addr, certFile string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	h := mock.New(0)
	if certFile == "" {
		fmt.Printf("MOCK %s\n", ln.Addr())
		return mock.NewServer(h).Serve(ln)
	}
	// the same mock over TLS too, where HTTP/2 is offered as the vendors
	// offer it; control calls stay on the cleartext listener
	tln, err := mock.ListenTLS("127.0.0.1:0", certFile)
	if err != nil {
		return err
	}
	fmt.Printf("MOCK %s %s\n", ln.Addr(), tln.Addr())
	go func() { _ = mock.NewServer(h).Serve(tln) }()
	return mock.NewServer(h).Serve(ln)
}

// startMock runs this binary again as the mock upstream, so the mock's CPU
// is its own and not mixed with the load generator's. With tls, the mock
// serves over TLS (HTTP/2 offered) as well, with a self-signed certificate
// written to mockCertFile(dir), and tlsAddr is that listener's address.
func startMock(dir string, tls bool) (p *proc, addr, tlsAddr string, err error) {
	self, err := os.Executable()
	if err != nil {
		return nil, "", "", err
	}
	args := []string{"-mock", "-mock-addr", "127.0.0.1:0"}
	if tls {
		args = append(args, "-mock-cert", mockCertFile(dir))
	}
	cmd := exec.Command(self, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, "", "", err
	}
	if p, err = start("mock", filepath.Join(dir, "mock.log"), cmd); err != nil {
		return nil, "", "", err
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		p.stop(time.Second)
		return nil, "", "", fmt.Errorf("mock did not report its address: %v: %s", err, p.logTail())
	}
	addrs, ok := strings.CutPrefix(strings.TrimSpace(line), "MOCK ")
	if !ok {
		p.stop(time.Second)
		return nil, "", "", fmt.Errorf("mock said %q", line)
	}
	addr, tlsAddr, _ = strings.Cut(addrs, " ")
	go io.Copy(io.Discard, out)
	return p, addr, tlsAddr, nil
}

// mockCertFile is where the mock writes its certificate, which Caddy
// trusts through SSL_CERT_FILE.
func mockCertFile(dir string) string { return filepath.Join(dir, "mock-cert.pem") }

// freePort asks the kernel for an unused loopback port.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// caddyEnv keeps Caddy's autosave and data out of the user's home.
func caddyEnv(dir string) []string {
	env := append(os.Environ(),
		"XDG_CONFIG_HOME="+filepath.Join(dir, "xdg-config"),
		"XDG_DATA_HOME="+filepath.Join(dir, "xdg-data"),
	)
	if _, err := os.Stat(mockCertFile(dir)); err == nil {
		// the mock serves TLS (-upstream-tls): trust its certificate
		env = append(env, "SSL_CERT_FILE="+mockCertFile(dir))
	}
	return env
}

// startCaddy runs the binary with an instance's Caddyfile and waits until
// both the admin endpoint and the instance's site answer.
func startCaddy(ctx context.Context, s *setup, in instance, logName string) (*proc, error) {
	cmd := exec.Command(s.bin, "run", "--config", in.caddyfile, "--adapter", "caddyfile")
	cmd.Env = caddyEnv(s.dir)
	cmd.Dir = s.dir
	p, err := start("caddy", filepath.Join(s.dir, logName), cmd)
	if err != nil {
		return nil, err
	}
	probe := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	ready := func(url string, anyStatus bool) bool {
		resp, err := probe.Get(url)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return anyStatus || resp.StatusCode == http.StatusOK
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case <-p.exited:
			return nil, fmt.Errorf("caddy exited during start-up (%v):\n%s", p.err, p.logTail())
		case <-ctx.Done():
			p.stop(5 * time.Second)
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		// the site answering means the HTTP app is serving; the admin
		// endpoint means pprof is reachable
		if ready(in.ready, in.anyStatus) &&
			ready(fmt.Sprintf("http://localhost:%d/config/", in.adminPort), false) {
			return p, nil
		}
		if time.Now().After(deadline) {
			p.stop(5 * time.Second)
			return nil, fmt.Errorf("caddy not ready after 60s:\n%s", p.logTail())
		}
	}
}

// gatewayCLI runs `caddy gateway <args...> --config <caddyfile>` and returns
// its stdout.
func gatewayCLI(s *setup, caddyfile string, args ...string) (string, error) {
	args = append(append([]string{"gateway"}, args...), "--config", caddyfile)
	cmd := exec.Command(s.bin, args...)
	cmd.Env = caddyEnv(s.dir)
	cmd.Dir = s.dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s %s: %v: %s%s", filepath.Base(s.bin), strings.Join(args, " "), err,
			strings.TrimSpace(stderr.String()), strings.TrimSpace(stdout.String()))
	}
	return stdout.String(), nil
}

// clockTicks is the kernel's USER_HZ, the unit of /proc/<pid>/stat times.
var clockTicks = func() float64 {
	out, err := exec.Command("getconf", "CLK_TCK").Output()
	if err == nil {
		if v, err := strconv.Atoi(strings.TrimSpace(string(out))); err == nil && v > 0 {
			return float64(v)
		}
	}
	return 100
}()

// cpuTime is the user plus system CPU time the process has used, all
// threads included.
func cpuTime(pid int) (time.Duration, error) {
	f, err := procStat(pid)
	if err != nil {
		return 0, err
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, errors.New("unreadable /proc stat times")
	}
	return time.Duration(float64(utime+stime) / clockTicks * float64(time.Second)), nil
}

// rss is the process's resident set size in bytes (VmRSS).
func rss(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmRSS")
}

// quiesce waits until the process has used no CPU for a quarter second (or
// 3 s passed), so work a run left behind, such as a batched usage write,
// is charged to that run and not to the next one.
func quiesce(pid int) time.Duration { return quiesceFor(pid, 250*time.Millisecond, 3*time.Second) }

// quiesceFor waits until the process has used no CPU for quiet (or limit
// passed) and returns its CPU time.
func quiesceFor(pid int, quiet, limit time.Duration) time.Duration {
	last, _ := cpuTime(pid)
	stable := time.Now()
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		time.Sleep(min(50*time.Millisecond, quiet/2))
		now, err := cpuTime(pid)
		if err != nil {
			return last
		}
		if now != last {
			last, stable = now, time.Now()
		} else if time.Since(stable) >= quiet {
			break
		}
	}
	return last
}

// rssSampler records the process's peak RSS while a run goes on.
type rssSampler struct {
	stop chan struct{}
	done chan int64
}

func sampleRSS(pid int) *rssSampler {
	s := &rssSampler{stop: make(chan struct{}), done: make(chan int64, 1)}
	go func() {
		var peak int64
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			if v, err := rss(pid); err == nil && v > peak {
				peak = v
			}
			select {
			case <-s.stop:
				s.done <- peak
				return
			case <-t.C:
			}
		}
	}()
	return s
}

func (s *rssSampler) peak() int64 {
	close(s.stop)
	return <-s.done
}

// mockCall sends a control request to the mock.
func mockCall(addr, pathQuery string, into any) error {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Post("http://"+addr+pathQuery, "application/json", nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("mock %s: status %d", pathQuery, resp.StatusCode)
	}
	if into != nil {
		return json.NewDecoder(resp.Body).Decode(into)
	}
	return nil
}

func mockStats(addr string) mock.Stats {
	var s mock.Stats
	_ = mockCall(addr, "/_mock/stats", &s)
	return s
}

// machineSnap is the machine's CPU use at an instant, split into ours (the
// bench, the mock, Caddy) and everything else, so a run disturbed by other
// work on the machine (a build, a test) can be told from a slow target.
type machineSnap struct {
	busy, steal, own time.Duration
	at               time.Time
}

func takeSnap(pids ...int) machineSnap {
	m := machineSnap{at: time.Now()}
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		line, _, _ := strings.Cut(string(b), "\n")
		f := strings.Fields(line)
		tick := func(i int) time.Duration {
			if i >= len(f) {
				return 0
			}
			v, _ := strconv.ParseInt(f[i], 10, 64)
			return time.Duration(float64(v) / clockTicks * float64(time.Second))
		}
		// cpu user nice system idle iowait irq softirq steal; interrupt
		// time is left out, as loopback traffic of our own lands there
		m.busy = tick(1) + tick(2) + tick(3)
		m.steal = tick(8)
	}
	for _, pid := range append(pids, os.Getpid()) {
		if pid > 0 {
			if c, err := cpuTime(pid); err == nil {
				m.own += c
			}
		}
	}
	return m
}

// otherCPU is the CPU time used by processes not ours between two snaps.
func otherCPU(a, b machineSnap) time.Duration {
	return (b.busy - a.busy) - (b.own - a.own)
}
