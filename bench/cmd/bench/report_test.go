package main

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestOrderInterleaves(t *testing.T) {
	targets := []string{direct, proxy, gateway}
	firsts := map[string]bool{}
	for round := range 3 {
		o := order(targets, round)
		if len(o) != 3 || !slices.Contains(o, direct) || !slices.Contains(o, proxy) || !slices.Contains(o, gateway) {
			t.Fatalf("round %d: %v", round, o)
		}
		firsts[o[0]] = true
	}
	if len(firsts) != 3 {
		t.Errorf("every target should lead one of three rounds: %v", firsts)
	}
}

func TestBars(t *testing.T) {
	r := &report{}
	r.add("throughput", "req/s", map[string]float64{proxy: 1000, gateway: 900}, ratioAtLeast(0.85))
	r.add("cpu", "µs", map[string]float64{proxy: 100, gateway: 140}, ratioAtMost(1.3))
	r.add("ttfe", "ms", map[string]float64{proxy: 0.5, gateway: 0.65}, aboveProxyAtMost(0.2, ""))
	r.add("no gateway", "req/s", map[string]float64{proxy: 1000}, ratioAtLeast(0.85))
	r.add("errors", "count", map[string]float64{proxy: 0, gateway: 0}, allZero)
	want := []string{"pass", "FAIL", "pass", "n/a", "pass"}
	for i, f := range r.Figures {
		got := "n/a"
		if f.Pass != nil {
			got = map[bool]string{true: "pass", false: "FAIL"}[*f.Pass]
		}
		if got != want[i] {
			t.Errorf("%s: %s, want %s", f.Name, got, want[i])
		}
	}
	if r := *r.Figures[0].Ratio; r != 0.9 {
		t.Errorf("ratio %v", r)
	}
	var b strings.Builder
	r.printTable(&b)
	if !strings.Contains(b.String(), "0.90×") || !strings.Contains(b.String(), "FAIL") {
		t.Errorf("table:\n%s", b.String())
	}
}

// Without gateway_pg the table keeps its columns; with it, the PostgreSQL
// gateway gets its own column, its ratios to the SQLite gateway and to
// reverse_proxy, and its target (issue 34): the SQLite gateway's throughput
// at least, its CPU within 5 %.
func TestPGColumns(t *testing.T) {
	var plain strings.Builder
	(&report{}).printTable(&plain)
	if strings.Contains(plain.String(), gatewayPG) || strings.Contains(plain.String(), "pg/gw") {
		t.Errorf("table without gateway_pg has its columns:\n%s", plain.String())
	}

	r := &report{pg: true}
	r.add("throughput", "req/s", map[string]float64{proxy: 1000, gateway: 900, gatewayPG: 900}, ratioAtLeast(0.85)).pgTarget(true)
	r.add("throughput short", "req/s", map[string]float64{proxy: 1000, gateway: 900, gatewayPG: 880}, ratioAtLeast(0.85)).pgTarget(true)
	r.add("cpu", "µs", map[string]float64{proxy: 100, gateway: 100, gatewayPG: 110}, ratioAtMost(1.3)).pgTarget(false)
	r.add("latency", "ms", map[string]float64{proxy: 1, gateway: 1}, nil).pgTarget(false)
	thr, short, cpu, lat := r.Figures[0], r.Figures[1], r.Figures[2], r.Figures[3]
	if short.RatioPG == nil || *short.RatioPG != 880.0/900 || *short.RatioPGProxy != 0.88 {
		t.Errorf("throughput ratios: %v %v", short.RatioPG, short.RatioPGProxy)
	}
	if thr.PGPass == nil || !*thr.PGPass {
		t.Error("throughput 1.00× the SQLite gateway's should meet the target")
	}
	if short.PGPass == nil || *short.PGPass {
		t.Error("throughput 0.98× the SQLite gateway's should miss the target")
	}
	if cpu.PGPass == nil || *cpu.PGPass {
		t.Error("CPU 1.10× the SQLite gateway's should miss the 5% target")
	}
	if lat.PGPass != nil || lat.RatioPG != nil {
		t.Error("a figure without gateway_pg has no PostgreSQL verdict")
	}
	r.Pass = true
	for _, f := range r.Figures {
		if f.PGPass != nil && !*f.PGPass {
			r.Pass = false
		}
	}
	var b strings.Builder
	r.printTable(&b)
	for _, want := range []string{"gateway_pg", "pg/gw", "pg/rp", "0.98×", "≥ 1.00× gw", "≤ 1.05× gw", "FAIL", "2 bar(s) not met"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table has no %q:\n%s", want, b.String())
		}
	}
}

// The main process's Caddyfile is what it was before gateway_pg; the
// second one has the same gateway on PostgreSQL and no reverse_proxy site.
func TestCaddyfiles(t *testing.T) {
	s := &setup{mockAddr: "127.0.0.1:9"}
	main := s.caddyfileFor(2019, "sqlite /tmp/x/gateway.db", 8001, 8002)
	want := "{\n\tadmin localhost:2019\n\tpersist_config off\n\tauto_https off\n\tlog {\n\t\tlevel ERROR\n\t}\n" +
		"\tgateway {\n\t\tdatabase sqlite /tmp/x/gateway.db\n\t\tchannel mock {\n\t\t\ttype openai\n\t\t\tbase_url http://127.0.0.1:9\n" +
		"\t\t\tkey sk-upstream-test\n\t\t\tmodels gpt-4o-mini\n\t\t}\n\t\tprice gpt-4o-mini {\n\t\t\tinput 0.15\n\t\t\toutput 0.60\n\t\t}\n\t}\n}\n\n" +
		"http://127.0.0.1:8001 {\n\treverse_proxy 127.0.0.1:9\n}\n\n" +
		"http://127.0.0.1:8002 {\n\troute {\n\t\tgateway_auth\n\t\tgateway_relay\n\t}\n}\n"
	if main != want {
		t.Errorf("main Caddyfile:\n%s\nwant:\n%s", main, want)
	}
	pg := s.caddyfileFor(2020, "postgres postgres://postgres@127.0.0.1:5/gateway_bench", 0, 8003)
	if !strings.Contains(pg, "database postgres postgres://postgres@127.0.0.1:5/gateway_bench\n") ||
		strings.Contains(pg, "reverse_proxy") || !strings.Contains(pg, "http://127.0.0.1:8003 {") ||
		!strings.Contains(pg, "price gpt-4o-mini") {
		t.Errorf("gateway_pg Caddyfile:\n%s", pg)
	}
}

// The database's CPU is read from /proc like a Caddy process's: the
// parent is the second field, and a process with its reaped children has
// used at least its own CPU.
func TestProcStat(t *testing.T) {
	if ppid, err := parentPid(os.Getpid()); err != nil || ppid != os.Getppid() {
		t.Fatalf("parentPid = %d, %v; want %d", ppid, err, os.Getppid())
	}
	// burn enough CPU for the clock ticks to show it
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		own, err := cpuTime(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		if own > 20*time.Millisecond {
			if all := dbCPU(os.Getpid()); all < own {
				t.Errorf("dbCPU %v below the process's own CPU %v", all, own)
			}
			return
		}
		for i := range 1_000_000 {
			_ = i * i
		}
	}
	t.Fatal("no CPU time showed in /proc within 10s")
}

// TestFamiliesLine: the families' benchmark lines are read by name, the
// GOMAXPROCS suffix dropped, and printed as ratios to OpenAI's path.
func TestFamiliesLine(t *testing.T) {
	figs := parseFamilies(strings.NewReader(`goos: linux
BenchmarkFamilies/request/openai-2         	    5000	     20000 ns/op	    2528 B/op	      28 allocs/op
BenchmarkFamilies/request/bedrock-sigv4-2  	    5000	     50000 ns/op	    6530 B/op	      76 allocs/op
BenchmarkFamilies/stream/openai-translated-2          	    5000	    400000 ns/op	  11.74 MB/s	   21273 B/op	     383 allocs/op
BenchmarkFamilies/stream/bedrock-2                    	    5000	    200000 ns/op	  17.52 MB/s	   50359 B/op	    1108 allocs/op
PASS
`))
	if f := figs["stream/bedrock"]; f == nil || f.NsPerOp != 200000 || f.AllocsPerOp != 1108 || f.BytesPerOp != 50359 {
		t.Fatalf("stream/bedrock = %+v", f)
	}
	var out strings.Builder
	printFamilies(&out, figs)
	if !strings.Contains(out.String(), "(2.50x OpenAI's)") || !strings.Contains(out.String(), "(0.50x OpenAI translated") {
		t.Errorf("report:\n%s", out.String())
	}
}

// TestCacheLines: the cache benchmark's lines are read by name, with the
// CPU per request, and printed as ratios to reverse_proxy.
func TestCacheLines(t *testing.T) {
	figs := parseCache(strings.NewReader(`goos: linux
BenchmarkCache/plain/reverse_proxy-2         	     300	    200000 ns/op	       260.2 allocs/req	       200.0 cpu-µs/req	   24214 B/op	     260 allocs/op
BenchmarkCache/plain/gateway-2               	     300	    160000 ns/op	       270.0 allocs/req	       160.0 cpu-µs/req	   25347 B/op	     270 allocs/op
BenchmarkCache/plain/hit-2                   	     300	     80000 ns/op	       195.6 allocs/req	        50.0 cpu-µs/req	   17361 B/op	     195 allocs/op
PASS`))
	if len(figs) != 3 || figs["plain/hit"].CPUPerReqUs != 50 || figs["plain/hit"].AllocsPerOp != 195 || figs["plain/gateway"].NsPerOp != 160000 {
		t.Fatalf("figures %v", figs)
	}
	var out strings.Builder
	printCache(&out, figs)
	for _, want := range []string{"plain    hit", "0.40x", "0.25x", "0.31x"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("no %q in:\n%s", want, out.String())
		}
	}
}

// TestDBChannelsLine: BenchmarkPlain's two channels are read by name and
// the database channel is stated against the Caddyfile's.
func TestDBChannelsLine(t *testing.T) {
	figs := parseInproc(strings.NewReader(`goos: linux
BenchmarkPlain/gateway-2            	    2000	    160000 ns/op	       269.0 allocs/req	       164.0 cpu-µs/req	   25300 B/op	     269 allocs/op
BenchmarkPlain/gateway_db_channel-2 	    2000	    158000 ns/op	       270.0 allocs/req	       161.0 cpu-µs/req	   25310 B/op	     270 allocs/op
BenchmarkCache/plain/hit-2          	     300	     80000 ns/op	       195.6 allocs/req	        50.0 cpu-µs/req	   17361 B/op	     195 allocs/op
`), "Plain")
	if len(figs) != 2 || figs["gateway_db_channel"].CPUPerReqUs != 161 || figs["gateway"].AllocsPerOp != 269 {
		t.Fatalf("figures %+v", figs)
	}
	var out strings.Builder
	printDBChannels(&out, figs)
	if !strings.Contains(out.String(), "database channel 161.0 cpu-µs, 270 allocs, 25310 B (0.98x CPU, +1 allocs)") {
		t.Fatalf("printed:\n%s", out.String())
	}
}
