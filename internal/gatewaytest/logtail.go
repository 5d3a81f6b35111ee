package gatewaytest

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// A failed test shows its gateway's log, which can run to thousands of
// lines; CI shows only the beginning and the end of a run's output, so a
// whole log hid the failure's own message between them. A failure shows
// the log's last lines, each cut to a width, which are the ones around
// what went wrong; GATEWAY_TEST_LOG_LINES sets how many (0: all, uncut).
const (
	defaultLogLines = 60
	logLineWidth    = 600
)

// logsTail is the heading and text a failed test shows of logs.
func logsTail(logs string) string {
	n := defaultLogLines
	if v, err := strconv.Atoi(os.Getenv("GATEWAY_TEST_LOG_LINES")); err == nil && v >= 0 {
		n = v
	}
	lines := strings.Split(strings.TrimRight(logs, "\n"), "\n")
	if n == 0 || len(lines) <= n && len(logs) <= n*logLineWidth {
		return ":\n" + logs
	}
	head := fmt.Sprintf(" (the last %d lines of %d, each cut at %d bytes; GATEWAY_TEST_LOG_LINES=0 shows all):\n", min(n, len(lines)), len(lines), logLineWidth)
	lines = lines[max(0, len(lines)-n):]
	for i, l := range lines {
		if len(l) > logLineWidth {
			lines[i] = l[:logLineWidth] + " […]"
		}
	}
	return head + strings.Join(lines, "\n")
}
