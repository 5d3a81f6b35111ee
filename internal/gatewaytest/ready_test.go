package gatewaytest

import (
	"net"
	"os"
	"os/exec"
	"testing"
)

// TestListensOn: a port counts as the gateway's only when the process
// itself holds the listening socket, not when another process does.
func TestListensOn(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	if !listensOn(os.Getpid(), port) {
		t.Errorf("this process listens on %d, and listensOn says it does not", port)
	}
	other := exec.Command("sleep", "30")
	if err := other.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = other.Process.Kill(); _ = other.Wait() }()
	if listensOn(other.Process.Pid, port) {
		t.Errorf("listensOn says process %d listens on %d, which this process holds", other.Process.Pid, port)
	}
	l.Close()
	if listensOn(os.Getpid(), port) {
		t.Errorf("the listener on %d is closed, and listensOn says it is there", port)
	}
}
