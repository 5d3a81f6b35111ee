package caddymodule

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
)

// stream_drain_timeout takes a duration or off; stream_drain_max_bytes a
// size; anything else is refused with what they take.
func TestStreamDrainOptions(t *testing.T) {
	adapt := func(body string) (string, error) {
		src := "{\n\tgateway {\n" + body + "\n\t}\n}\n:8080 {\n\trespond ok\n}\n"
		out, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(src), nil)
		return string(out), err
	}
	for body, want := range map[string]string{
		"stream_drain_timeout 5s":      `"stream_drain_timeout":5000000000`,
		"stream_drain_timeout off":     `"stream_drain_timeout":-1`,
		"stream_drain_max_bytes 16KiB": `"stream_drain_max_bytes":16384`,
	} {
		if out, err := adapt(body); err != nil || !strings.Contains(out, want) {
			t.Errorf("%s: %v %s", body, err, out)
		}
	}
	for _, bad := range []string{"stream_drain_timeout", "stream_drain_timeout soon", "stream_drain_timeout 0s", "stream_drain_max_bytes 0", "stream_drain_max_bytes lots"} {
		if _, err := adapt(bad); err == nil || !strings.Contains(err.Error(), strings.Fields(bad)[0]) && !strings.Contains(err.Error(), "argument") {
			t.Errorf("%s: err = %v", bad, err)
		}
	}
}
