package caddymodule

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
)

// trace_content without a size records 16 KiB; a size out of range is
// refused with what it takes.
func TestTraceContentOption(t *testing.T) {
	adapt := func(body string) (string, error) {
		src := "{\n\tgateway {\n" + body + "\n\t}\n}\n:8080 {\n\trespond ok\n}\n"
		out, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(src), nil)
		return string(out), err
	}
	if out, err := adapt("trace_content"); err != nil || !strings.Contains(out, `"trace_content":16384`) {
		t.Fatalf("trace_content alone: %v %s", err, out)
	}
	for _, bad := range []string{"trace_content lots", "trace_content 0", "trace_content 2MiB"} {
		if _, err := adapt(bad); err == nil || !strings.Contains(err.Error(), "trace_content: a size from 1B to 1MiB") {
			t.Errorf("%s: err = %v", bad, err)
		}
	}
}
