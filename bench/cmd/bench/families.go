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

// familyFigure is one sub-benchmark of bench/inproc's BenchmarkFamilies:
// a family's own work per request (building the upstream request, reading
// a stream), measured in process, so the ratios between families hold on
// a busy machine too.
type familyFigure struct {
	NsPerOp     float64 `json:"ns_per_op"`
	AllocsPerOp int64   `json:"allocs_per_op"`
	BytesPerOp  int64   `json:"bytes_per_op"`
}

// runFamilies runs BenchmarkFamilies (go test, in the repository) and
// reads its figures by sub-benchmark name (request/openai, ...).
func runFamilies(ctx context.Context, root string, quick bool) (map[string]*familyFigure, error) {
	n := "20000x"
	if quick {
		n = "3000x"
	}
	cmd := exec.CommandContext(ctx, "go", "test", "./bench/inproc/", "-run", "^$", "-bench", "^BenchmarkFamilies$", "-benchmem", "-benchtime", n)
	cmd.Dir = root
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("BenchmarkFamilies: %w\n%s", err, out.String())
	}
	return parseFamilies(&out), nil
}

// parseFamilies reads `go test -bench -benchmem` lines:
// BenchmarkFamilies/request/openai-2  20000  21331 ns/op  2528 B/op  28 allocs/op
func parseFamilies(r io.Reader) map[string]*familyFigure {
	figs := map[string]*familyFigure{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 {
			continue
		}
		name, ok := strings.CutPrefix(f[0], "BenchmarkFamilies/")
		if !ok {
			continue
		}
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			name = name[:i] // the GOMAXPROCS suffix
		}
		fig := &familyFigure{}
		for i := 2; i+1 < len(f); i++ {
			switch f[i+1] {
			case "ns/op":
				fig.NsPerOp, _ = strconv.ParseFloat(f[i], 64)
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

// printFamilies states what Bedrock's SigV4 signing and event-stream
// decoding cost per request against the OpenAI family's path, as ratios.
func printFamilies(w io.Writer, figs map[string]*familyFigure) {
	ratio := func(a, b string) string {
		x, y := figs[a], figs[b]
		if x == nil || y == nil || y.NsPerOp == 0 {
			return "n/a"
		}
		return fmt.Sprintf("%.2fx", x.NsPerOp/y.NsPerOp)
	}
	show := func(name string) string {
		f := figs[name]
		if f == nil {
			return "n/a"
		}
		return fmt.Sprintf("%.1f µs, %d allocs, %d B", f.NsPerOp/1000, f.AllocsPerOp, f.BytesPerOp)
	}
	fmt.Fprintf(w, "\nFamilies, per request, in process (bench/inproc BenchmarkFamilies):\n")
	fmt.Fprintf(w, "  upstream request  OpenAI %s; Bedrock SigV4 %s (%s OpenAI's), Bedrock API key %s (%s)\n",
		show("request/openai"), show("request/bedrock-sigv4"), ratio("request/bedrock-sigv4", "request/openai"),
		show("request/bedrock-apikey"), ratio("request/bedrock-apikey", "request/openai"))
	fmt.Fprintf(w, "  stream (20 chunks + usage)  OpenAI passthrough %s, translated %s; Bedrock event-stream %s (%s OpenAI translated, %s passthrough)\n",
		show("stream/openai-passthrough"), show("stream/openai-translated"), show("stream/bedrock"),
		ratio("stream/bedrock", "stream/openai-translated"), ratio("stream/bedrock", "stream/openai-passthrough"))
}
