package adaptertest_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/adapters/adaptertest"
)

// The media kit must be able to fail: each case breaks a copy of OpenAI's
// media fixtures, the suite's word about the family, or the provider
// itself (wrapped to break one rule), and runs the kit in a child process,
// which must fail saying why.
func TestMediaKitFails(t *testing.T) {
	if dir := os.Getenv("ADAPTERTEST_MEDIA_CHILD"); dir != "" {
		s := adaptertest.MediaSuite{Name: "openai", Testdata: dir, KeyHeader: "Authorization",
			Images: true, ImageEdits: true, Speech: true, Transcriptions: true}
		p := openaiMedia(t)
		switch os.Getenv("ADAPTERTEST_BREAK") {
		case "serves":
			s.Speech = false
		case "key":
			s.Provider = keyInURL{p}
		case "whole":
			s.Provider = readsUploadsWhole{p}
		case "meter":
			s.Provider = meterLosesImages{p}
		}
		adaptertest.RunMedia(t, s)
		return
	}
	tests := []kitCase{
		{"intact", nil, "", ""},
		{"changed golden", func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "media", "request", "edit.golden"), "(no call)\n")
		}, "", "edit.golden differs"},
		{"stale golden", func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "media", "response", "gone.golden"), "\n")
		}, "", "gone.golden: no fixture checks this golden"},
		{"no transcription answered", func(t *testing.T, dir string) {
			for _, name := range []string{"transcription", "transcription-srt", "transcription-text", "truncated"} {
				rm(t, filepath.Join(dir, "media", "response", name+".json"))
				rm(t, filepath.Join(dir, "media", "response", name+".golden"))
			}
		}, "", "no response fixture answers a transcription"},
		{"served media disagree", nil, "serves", "ServesMedia(speech) = true, the suite says false"},
		{"the key in the URL", nil, "key", "the key travels in the URL or the body"},
		{"an upload read whole", nil, "whole", "whole before the upstream read a byte"},
		{"a meter that loses images", nil, "meter", "the meter read"},
	}
	runKitCases(t, "TestMediaKitFails", "ADAPTERTEST_MEDIA_CHILD", filepath.Join("..", "openai", "testdata"), tests)
}

// mediaProvider is what the openai family is for the media kit.
type mediaProvider interface {
	adapters.Provider
	adapters.MediaProvider
	adapters.MediaMeter
}

func openaiMedia(t *testing.T) mediaProvider {
	t.Helper()
	fs, err := adaptertest.Families()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fs {
		if p, ok := f.Provider.(mediaProvider); ok && f.Name == "openai" {
			return p
		}
	}
	t.Fatal("the openai family is no metered media provider")
	return nil
}

// keyInURL also puts the channel's key in the query.
type keyInURL struct{ mediaProvider }

func (p keyInURL) NewRequest(ctx context.Context, up *adapters.Upstream, req *adapters.Request) (*http.Request, error) {
	hr, err := p.mediaProvider.NewRequest(ctx, up, req)
	if err == nil {
		q := hr.URL.Query()
		q.Set("key", up.Key)
		hr.URL.RawQuery = q.Encode()
	}
	return hr, err
}

// readsUploadsWhole reads every uploaded file before building the request.
type readsUploadsWhole struct{ mediaProvider }

func (p readsUploadsWhole) NewRequest(ctx context.Context, up *adapters.Upstream, req *adapters.Request) (*http.Request, error) {
	if req.Media != nil && req.Media.Form != nil {
		for _, part := range req.Media.Form.Parts {
			if part.File == nil {
				continue
			}
			f, err := part.File.Open()
			if err != nil {
				return nil, err
			}
			_, _ = io.ReadAll(f)
			f.Close()
		}
	}
	return p.mediaProvider.NewRequest(ctx, up, req)
}

// meterLosesImages meters answers that count no images.
type meterLosesImages struct{ mediaProvider }

func (p meterLosesImages) NewMediaMeter(req *adapters.Request) adapters.MediaMeterWriter {
	if w := p.mediaProvider.NewMediaMeter(req); w != nil {
		return lostImages{w}
	}
	return nil
}

type lostImages struct{ adapters.MediaMeterWriter }

func (w lostImages) Result() (*adapters.MediaResponse, error) {
	resp, err := w.MediaMeterWriter.Result()
	if resp != nil {
		resp.Media.Images = 0
	}
	return resp, err
}

// kitCase is one way of breaking a kit's run: damage to a copy of the
// fixtures, a breakage the child reads from ADAPTERTEST_BREAK, and what
// the failure must say ("" for a run that must pass).
type kitCase struct {
	name    string
	damage  func(t *testing.T, dir string)
	breaks  string
	failure string
}

// runKitCases runs each case's kit in a child process of this test binary
// (test, told apart by childEnv holding the fixtures' copy), since a kit
// that fails marks its own test failed.
func runKitCases(t *testing.T, test, childEnv, testdata string, cases []kitCase) {
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			copyDir(t, testdata, dir)
			if tt.damage != nil {
				tt.damage(t, dir)
			}
			cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1")
			cmd.Env = append(os.Environ(), childEnv+"="+dir, "ADAPTERTEST_BREAK="+tt.breaks)
			out, err := cmd.CombinedOutput()
			if tt.failure == "" {
				if err != nil {
					t.Fatalf("the kit failed on intact fixtures:\n%s", out)
				}
				return
			}
			if err == nil || !strings.Contains(string(out), tt.failure) {
				t.Errorf("the kit did not fail saying %q (err %v):\n%s", tt.failure, err, out)
			}
		})
	}
}
