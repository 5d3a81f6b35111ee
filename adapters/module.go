package adapters

import "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

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
