// Command bench measures the gateway against Caddy's own reverse_proxy and
// against the upstream called directly, on the same machine in the same
// run, and prints each figure with its ratio to reverse_proxy.
//
//	go run ./bench/cmd/bench            # full run, about 7 minutes
//	go run ./bench/cmd/bench -quick     # under 2 minutes
//	go run ./bench/cmd/bench -hold      # set up, then wait (for pprof)
//
// It builds bin/caddy, runs a mock OpenAI upstream (this binary with -mock)
// and one Caddy process serving two sites, a plain reverse_proxy to the
// mock and the full gateway path to the same mock, then drives load at all
// three targets in interleaved rounds. See bench/README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/caddy-model-gateway/gateway/bench/load"
)

// Target names, as they appear in the table and the JSON.
const (
	direct    = "direct"
	proxy     = "reverse_proxy"
	gateway   = "gateway"
	gatewayPG = "gateway_pg" // a second Caddy process, its gateway on PostgreSQL
)

// defaultTargets are measured unless -targets says otherwise; -postgres
// adds gateway_pg, -budgets=false leaves out gateway_budgets and
// gateway_plan.
const defaultTargets = "direct,reverse_proxy,gateway,reverse_proxy_log,gateway_example,gateway_budgets,gateway_plan"

type options struct {
	quick       bool
	build       bool
	bin         string
	targets     []string
	rounds      int
	duration    time.Duration
	warmup      int
	streams     int
	memDuration time.Duration
	overload    bool
	out         string
	keep        bool
	hold        bool
	holdLoad    string
	holdStream  bool
	holdOpen    int
	holdConc    int
	strict      bool
	idleConns   int
	reruns      int
	budgets     bool // the spending-windows targets (budgets.go)
	upstreamTLS bool // targets reach the mock over TLS (-upstream-tls)
	// scenarios are the parts of the run to do (-scenarios); nil: all
	scenarios []string
}

// setup is everything the runs share: paths, ports, the token.
type setup struct {
	root      string // repository root
	bin       string // the gateway binary
	dir       string // scratch directory: Caddyfile, database, logs
	caddyfile string
	db        string
	mockAddr  string
	mockPid   int
	mockTLS   string // the mock's TLS listener, with -upstream-tls
	adminPort int
	proxyPort int
	gwPort    int
	gateway   bool // the gateway site is configured
	token     string
	idleConns int      // reverse_proxy keepalive_idle_conns_per_host; 0: Caddy's default (32)
	pg        *pgSetup // the gateway_pg target, when selected
	// the like-for-like pair (example.go), when selected
	example      exampleSite
	proxyLogPort int
	exPort       int
	// the spending-windows targets' keys, by target (budgets.go); plan:
	// the main Caddyfile defines benchPlan
	keys map[string]string
	plan bool
}

// instance is what it takes to start one Caddy process and know it serves.
type instance struct {
	caddyfile string
	adminPort int
	ready     string // a URL of the HTTP app
	anyStatus bool   // any answer from ready will do, not only 200
}

// main is the process serving reverse_proxy and the SQLite gateway. The
// reverse_proxy site passing a request through to the mock means the HTTP
// app is serving.
func (s *setup) main() instance {
	return instance{caddyfile: s.caddyfile, adminPort: s.adminPort,
		ready: fmt.Sprintf("http://127.0.0.1:%d/_mock/stats", s.proxyPort)}
}

func main() {
	var o options
	var targets, scens string
	mockMode := flag.Bool("mock", false, "run as the mock upstream (used by the bench itself)")
	mockAddr := flag.String("mock-addr", "127.0.0.1:0", "with -mock: address to listen on")
	mockCert := flag.String("mock-cert", "", "with -mock: also serve TLS, writing the certificate to this file")
	flag.BoolVar(&o.upstreamTLS, "upstream-tls", false, "targets reach the mock over TLS, where it offers HTTP/2 as vendors do (the load and control calls stay in cleartext)")
	flag.BoolVar(&o.quick, "quick", false, "quick mode: short runs, 2,000 open streams, under 2 minutes")
	flag.BoolVar(&o.build, "build", true, "build the binary first (go build -o bin/caddy ./cmd/caddy)")
	flag.StringVar(&o.bin, "bin", "bin/caddy", "gateway binary, relative to the repository root")
	flag.StringVar(&targets, "targets", defaultTargets, "targets to measure (direct, reverse_proxy, gateway, reverse_proxy_log, gateway_example, gateway_budgets, gateway_plan, gateway_pg)")
	flag.StringVar(&scens, "scenarios", "all", "parts of the run to do: all, or some of "+strings.Join(allScenarios(), ", "))
	flag.BoolVar(&o.budgets, "budgets", true, "measure gateway_budgets and gateway_plan (spending windows); false leaves them out")
	postgres := flag.Bool("postgres", false, "also measure gateway_pg: the gateway on a throwaway PostgreSQL, in a second Caddy process")
	flag.IntVar(&o.rounds, "rounds", 0, "interleaved rounds per scenario (0: 3, quick 2)")
	flag.DurationVar(&o.duration, "duration", 0, "length of one run of one target (0: 5s, quick 1s)")
	flag.IntVar(&o.streams, "streams", 0, "streams to hold open at once (0: 10000, quick 2000)")
	flag.BoolVar(&o.overload, "overload", true, "also overload the gateway to check usage rows under overload")
	flag.StringVar(&o.out, "out", "bench/results", "directory for the JSON result (a relative one is from the repository root)")
	flag.BoolVar(&o.keep, "keep", false, "keep the scratch directory (Caddyfile, database, logs)")
	flag.BoolVar(&o.hold, "hold", false, "set everything up, print the addresses and wait for Ctrl-C (for profiling by hand)")
	flag.StringVar(&o.holdLoad, "hold-load", "", "with -hold: keep a load on this target (reverse_proxy, gateway, gateway_example, gateway_budgets, gateway_plan...) until Ctrl-C")
	flag.BoolVar(&o.holdStream, "hold-stream", false, "with -hold-load: the load is streaming requests")
	flag.IntVar(&o.holdConc, "hold-conc", 50, "with -hold-load: concurrency of the load")
	flag.IntVar(&o.holdOpen, "hold-open", 0, "with -hold-load: instead of a load, hold this many streams open on the target (for heap profiles)")
	flag.BoolVar(&o.strict, "strict", false, "exit with status 2 when a bar is not met")
	flag.IntVar(&o.reruns, "reruns", -1, "runs that may be measured again when other processes take over 10% of the CPUs (-1: 20, quick 6)")
	flag.IntVar(&o.idleConns, "proxy-idle-conns", 0, "reverse_proxy's keepalive_idle_conns_per_host (0: Caddy's default, 32)")
	flag.Parse()

	if *mockMode {
		if err := runMockChild(*mockAddr, *mockCert); err != nil {
			fmt.Fprintln(os.Stderr, "mock:", err)
			os.Exit(1)
		}
		return
	}
	if err := o.setTargets(targets); err != nil {
		fatalf("%v", err)
	}
	if err := o.setScenarios(scens); err != nil {
		fatalf("%v", err)
	}
	if *postgres && !o.has(gatewayPG) {
		o.targets = append(o.targets, gatewayPG)
	}
	if o.hold && o.has(gatewayPG) {
		fatalf("-hold sets up reverse_proxy and the SQLite gateway only; leave gateway_pg out")
	}
	o.defaults()

	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	code, err := run(ctx, &o)
	if err != nil {
		fatalf("%v", err)
	}
	os.Exit(code)
}

// setTargets reads -targets; without -budgets the spending-windows targets
// are left out even when named.
func (o *options) setTargets(list string) error {
	for t := range strings.SplitSeq(list, ",") {
		switch t = strings.TrimSpace(t); t {
		case direct, proxy, gateway, proxyLogged, gatewayExample, gatewayBudgets, gatewayPlan, gatewayPG:
			if (t == gatewayBudgets || t == gatewayPlan) && !o.budgets {
				continue
			}
			if !o.has(t) {
				o.targets = append(o.targets, t)
			}
		case "proxy", "reverse-proxy":
			if !o.has(proxy) {
				o.targets = append(o.targets, proxy)
			}
		case "":
		default:
			return fmt.Errorf("unknown target %q (want direct, reverse_proxy, gateway, reverse_proxy_log, gateway_example, gateway_budgets, gateway_plan, gateway_pg)", t)
		}
	}
	return nil
}

// allScenarios are -scenarios' names: the load scenarios, the latency
// frontier, and the parts after them.
func allScenarios() []string {
	var out []string
	for _, sc := range scenarios {
		out = append(out, sc.key)
	}
	return append(out, "frontier", "overload", "aborts", "memory", "inproc")
}

// setScenarios reads -scenarios.
func (o *options) setScenarios(list string) error {
	if strings.TrimSpace(list) == "all" {
		return nil
	}
	o.scenarios = []string{}
	for sc := range strings.SplitSeq(list, ",") {
		switch sc = strings.TrimSpace(sc); {
		case sc == "":
		case contains(allScenarios(), sc):
			o.scenarios = append(o.scenarios, sc)
		default:
			return fmt.Errorf("unknown scenario %q (want all, or some of %s)", sc, strings.Join(allScenarios(), ", "))
		}
	}
	return nil
}

// scenariosOf is -scenarios for the JSON's config.
func scenariosOf(o *options) []string {
	if o.scenarios == nil {
		return []string{"all"}
	}
	return o.scenarios
}

// runs reports whether a part of the run is to be done.
func (o *options) runs(scenario string) bool {
	return o.scenarios == nil || contains(o.scenarios, scenario)
}

func (o *options) defaults() {
	pick := func(v *int, full, quick int) {
		if *v == 0 {
			*v = full
			if o.quick {
				*v = quick
			}
		}
	}
	pick(&o.rounds, 3, 2)
	pick(&o.streams, 10000, 2000)
	pick(&o.warmup, 300, 100)
	if o.reruns < 0 {
		o.reruns = 20
		if o.quick {
			o.reruns = 6
		}
	}
	if o.duration == 0 {
		o.duration = 5 * time.Second
		if o.quick {
			o.duration = time.Second
		}
	}
	o.memDuration = max(o.duration, 1500*time.Millisecond)
}

func (o *options) has(t string) bool {
	for _, x := range o.targets {
		if x == t {
			return true
		}
	}
	return false
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "bench: "+format+"\n", args...)
	os.Exit(1)
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s  "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

func run(ctx context.Context, o *options) (int, error) {
	began := time.Now()
	raiseFileLimit()
	root, err := repoRoot()
	if err != nil {
		return 1, err
	}
	budgets := o.budgetTargets()
	s := &setup{root: root, bin: o.bin, gateway: o.has(gateway) || o.has(gatewayExample) || len(budgets) > 0,
		idleConns: o.idleConns, plan: o.has(gatewayPlan)}
	if o.has(proxyLogged) || o.has(gatewayExample) || len(budgets) > 0 {
		if s.example, err = readExampleSite(root); err != nil {
			return 1, err
		}
	}
	if !filepath.IsAbs(s.bin) {
		s.bin = filepath.Join(root, s.bin)
	}
	if o.build {
		logf("building %s", s.bin)
		cmd := exec.CommandContext(ctx, "go", "build", "-o", s.bin, "./cmd/caddy")
		cmd.Dir = root
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		if err := cmd.Run(); err != nil {
			return 1, fmt.Errorf("building the gateway: %w", err)
		}
	}
	if s.dir, err = os.MkdirTemp("", "gateway-bench-"); err != nil {
		return 1, err
	}
	defer func() {
		if o.keep {
			logf("scratch directory kept: %s", s.dir)
		} else {
			os.RemoveAll(s.dir)
		}
	}()

	mockProc, addr, tlsAddr, err := startMock(s.dir, o.upstreamTLS)
	if err != nil {
		return 1, err
	}
	defer mockProc.stop(5 * time.Second)
	s.mockAddr, s.mockPid = addr, mockProc.pid()
	s.mockTLS = tlsAddr
	if err := s.writeCaddyfile(); err != nil {
		return 1, err
	}
	if s.gateway {
		if s.token, err = s.createToken(s.caddyfile); err != nil {
			return 1, err
		}
		if s.keys, err = s.createBudgetUsers(budgets); err != nil {
			return 1, err
		}
	}
	if o.has(gatewayPG) {
		if s.pg, err = s.startPostgres(ctx); err != nil {
			return 1, err
		}
		defer func() {
			if err := s.pg.cluster.Close(); err != nil {
				logf("stopping PostgreSQL: %v", err)
			}
		}()
	}

	b := &bench{o: o, s: s, report: newReport(o, began), reruns: o.reruns}
	if o.hold {
		return 0, b.hold(ctx)
	}
	if err := b.runAll(ctx); err != nil {
		return 1, err
	}
	if o.runs("inproc") {
		logf("measuring the families' own work per request (BenchmarkFamilies)")
		if b.report.Families, err = runFamilies(ctx, root, o.quick); err != nil {
			return 1, err
		}
		logf("measuring the response cache per request (BenchmarkCache)")
		if b.report.Cache, err = runCache(ctx, root, o.quick); err != nil {
			return 1, err
		}
		logf("measuring a database channel against a Caddyfile channel (BenchmarkPlain)")
		if b.report.DBChannels, err = runDBChannels(ctx, root, o.quick); err != nil {
			return 1, err
		}
	}
	b.report.Finished = time.Now()
	b.report.buildFigures(o)
	b.report.printTable(os.Stdout)
	printFrontier(os.Stdout, b.report.Frontier)
	if o.runs("inproc") {
		printFamilies(os.Stdout, b.report.Families)
		printCache(os.Stdout, b.report.Cache)
		printDBChannels(os.Stdout, b.report.DBChannels)
	}
	dir := o.out
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(root, dir)
	}
	path, err := b.report.save(dir)
	if err != nil {
		return 1, err
	}
	fmt.Printf("\nJSON: %s\n", path)
	if o.strict && !b.report.Pass {
		return 2, nil
	}
	return 0, nil
}

// raiseFileLimit lifts the soft open-files limit to the hard one; the
// Caddy child inherits it. Thousands of open streams need it.
func raiseFileLimit() {
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl) != nil {
		return
	}
	want := max(rl.Cur, min(rl.Max, 1<<20))
	if want > rl.Cur {
		rl.Cur = want
		_ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl)
	}
}

func fileLimit() int {
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl) != nil {
		return 1024
	}
	return int(min(rl.Cur, 1<<30))
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.Contains(string(b), "module github.com/caddy-model-gateway/gateway") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("run the bench from inside the gateway repository")
		}
		dir = parent
	}
}

func (s *setup) writeCaddyfile() error {
	var err error
	for _, p := range []*int{&s.adminPort, &s.proxyPort, &s.gwPort, &s.proxyLogPort, &s.exPort} {
		if *p, err = freePort(); err != nil {
			return err
		}
	}
	s.db = filepath.Join(s.dir, "gateway.db")
	database, gwPort := "", 0
	if s.gateway {
		database, gwPort = "sqlite "+s.db, s.gwPort
	}
	s.caddyfile = filepath.Join(s.dir, "Caddyfile")
	text := s.caddyfileFor(s.adminPort, database, s.proxyPort, gwPort)
	if s.example.log != "" {
		// reverse_proxy with the example's log block, and the example's
		// site as it is: the like-for-like pair
		text += fmt.Sprintf("\nhttp://127.0.0.1:%d {\n%s\n\treverse_proxy %s\n}\n", s.proxyLogPort, s.example.log, s.proxyTarget())
		if s.gateway {
			text += fmt.Sprintf("\nhttp://127.0.0.1:%d {\n%s\n}\n", s.exPort, s.example.body)
		}
	}
	return os.WriteFile(s.caddyfile, []byte(text), 0o644)
}

// caddyfileFor is a Caddyfile with the gateway app on database (none when
// empty), a reverse_proxy site on proxyPort and a gateway site on gwPort
// (none when 0). Both gateways get the same channel and price.
func (s *setup) caddyfileFor(adminPort int, database string, proxyPort, gwPort int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "{\n\tadmin localhost:%d\n\tpersist_config off\n\tauto_https off\n\tlog {\n\t\tlevel ERROR\n\t}\n", adminPort)
	if database != "" {
		fmt.Fprintf(&b, `	gateway {
		database %s
		channel mock {
			type openai
			base_url %s
			key sk-upstream-test
			models gpt-4o-mini
		}
		price gpt-4o-mini {
			input 0.15
			output 0.60
		}
`, database, s.upstream())
		if s.plan && proxyPort != 0 {
			b.WriteString(planBlock) // the main process only
		}
		b.WriteString("\t}\n")
	}
	b.WriteString("}\n\n")
	switch {
	case proxyPort == 0:
	case s.idleConns > 0:
		fmt.Fprintf(&b, "http://127.0.0.1:%d {\n\treverse_proxy %s {\n\t\ttransport http {\n\t\t\tkeepalive_idle_conns_per_host %d\n\t\t}\n\t}\n}\n", proxyPort, s.proxyTarget(), s.idleConns)
	default:
		fmt.Fprintf(&b, "http://127.0.0.1:%d {\n\treverse_proxy %s\n}\n", proxyPort, s.proxyTarget())
	}
	if gwPort != 0 {
		if proxyPort != 0 {
			b.WriteString("\n")
		}
		fmt.Fprintf(&b, "http://127.0.0.1:%d {\n\troute {\n\t\tgateway_auth\n\t\tgateway_relay\n\t}\n}\n", gwPort)
	}
	return b.String()
}

// createToken creates the bench user and a token in the database of the
// gateway that caddyfile configures, through the CLI, and returns the key.
func (s *setup) createToken(caddyfile string) (string, error) {
	return s.createUserToken(caddyfile, "bench")
}

// createUserToken creates a user with a large balance and a key of theirs.
func (s *setup) createUserToken(caddyfile, username string) (string, error) {
	if _, err := gatewayCLI(s, caddyfile, "user", "add", "--username", username, "--password", "benchbench", "--quota", "1000000000000"); err != nil {
		return "", fmt.Errorf("creating the user %s: %w", username, err)
	}
	// a management key: the budgets check reads /api/user/self with it
	out, err := gatewayCLI(s, caddyfile, "token", "add", "--username", username, "--management")
	if err != nil {
		return "", fmt.Errorf("creating the key of %s: %w", username, err)
	}
	for f := range strings.FieldsSeq(out) {
		if strings.HasPrefix(f, "sk-") {
			return f, nil
		}
	}
	return "", fmt.Errorf("token add printed no sk- key: %q", out)
}

// upstream is the mock as the targets reach it: over TLS (HTTP/2 offered)
// with -upstream-tls, else in cleartext.
func (s *setup) upstream() string {
	if s.mockTLS != "" {
		return "https://" + s.mockTLS
	}
	return "http://" + s.mockAddr
}

// proxyTarget is the mock as reverse_proxy names it: a bare address in
// cleartext, Caddy's default.
func (s *setup) proxyTarget() string { return strings.TrimPrefix(s.upstream(), "http://") }

// url is the chat completions endpoint of a target.
func (s *setup) url(target string) string {
	switch target {
	case direct:
		return "http://" + s.mockAddr + "/v1/chat/completions"
	case proxy:
		return fmt.Sprintf("http://127.0.0.1:%d/v1/chat/completions", s.proxyPort)
	case gatewayPG:
		return fmt.Sprintf("http://127.0.0.1:%d/v1/chat/completions", s.pg.port)
	case proxyLogged:
		return fmt.Sprintf("http://127.0.0.1:%d/v1/chat/completions", s.proxyLogPort)
	case gatewayExample, gatewayBudgets, gatewayPlan:
		// the same site: only the key differs
		return fmt.Sprintf("http://127.0.0.1:%d/v1/chat/completions", s.exPort)
	default:
		return fmt.Sprintf("http://127.0.0.1:%d/v1/chat/completions", s.gwPort)
	}
}

// client returns a validating client for a target that keeps up to conns
// connections alive.
func (s *setup) client(target string, conns int) *load.Client {
	token := s.token
	if target == gatewayPG {
		token = s.pg.token
	}
	if k, ok := s.keys[target]; ok {
		token = k
	}
	if token == "" {
		token = "sk-bench" // direct and reverse_proxy ignore it
	}
	return &load.Client{
		HTTP:    &http.Client{Transport: load.NewTransport(conns)},
		URL:     s.url(target),
		Token:   token,
		Events:  21, // 20 chunks and the usage chunk
		Timeout: 60 * time.Second,
	}
}

// hold sets up the servers and waits, printing what someone profiling by
// hand needs.
func (b *bench) hold(ctx context.Context) error {
	s := b.s
	p, err := startCaddy(ctx, s, s.main(), "caddy-hold.log")
	if err != nil {
		return err
	}
	defer p.stop(30 * time.Second)
	fmt.Printf(`Everything is running; Ctrl-C stops it.

  mock upstream   http://%s/v1/chat/completions   (stats: /_mock/stats)
  reverse_proxy   %s
  gateway         %s
  token           %s
  caddy pid       %d, log %s
  Caddyfile       %s

Profile the gateway while load runs:
  go tool pprof 'http://localhost:%d/debug/pprof/profile?seconds=20'
  go tool pprof http://localhost:%d/debug/pprof/heap
Send a request:
  curl -s %s -H 'Authorization: Bearer %s' -d '%s'
`, s.mockAddr, s.url(proxy), s.url(gateway), s.token, p.pid(), p.log, s.caddyfile,
		s.adminPort, s.adminPort, s.url(gateway), s.token, load.ChatBody)
	if t := b.o.holdLoad; t == "proxy" {
		b.o.holdLoad = proxy
	}
	if t, n := b.o.holdLoad, b.o.holdOpen; t != "" && n > 0 {
		if err := mockCall(s.mockAddr, "/_mock/config?hold=1", nil); err != nil {
			return err
		}
		defer mockCall(s.mockAddr, "/_mock/release", nil)
		// measured as the memory scenario measures: a second to settle,
		// then the streams, then half a second
		time.Sleep(time.Second)
		fresh, _ := rss(p.pid())
		c := s.client(t, 0)
		c.HTTP.Transport.(*http.Transport).DisableKeepAlives = true
		c.Timeout = 0
		set := load.OpenStreams(ctx, c, n, 200)
		open := set.WaitOpened(n, time.Minute)
		time.Sleep(500 * time.Millisecond)
		v, _ := rss(p.pid())
		held := open - set.Failed()
		fmt.Printf("\n%d streams open on %s (%d failed); Caddy RSS fresh %.1f MB, now %.1f MB: %.1f KB per stream, %.0f MB at 10,000.\n",
			held, t, set.Failed(), mb(fresh), mb(v), float64(v-fresh)/1024/float64(max(held, 1)), mb(fresh)+float64(v-fresh)/1024/float64(max(held, 1))*10000/1024)
	} else if t != "" {
		c := s.client(t, max(64, b.o.holdConc))
		op, kind := c.Chat, "chat completions"
		if b.o.holdStream {
			op, kind = c.Stream, "streams"
		}
		fmt.Printf("\nConcurrency-%d load of %s running on %s.\n", b.o.holdConc, kind, t)
		go func() {
			for {
				res := load.ClosedLoop(ctx, b.o.holdConc, 5*time.Second, op)
				if ctx.Err() != nil {
					return
				}
				logf("%s: %.0f req/s, p50 %v, p99 %v, errors %d %s", t, float64(res.OK)/res.Elapsed.Seconds(),
					res.Latency.Percentile(50), res.Latency.Percentile(99), res.Errors, res.FirstError)
			}
		}()
	}
	<-ctx.Done()
	return nil
}
