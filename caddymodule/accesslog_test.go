package caddymodule

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/caddy-model-gateway/gateway/keys"
	"github.com/caddy-model-gateway/gateway/store"
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

// The identity's log fields, set as one inline field, write what the three
// separate fields wrote, in JSON and on the console.
func TestIdentityLogFieldsInline(t *testing.T) {
	id := &keys.Identity{User: &store.User{ID: 7, Username: "ada \"l\""}, Token: &store.Token{ID: 42}}
	separate := []zapcore.Field{zap.Int64("gateway_user_id", 7), zap.String("gateway_user", "ada \"l\""), zap.Int64("gateway_token_id", 42)}
	cfg := zap.NewProductionEncoderConfig()
	for name, enc := range map[string]zapcore.Encoder{"json": zapcore.NewJSONEncoder(cfg), "console": zapcore.NewConsoleEncoder(cfg)} {
		entry := zapcore.Entry{Message: "handled request"}
		want, err := enc.EncodeEntry(entry, separate)
		if err != nil {
			t.Fatal(err)
		}
		wantLine := want.String()
		got, err := enc.EncodeEntry(entry, []zapcore.Field{identityLogFields(id)})
		if err != nil {
			t.Fatal(err)
		}
		if got.String() != wantLine {
			t.Errorf("%s: inline %q, separate %q", name, got.String(), wantLine)
		}
	}
}
