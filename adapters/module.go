package adapters

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
)

// NewJSONRequest builds an upstream POST of a JSON body. A streamed call
// asks for text/event-stream. The vendor adds its key where its API wants
// it (never from the client's request, whose headers are not copied).
func NewJSONRequest(ctx context.Context, url string, body []byte, stream bool) (*http.Request, error) {
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("building upstream request: %w", err)
	}
	hr.Header.Set("Content-Type", "application/json")
	if stream {
		hr.Header.Set("Accept", "text/event-stream")
	}
	return hr, nil
}
