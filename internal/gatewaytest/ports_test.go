package gatewaytest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// A port another live test process claimed is not handed out; one whose
// claimant is gone is taken over.
func TestClaimPortAcrossProcesses(t *testing.T) {
	dir := filepath.Join(os.TempDir(), "gatewaytest-ports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	port := FreePort(t)
	held, err := os.ReadFile(filepath.Join(dir, strconv.Itoa(port)))
	if err != nil || string(held) != strconv.Itoa(os.Getpid()) {
		t.Fatalf("FreePort's claim: %q, %v", held, err)
	}
	if claimPort(port) {
		t.Fatal("a port this process holds was claimed again")
	}

	// a live process's claim holds
	sleeper := exec.Command("sleep", "30")
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	live := 65000 + os.Getpid()%500
	path := filepath.Join(dir, strconv.Itoa(live))
	t.Cleanup(func() { _ = sleeper.Process.Kill(); _ = os.Remove(path) })
	if err := os.WriteFile(path, []byte(strconv.Itoa(sleeper.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	if claimPort(live) {
		t.Fatal("a live process's port was claimed")
	}
	// once it is gone, the claim is taken over
	_ = sleeper.Process.Kill()
	_ = sleeper.Wait()
	if !claimPort(live) {
		t.Fatal("a gone process's port was not taken over")
	}
	if held, _ := os.ReadFile(path); string(held) != strconv.Itoa(os.Getpid()) {
		t.Fatalf("the claim holds %q, want this process's pid", held)
	}
}
