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

// inprocFigure is one sub-benchmark of bench/inproc, run with go test in
// the repository: in process, so its ratios hold on a busy machine too.
type inprocFigure struct {
	NsPerOp     float64 `json:"ns_per_op"`
	CPUPerReqUs float64 `json:"cpu_us_per_req,omitempty"`
	AllocsPerOp int64   `json:"allocs_per_op"`
	BytesPerOp  int64   `json:"bytes_per_op"`
}

// runInproc runs the benchmarks pattern selects in bench/inproc, n
// iterations each ("3000x"), and reads the figures of those named
// Benchmark<name>/... by their sub-benchmark name.
func runInproc(ctx context.Context, root, name, pattern, n string) (map[string]*inprocFigure, error) {
	cmd := exec.CommandContext(ctx, "go", "test", "./bench/inproc/", "-run", "^$", "-bench", pattern, "-benchmem", "-benchtime", n)
	cmd.Dir = root
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("running benchmark %s: %w\n%s", name, err, out.String())
	}
	return parseInproc(&out, name), nil
}

// parseInproc reads `go test -bench -benchmem` lines of Benchmark<name>:
// BenchmarkCache/plain/hit-2  300  89035 ns/op  195.6 allocs/req  70.02 cpu-µs/req  17361 B/op  195 allocs/op
func parseInproc(r io.Reader, name string) map[string]*inprocFigure {
	figs := map[string]*inprocFigure{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 {
			continue
		}
		sub, ok := strings.CutPrefix(f[0], "Benchmark"+name+"/")
		if !ok {
			continue
		}
		if i := strings.LastIndexByte(sub, '-'); i > 0 {
			sub = sub[:i] // the GOMAXPROCS suffix
		}
		fig := &inprocFigure{}
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
		figs[sub] = fig
	}
	return figs
}

// runDBChannels runs BenchmarkPlain's Caddyfile channel and database
// channel: the same request, the second for a model only a channel made
// at runtime serves (its key sealed, the tables swapped atomically).
func runDBChannels(ctx context.Context, root string, quick bool) (map[string]*inprocFigure, error) {
	n := "5000x"
	if quick {
		n = "1000x"
	}
	return runInproc(ctx, root, "Plain", "^BenchmarkPlain$/^(gateway|gateway_db_channel)$", n)
}

// printDBChannels states what a database channel costs a request against
// a Caddyfile channel's.
func printDBChannels(w io.Writer, figs map[string]*inprocFigure) {
	file, db := figs["gateway"], figs["gateway_db_channel"]
	if file == nil || db == nil || file.CPUPerReqUs == 0 {
		return
	}
	fmt.Fprintf(w, "\nChannels kept in the database, per request, in process (bench/inproc BenchmarkPlain):\n")
	fmt.Fprintf(w, "  Caddyfile channel %.1f cpu-µs, %d allocs, %d B; database channel %.1f cpu-µs, %d allocs, %d B (%.2fx CPU, %+d allocs)\n",
		file.CPUPerReqUs, file.AllocsPerOp, file.BytesPerOp, db.CPUPerReqUs, db.AllocsPerOp, db.BytesPerOp,
		db.CPUPerReqUs/file.CPUPerReqUs, db.AllocsPerOp-file.AllocsPerOp)
}
