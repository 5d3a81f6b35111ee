package keyauth

import (
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/caddy-model-gateway/gateway/keys"
)

// LogField is a request's id and, once its key is known, its identity,
// as the access log line carries them: request_id, gateway_user_id,
// gateway_user and gateway_token_id, written inline as one field (id nil:
// refused before the key was known).
func LogField(reqID string, id *keys.Identity) zap.Field {
	return zap.Field{Key: "gateway_request", Type: zapcore.InlineMarshalerType, Interface: &logFields{reqID, id}}
}

type logFields struct {
	requestID string
	id        *keys.Identity // nil: refused before the key was known
}

func (f *logFields) MarshalLogObject(enc zapcore.ObjectEncoder) error {
	enc.AddString("request_id", f.requestID)
	if f.id != nil {
		enc.AddInt64("gateway_user_id", f.id.User.ID)
		enc.AddString("gateway_user", f.id.User.Username)
		enc.AddInt64("gateway_token_id", f.id.Token.ID)
	}
	return nil
}
