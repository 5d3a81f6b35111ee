package adaptertest_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/adapters/adaptertest"
)

// The local kit must be able to fail: each case breaks a copy of the demo
// model's fixtures or wraps the model to break one rule, and runs the kit
// in a child process, which must fail saying why.
func TestLocalKitFails(t *testing.T) {
	if dir := os.Getenv("ADAPTERTEST_LOCAL_CHILD"); dir != "" {
		s := adaptertest.LocalSuite{Name: "demo", Testdata: dir, Options: json.RawMessage(`{"word_delay": "1ns"}`)}
		if os.Getenv("ADAPTERTEST_BREAK") == "usage" {
			s.Provider = unbilled{demo(t)}
		}
		adaptertest.RunLocal(t, s)
		return
	}
	tests := []kitCase{
		{"intact", nil, "", ""},
		{"changed golden", func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "local", "chat.golden"), "{}\n")
		}, "", "chat.golden differs"},
		{"stale golden", func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "local", "gone.golden"), "{}\n")
		}, "", "gone.golden: no fixture checks this golden"},
		{"answers without usage", nil, "usage", "an answer without the usage it is billed by"},
	}
	runKitCases(t, "TestLocalKitFails", "ADAPTERTEST_LOCAL_CHILD", filepath.Join("..", "demo", "testdata"), tests)
}

// local is what the demo family is for the local kit.
type local interface {
	adapters.ChatProvider
	adapters.Transporter
}

func demo(t *testing.T) local {
	t.Helper()
	fs, err := adaptertest.Families()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fs {
		if p, ok := f.Provider.(local); ok && f.Name == "demo" {
			return p
		}
	}
	t.Fatal("the demo family is no local provider")
	return nil
}

// unbilled reads answers without their usage.
type unbilled struct{ local }

func (p unbilled) DecodeResponse(req *adapters.Request, body []byte) (*adapters.Response, error) {
	resp, err := p.local.DecodeResponse(req, body)
	if resp != nil {
		resp.Usage = adapters.Usage{}
	}
	return resp, err
}
