package main

import (
	"context"
	"fmt"
	"io"
)

// familyFigure is one sub-benchmark of bench/inproc's BenchmarkFamilies:
// a family's own work per request (building the upstream request, reading
// a stream).
type familyFigure = inprocFigure

// runFamilies runs BenchmarkFamilies and reads its figures by
// sub-benchmark name (request/openai, ...).
func runFamilies(ctx context.Context, root string, quick bool) (map[string]*familyFigure, error) {
	n := "20000x"
	if quick {
		n = "3000x"
	}
	return runInproc(ctx, root, "Families", "^BenchmarkFamilies$", n)
}

// parseFamilies reads BenchmarkFamilies' lines.
func parseFamilies(r io.Reader) map[string]*familyFigure { return parseInproc(r, "Families") }

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
