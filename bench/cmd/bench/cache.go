package main

import (
	"context"
	"fmt"
	"io"
)

// cacheFigure is one sub-benchmark of bench/inproc's BenchmarkCache: a
// request through the gateway's site in process (auth, admission, the
// cache, the relay to the mock or a replay, settlement).
type cacheFigure = inprocFigure

// runCache runs BenchmarkCache and reads its figures by sub-benchmark name
// (plain/hit, stream/miss, ...).
func runCache(ctx context.Context, root string, quick bool) (map[string]*cacheFigure, error) {
	n := "3000x"
	if quick {
		n = "500x"
	}
	return runInproc(ctx, root, "Cache", "^BenchmarkCache$", n)
}

// parseCache reads BenchmarkCache's lines.
func parseCache(r io.Reader) map[string]*cacheFigure { return parseInproc(r, "Cache") }

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
