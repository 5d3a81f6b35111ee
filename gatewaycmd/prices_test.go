package gatewaycmd

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/caddy-model-gateway/gateway/billing"
)

// prices import prints the public catalogue's models as price blocks,
// kept to the globs asked for; a bad entry is named on stderr and the
// exit is an error, the good ones still printed.
func TestPricesImport(t *testing.T) {
	e := Env{}
	file := filepath.Join("..", "billing", "testdata", "litellm_catalogue.json")
	out := mustRun(t, e, "prices", "import", file, "--model", "gemini-*", "--model", "gpt-4o-mini")
	want := "price gemini-2.5-pro {\n\tinput 1.25\n\toutput 10\n\tcached_input 0.125\n\tmax_output 65535\n" +
		"\tabove 200000 {\n\t\tinput 2.5\n\t\toutput 15\n\t\tcached_input 0.25\n\t}\n}\n" +
		"price gpt-4o-mini {\n\tinput 0.15\n\toutput 0.6\n\tcached_input 0.075\n\tmax_output 16384\n}\n"
	if out != want {
		t.Errorf("printed:\n%s\nwant:\n%s", out, want)
	}
	// the gateway's own JSON, read back as a catalogue
	js := mustRun(t, e, "prices", "import", file, "--model", "claude-*", "--output", "json")
	var own map[string]map[string]any
	if err := json.Unmarshal([]byte(js), &own); err != nil || own["claude-sonnet-4-5"]["cache_write_1h"] != "6" {
		t.Fatalf("json output %s: %v", js, err)
	}
	mine := filepath.Join(t.TempDir(), "mine.json")
	bad := strings.Replace(js, `"claude-sonnet-4-5"`, `"ok-model": {"input": "1", "output": "2"}, "claude-sonnet-4-5"`, 1)
	bad = strings.Replace(bad, `"input": "3"`, `"input": "3.0000001"`, 1)
	if err := os.WriteFile(mine, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	out, stderr, err := runWithStderr(t, e, "prices", "import", mine)
	if err == nil || !strings.Contains(err.Error(), "1 entries could not be read") {
		t.Errorf("error %v", err)
	}
	if !strings.Contains(stderr, `model claude-sonnet-4-5: input: price "3.0000001" has more than six decimals`) {
		t.Errorf("stderr %q", stderr)
	}
	if out != "price ok-model {\n\tinput 1\n\toutput 2\n}\n" {
		t.Errorf("the good entry: %q", out)
	}
	wantError(t, e, "no such file", "prices", "import", filepath.Join(t.TempDir(), "none.json"))
	wantError(t, e, "not a JSON object of models", "prices", "import", "prices_test.go")
	wantError(t, e, "no model priced by tokens matches", "prices", "import", file, "--model", "nothing-*")
	wantError(t, e, `--output must be caddyfile or json`, "prices", "import", file, "--output", "yaml")
	wantError(t, e, "accepts 1 arg", "prices", "import")
}

// --diff prints only what is new or priced differently in the config,
// each after a comment saying what changed.
func TestPricesImportDiff(t *testing.T) {
	six, cached := int64(6_000_000), int64(300_000)
	e := Env{Prices: func(*cobra.Command) (map[string]*billing.Price, error) {
		return map[string]*billing.Price{
			// the same as the catalogue
			"gpt-4o-mini": {Input: 150_000, Output: 600_000, CachedInput: ptr(75_000), MaxOutput: 16384},
			// an older price, without the 1-hour write or the tier
			"claude-sonnet-4-5": {Input: 3_000_000, Output: 15_000_000, CachedInput: &cached, CacheWrite: ptr(3_750_000), MaxOutput: 64000,
				AudioInput: &six},
		}, nil
	}}
	file := filepath.Join("..", "billing", "testdata", "litellm_catalogue.json")
	out := mustRun(t, e, "prices", "import", file, "--diff", "--model", "gpt-4o-mini", "--model", "claude-*", "--model", "gemini-*")
	for _, want := range []string{
		"# changed: claude-sonnet-4-5: cache_write_1h unset -> 6; tiers none -> above 200000 {input 6 output 22.5 cached_input 0.6 cache_write 7.5 cache_write_1h 12}\n" +
			"# the config's price of claude-sonnet-4-5 has options a catalogue does not carry (audio, images, search, tasks): keep them\nprice claude-sonnet-4-5 {\n",
		"# new: gemini-2.5-pro has no price in the config\nprice gemini-2.5-pro {\n",
		"# 1 of the 3 models read are priced the same in the config\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("diff lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "price gpt-4o-mini") {
		t.Errorf("an unchanged price printed:\n%s", out)
	}
	wantError(t, Env{Prices: func(*cobra.Command) (map[string]*billing.Price, error) { return nil, nil }},
		"--diff needs the config", "prices", "import", file, "--diff")
	wantError(t, e, "--diff prints Caddyfile price blocks", "prices", "import", file, "--diff", "--output", "json")
}

func ptr(v int64) *int64 { return &v }
