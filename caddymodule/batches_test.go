package caddymodule

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"

	"github.com/caddy-model-gateway/gateway/adapters"
)

func adaptGateway(t *testing.T, body string) (*App, error) {
	t.Helper()
	src := "{\n\tgateway {\n" + body + "\n\t}\n}\n:8080 {\n\trespond ok\n}\n"
	out, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(src), nil)
	if err != nil {
		return nil, err
	}
	var cfg struct {
		Apps struct {
			Gateway App `json:"gateway"`
		} `json:"apps"`
	}
	if err := json.Unmarshal(out, &cfg); err != nil {
		t.Fatal(err)
	}
	return &cfg.Apps.Gateway, nil
}

// The batches { } option and a price's batch terms, as the Caddyfile
// writes them and as they bill.
func TestBatchesCaddyfile(t *testing.T) {
	a, err := adaptGateway(t, `batches {
	dir /var/lib/gateway/files
	max_file_size 50MB
	max_lines 2000
	max_results 200MB
	max_user_storage 1GB
	file_retention 168h
	local_concurrency 8
}
price gpt-4o-mini {
	input 0.15
	output 0.60
	batch_discount 50%
}
price claude-haiku {
	input 1
	output 5
	batch_input 0.5
	batch_output 2.5
}`)
	if err != nil {
		t.Fatal(err)
	}
	b := a.Batches
	if b == nil || b.Dir != "/var/lib/gateway/files" || b.MaxLines != 2000 || b.MaxFileSize <= 0 || b.MaxResults <= b.MaxFileSize ||
		b.MaxUserStorage <= b.MaxResults || b.FileRetention <= 0 || b.LocalConcurrency != 8 {
		t.Fatalf("batches: %+v", b)
	}
	usage := adapters.Usage{PromptTokens: 1_000_000, CompletionTokens: 1_000_000}
	for model, want := range map[string]int64{"gpt-4o-mini": 75_000 + 300_000, "claude-haiku": 500_000 + 2_500_000} {
		p, err := a.Prices[model].Price()
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Batch().Cost(usage); got != want {
			t.Fatalf("%s: a million tokens each way cost %d in a batch, want %d", model, got, want)
		}
		if got := p.Cost(usage); got == want {
			t.Fatalf("%s: the batch price is the request price (%d)", model, got)
		}
	}
	for _, tc := range []struct{ body, want string }{
		{"batches {\n max_lines 0\n}", "max_lines must be a positive integer"},
		{"batches {\n local_concurrency none\n}", "local_concurrency must be a positive integer"},
		{"batches {\n max_file_size lots\n}", "max_file_size must be a size"},
		{"batches {\n file_retention soon\n}", "file_retention must be a duration"},
		{"batches {\n colour blue\n}", `batches: unrecognized option "colour"`},
		{"price m {\n batch_discount 150%\n}", "batch_discount must be a whole percentage from 0 to 100"},
		{"price m {\n batch_input cheap\n}", "batch_input"},
	} {
		if _, err := adaptGateway(t, tc.body); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%q: err = %v, want %q", tc.body, err, tc.want)
		}
	}
	if a, err := adaptGateway(t, "batches {\n file_retention off\n}"); err != nil || a.Batches.FileRetention >= 0 {
		t.Fatalf("file_retention off: %v %+v", err, a)
	}
}
