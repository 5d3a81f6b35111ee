package openaicompat

import (
	"bytes"
	"net/http"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// errorChunkStep reads a stream whose vendor reports a failure after the
// stream began as a chunk with an error member and finish_reason "error"
// (OpenRouter: {"id":...,"error":{"code":"server_error","message":...},
// "choices":[{"delta":{"content":""},"finish_reason":"error"}]}): the
// stream fails with the error, where OpenAI's step would take the finish
// for a normal end.
type errorChunkStep struct {
	adapters.StreamStep
	decode func(int, []byte) *adapters.Error
}

var (
	finishKey   = adapters.Key("finish_reason")
	errorReason = []byte(`"error"`)
)

// failed is the chunk's error when its finish reason is "error", however
// the JSON is spaced.
func (s *errorChunkStep) failed(data []byte) error {
	if v, ok := adapters.MemberValue(data, finishKey); !ok || !bytes.HasPrefix(v, errorReason) {
		return nil
	}
	e := s.decode(http.StatusBadGateway, data)
	return e
}

// Translate implements adapters.StreamStep.
func (s *errorChunkStep) Translate(out []*adapters.StreamEvent, ev *adapters.SSEEvent) ([]*adapters.StreamEvent, adapters.StreamEnd, error) {
	if err := s.failed(ev.Data); err != nil {
		return out, adapters.StreamGoesOn, err
	}
	return s.StreamStep.Translate(out, ev)
}

// Probe implements adapters.StreamStep.
func (s *errorChunkStep) Probe(ev *adapters.SSEEvent) (*adapters.Usage, adapters.StreamEnd, error) {
	if err := s.failed(ev.Data); err != nil {
		return nil, adapters.StreamGoesOn, err
	}
	return s.StreamStep.Probe(ev)
}
