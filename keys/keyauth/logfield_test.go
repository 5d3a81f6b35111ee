package keyauth

import (
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/caddy-model-gateway/gateway/keys"
	"github.com/caddy-model-gateway/gateway/store"
)

// The request's log fields, set as one inline field, write what separate
// fields wrote, in JSON and on the console: the request id alone for a
// request refused before its key was known, the id and the identity after.
func TestAccessLogFieldsInline(t *testing.T) {
	id := &keys.Identity{User: &store.User{ID: 7, Username: "ada \"l\""}, Token: &store.Token{ID: 42}}
	cases := []struct {
		id       *keys.Identity
		separate []zapcore.Field
	}{
		{nil, []zapcore.Field{zap.String("request_id", "r-1")}},
		{id, []zapcore.Field{zap.String("request_id", "r-1"), zap.Int64("gateway_user_id", 7), zap.String("gateway_user", "ada \"l\""), zap.Int64("gateway_token_id", 42)}},
	}
	cfg := zap.NewProductionEncoderConfig()
	for _, c := range cases {
		for name, enc := range map[string]zapcore.Encoder{"json": zapcore.NewJSONEncoder(cfg), "console": zapcore.NewConsoleEncoder(cfg)} {
			entry := zapcore.Entry{Message: "handled request"}
			want, err := enc.EncodeEntry(entry, c.separate)
			if err != nil {
				t.Fatal(err)
			}
			wantLine := want.String()
			got, err := enc.EncodeEntry(entry, []zapcore.Field{LogField("r-1", c.id)})
			if err != nil {
				t.Fatal(err)
			}
			if got.String() != wantLine {
				t.Errorf("%s: inline %q, separate %q", name, got.String(), wantLine)
			}
		}
	}
}
