// Package caddyopts holds the Caddyfile forms every vendor adapter shares
// (`type <name>` alone, or with a block of one-value options). It is apart
// from package adapters so that the engines, which import adapters, import
// no Caddy package.
package caddyopts

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
