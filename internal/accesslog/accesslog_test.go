package accesslog

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
)

// The gateway's access log line goes where Caddy's server would send it.
func TestAccessLoggerNames(t *testing.T) {
	slc := &caddyhttp.ServerLogConfig{
		DefaultLoggerName: "default",
		LoggerNames: map[string]caddyhttp.StringArray{
			"api.example.com":   {"api"},
			"*.example.com":     {"wild"},
			"both.example.com":  {"one", "two"},
			"skipped.other.org": {"named"},
		},
		SkipHosts: []string{"skipped.other.org", "quiet.other.org"},
	}
	for _, c := range []struct {
		host string
		want []string
		logs bool
	}{
		{"api.example.com:8443", []string{"api"}, true},
		{"API.example.com", []string{"api"}, true},
		{"www.example.com", []string{"wild"}, true},
		{"both.example.com", []string{"one", "two"}, true},
		{"other.org", []string{"default"}, true},
		{"quiet.other.org", []string{"default"}, false},
		{"skipped.other.org", []string{"named"}, true}, // a named host is logged though skipped
	} {
		var got []string
		r := (&http.Request{Host: c.host}).WithContext(context.Background())
		for _, l := range accessLoggers(slc, zap.NewNop().Named("http.log.access"), r) {
			got = append(got, strings.TrimPrefix(l.Name(), "http.log.access."))
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: loggers %v, want %v", c.host, got, c.want)
		}
		if got := logsHost(slc, c.host); got != c.logs {
			t.Errorf("%s: logged %v, want %v", c.host, got, c.logs)
		}
	}
	slc.SkipUnmappedHosts = true
	if logsHost(slc, "other.org") || !logsHost(slc, "api.example.com") {
		t.Error("skip_unmapped_hosts: only mapped hosts are logged")
	}
}
