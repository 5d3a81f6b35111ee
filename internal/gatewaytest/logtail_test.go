package gatewaytest

import (
	"fmt"
	"strings"
	"testing"
)

func TestLogsTail(t *testing.T) {
	var b strings.Builder
	for i := range 100 {
		fmt.Fprintf(&b, "line %d %s\n", i, strings.Repeat("x", 700*(i%2)))
	}
	got := logsTail(b.String())
	if !strings.HasPrefix(got, " (the last 60 lines of 100,") {
		t.Errorf("heading %q", got[:60])
	}
	lines := strings.Split(got, "\n")[1:]
	if len(lines) != 60 || !strings.HasPrefix(lines[0], "line 40 ") || !strings.HasPrefix(lines[59], "line 99 ") {
		t.Errorf("%d lines, from %.10q to %.10q", len(lines), lines[0], lines[len(lines)-1])
	}
	for _, l := range lines {
		if len(l) > logLineWidth+len(" […]") {
			t.Errorf("a line of %d bytes", len(l))
		}
	}
	if short := "a\nb\n"; logsTail(short) != ":\n"+short {
		t.Errorf("a short log: %q", logsTail(short))
	}
	t.Setenv("GATEWAY_TEST_LOG_LINES", "0")
	if logsTail(b.String()) != ":\n"+b.String() {
		t.Error("GATEWAY_TEST_LOG_LINES=0 shows the log whole")
	}
}
