package caddymodule

import (
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
)

func TestAdaptAlertsErrors(t *testing.T) {
	for _, tt := range []struct{ name, body, want string }{
		{"threshold above 100", "alerts {\n thresholds 50% 120%\n}", "not between 1% and 100%"},
		{"threshold not a number", "alerts {\n thresholds half\n}", "not a whole percentage"},
		{"no thresholds", "alerts {\n thresholds\n}", "needs at least one percentage"},
		{"two webhooks", "alerts {\n webhook a b\n}", "webhook takes one value"},
		{"bad timeout", "alerts {\n timeout soon\n}", "timeout must be a duration"},
		{"bad attempts", "alerts {\n max_attempts 0\n}", "max_attempts must be a positive integer"},
		{"bad backoff", "alerts {\n backoff 1s 2s 3s\n}", "backoff takes the first wait"},
		{"unknown", "alerts {\n colour red\n}", `unrecognized option "colour"`},
		{"argument", "alerts on", "wrong argument count"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			src := "{\n\tgateway {\n" + tt.body + "\n\t}\n}\n:8080 {\n\trespond ok\n}\n"
			_, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(src), nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
}
