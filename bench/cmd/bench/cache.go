package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
)

// cacheFigure is one sub-benchmark of bench/inproc's BenchmarkCache: a
// request through the gateway's site in process (auth, admission, the
// cache, the relay to the mock or a replay, settlement), so its ratios to
// reverse_proxy hold on a busy machine too.
type cacheFigure struct {
	NsPerOp     float64 `json:"ns_per_op"`
	CPUPerReqUs float64 `json:"cpu_us_per_req"`
	AllocsPerOp int64   `json:"allocs_per_op"`
	BytesPerOp  int64   `json:"bytes_per_op"`
}

// runCache runs BenchmarkCache (go test, in the repository) and reads its
// figures by sub-benchmark name (plain/hit, stream/miss, ...).
func runCache(ctx context.Context, root string, quick bool) (map[string]*cacheFigure, error) {
	n := "3000x"
	if quick {
		n = "500x"
	}
	cmd := exec.CommandContext(ctx, "go", "test", "./bench/inproc/", "-run", "^$", "-bench", "^BenchmarkCache$", "-benchmem", "-benchtime", n)
	cmd.Dir = root
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("BenchmarkCache: %w\n%s", err, out.String())
	}
	return parseCache(&out), nil
}

// parseCache reads `go test -bench -benchmem` lines:
// BenchmarkCache/plain/hit-2  300  89035 ns/op  195.6 allocs/req  70.02 cpu-µs/req  17361 B/op  195 allocs/op
func parseCache(r io.Reader) map[string]*cacheFigure {
	figs := map[string]*cacheFigure{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 {
			continue
		}
		name, ok := strings.CutPrefix(f[0], "BenchmarkCache/")
		if !ok {
			continue
		}
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			name = name[:i] // the GOMAXPROCS suffix
		}
		fig := &cacheFigure{}
		for i := 2; i+1 < len(f); i++ {
			switch f[i+1] {
			case "ns/op":
				fig.NsPerOp, _ = strconv.ParseFloat(f[i], 64)
			case "cpu-µs/req":
				fig.CPUPerReqUs, _ = strconv.ParseFloat(f[i], 64)
			case "B/op":
				fig.BytesPerOp, _ = strconv.ParseInt(f[i], 10, 64)
			case "allocs/op":
				fig.AllocsPerOp, _ = strconv.ParseInt(f[i], 10, 64)
			}
		}
		figs[name] = fig
	}
	return figs
}

// printCache states a hit's and a miss's latency and CPU, and what the
// cache costs a request it does not keep, each as a ratio to
// reverse_proxy's and to the gateway's without the cache.
func printCache(w io.Writer, figs map[string]*cacheFigure) {
	if len(figs) == 0 {
		return
	}
	fmt.Fprintf(w, "\nResponse cache, per request, in process, one at a time (bench/inproc BenchmarkCache):\n")
	fmt.Fprintf(w, "  %-8s %-10s %10s %12s %8s %8s %8s %8s\n", "answer", "path", "latency", "CPU", "allocs", "lat/rp", "cpu/rp", "cpu/gw")
	for _, kind := range []string{"plain", "stream"} {
		rp, gw := figs[kind+"/reverse_proxy"], figs[kind+"/gateway"]
		for _, path := range []string{"reverse_proxy", "gateway", "uncached", "miss", "hit"} {
			f := figs[kind+"/"+path]
			if f == nil {
				continue
			}
			ratio := func(x, y float64) string {
				if y == 0 {
					return "n/a"
				}
				return fmt.Sprintf("%.2fx", x/y)
			}
			latRP, cpuRP, cpuGW := "n/a", "n/a", "n/a"
			if rp != nil {
				latRP, cpuRP = ratio(f.NsPerOp, rp.NsPerOp), ratio(f.CPUPerReqUs, rp.CPUPerReqUs)
			}
			if gw != nil {
				cpuGW = ratio(f.CPUPerReqUs, gw.CPUPerReqUs)
			}
			fmt.Fprintf(w, "  %-8s %-10s %8.1fµs %10.1fµs %8d %8s %8s %8s\n", kind, path, f.NsPerOp/1000, f.CPUPerReqUs, f.AllocsPerOp, latRP, cpuRP, cpuGW)
		}
	}
	fmt.Fprintf(w, "  (gateway: a key the cache is not on for; uncached: a sampled request of one it is on for; miss: a fresh answer recorded and kept; hit: replayed)\n")
}
