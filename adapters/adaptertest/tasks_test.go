package adaptertest_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters/adaptertest"
)

// The task kit must be able to fail too: each case breaks a copy of Vidu's
// fixtures (or the suite's word about it) and runs the kit in a child
// process, which must fail saying why.
func TestTaskKitFails(t *testing.T) {
	if dir := os.Getenv("ADAPTERTEST_TASKS_CHILD"); dir != "" {
		owned := []string{"model", "images", "duration", "resolution", "is_rec", "audio"}
		if os.Getenv("ADAPTERTEST_TASKS_OWNED") != "" {
			owned = owned[:2]
		}
		adaptertest.RunTasks(t, adaptertest.TaskSuite{Name: "vidu", Testdata: dir, KeyHeader: "Authorization",
			Callback: os.Getenv("ADAPTERTEST_TASKS_NO_CALLBACK") == "", Owned: owned})
		return
	}
	tests := []struct {
		name   string
		damage func(t *testing.T, dir string)
		env    string
		want   string
	}{
		{"intact", func(*testing.T, string) {}, "", ""},
		{"changed golden", func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "tasks", "submit", "text-to-video.golden"), "(no call)\n")
		}, "", "text-to-video.golden differs"},
		{"stale golden", func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "tasks", "poll", "gone.golden"), "\n")
		}, "", "gone.golden: no fixture checks this golden"},
		{"no failed state", func(t *testing.T, dir string) {
			rm(t, filepath.Join(dir, "tasks", "poll", "failed.json"))
			rm(t, filepath.Join(dir, "tasks", "poll", "failed.golden"))
		}, "", "no poll fixture reaches failed"},
		{"owned fields disagree", func(*testing.T, string) {}, "ADAPTERTEST_TASKS_OWNED=1", "OwnedFields()"},
		{"callback capability disagrees", func(*testing.T, string) {}, "ADAPTERTEST_TASKS_NO_CALLBACK=1", "CallbackCapable() = true"},
		{"an answer missing", func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "tasks", "poll", "success.json"), `{"id": "vt-1"}`)
		}, "", "success.golden differs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			copyDir(t, filepath.Join("..", "vidu", "testdata"), dir)
			tt.damage(t, dir)
			cmd := exec.Command(os.Args[0], "-test.run=^TestTaskKitFails$", "-test.count=1")
			cmd.Env = append(os.Environ(), "ADAPTERTEST_TASKS_CHILD="+dir)
			if tt.env != "" {
				cmd.Env = append(cmd.Env, tt.env)
			}
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
