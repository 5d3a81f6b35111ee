package kling

import "github.com/caddyserver/caddy/v2"

func caddyContext() caddy.Context { return caddy.Context{} }
