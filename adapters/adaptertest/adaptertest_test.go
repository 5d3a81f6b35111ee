package adaptertest_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters/adaptertest"
)

// The kit must be able to fail. Each case breaks a copy of a family's
// fixtures and runs the kit on it in a child process, which must fail
// saying why.
func TestKitFails(t *testing.T) {
	if dir := os.Getenv("ADAPTERTEST_CHILD"); dir != "" {
		adaptertest.Run(t, adaptertest.Suite{Name: "anthropic", Testdata: dir, UpstreamModel: "claude-sonnet-4-5", CountTokens: true,
			Refusals: []adaptertest.Refusal{{Name: "empty", Body: "", Status: 400, Message: "empty"}}})
		return
	}
	tests := []struct {
		name   string
		damage func(t *testing.T, dir string)
		want   string
	}{
		{"intact", func(*testing.T, string) {}, ""},
		{"no fixtures", func(t *testing.T, dir string) { rm(t, filepath.Join(dir, "stream")) }, "no fixtures"},
		{"changed golden", func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "response", "text.anthropic.to-openai.golden"), "{}\n")
		}, "text.anthropic.to-openai.golden differs"},
		{"missing golden", func(t *testing.T, dir string) {
			rm(t, filepath.Join(dir, "stream", "tools.anthropic.to-gemini.golden"))
		}, "does not exist yet: run go test -update"},
		{"stale golden", func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "decode", "gone.neutral.golden"), "{}\n")
		}, "gone.neutral.golden is checked by no fixture"},
		{"new fixture", func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "decode", "odd.json"), `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":"hi"}],"x":1}`)
		}, "odd.neutral.golden does not exist yet"},
		{"unknown family", func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "response", "a.nosuchvendor.json"), "{}")
		}, `no family "nosuchvendor" is registered`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			copyDir(t, filepath.Join("..", "anthropic", "testdata"), dir)
			tt.damage(t, dir)
			cmd := exec.Command(os.Args[0], "-test.run=^TestKitFails$", "-test.count=1")
			cmd.Env = append(os.Environ(), "ADAPTERTEST_CHILD="+dir)
			out, err := cmd.CombinedOutput()
			if tt.want == "" {
				if err != nil {
					t.Fatalf("the kit failed on intact fixtures:\n%s", out)
				}
				return
			}
			if err == nil || !strings.Contains(string(out), tt.want) {
				t.Errorf("the kit did not fail saying %q (err %v):\n%s", tt.want, err, out)
			}
		})
	}
}

func TestReadRequests(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.http")
	write(t, path, "# comment\nPOST /v1/messages\nanthropic-version: 2023-06-01\n\nGET /v1/models?x=1\n")
	rs, err := adaptertest.ReadRequests(path)
	if err != nil || len(rs) != 2 {
		t.Fatalf("%v %d", err, len(rs))
	}
	if rs[0].Method != "POST" || rs[0].URL.Path != "/v1/messages" || rs[0].Header.Get("Anthropic-Version") != "2023-06-01" ||
		rs[1].Method != "GET" || rs[1].URL.Query().Get("x") != "1" || len(rs[1].Header) != 0 {
		t.Errorf("requests %+v %+v", rs[0], rs[1])
	}
	write(t, path, "# nothing\n")
	if _, err := adaptertest.ReadRequests(path); err == nil {
		t.Error("a file without requests was accepted")
	}
}

func TestFamilies(t *testing.T) {
	fs, err := adaptertest.Families()
	if err != nil {
		t.Fatal(err)
	}
	var dialects, providers int
	for _, f := range fs {
		if f.Dialect != nil {
			dialects++
		}
		if f.Provider != nil {
			providers++
		}
	}
	if dialects < 3 || providers < 3 {
		t.Errorf("%d dialects and %d providers registered: adapters/all imports fewer families than the project ships", dialects, providers)
	}
}

func rm(t *testing.T, path string) {
	t.Helper()
	if err := os.RemoveAll(path); err != nil {
		t.Fatal(err)
	}
}

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}
