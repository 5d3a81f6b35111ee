package adapters

import (
	"bytes"
	"context"
	"fmt"
	"net/http"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

// UnmarshalNoOptions is the Caddyfile form of an adapter that takes no
// options: the channel's `type <name>` alone, without a block.
func UnmarshalNoOptions(d *caddyfile.Dispenser) error {
	d.Next() // the adapter's name
	name := d.Val()
	if d.NextArg() {
		return d.ArgErr()
	}
	if d.NextBlock(0) {
		return d.Errf("the %s adapter takes no options, so 'type %s' needs no block", name, name)
	}
	return nil
}

// UnmarshalOptions is the Caddyfile form of an adapter with options:
// `type <name> { <option> <value> ... }`, set called for each line, which
// must hold exactly one value.
func UnmarshalOptions(d *caddyfile.Dispenser, set func(opt, value string) error) error {
	d.Next() // the adapter's name
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		opt := d.Val()
		var v string
		if !d.AllArgs(&v) {
			return d.ArgErr()
		}
		if err := set(opt, v); err != nil {
			return err
		}
	}
	return nil
}

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
