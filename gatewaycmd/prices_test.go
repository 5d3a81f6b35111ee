package gatewaycmd

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
