package tracing

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel/trace"
)

// named is a span that tells its name: the SDK's spans do (as a
// ReadOnlySpan); a span of another SDK that does not is left alone.
type named interface{ Name() string }

// StripSpanName takes a key a handler stripped from a request out of the
// name of ctx's span. Caddy's `tracing { span ... }` names the server span
// from placeholders before any handler runs, so a name such as
// {http.request.uri} holds the ?key= a client sent; old is replaced with
// stripped (the query as it was and as it is now), then any key left is
// cut out. Nothing happens when ctx's span does not record or keeps no
// such text.
func StripSpanName(ctx context.Context, key, old, stripped string) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() || key == "" {
		return
	}
	n, ok := span.(named)
	if !ok {
		return
	}
	name := n.Name()
	if !strings.Contains(name, key) {
		return
	}
	if old != "" {
		name = strings.ReplaceAll(name, old, stripped)
	}
	span.SetName(strings.ReplaceAll(name, key, ""))
}
