// Command caddy is Caddy with its standard modules and the model gateway,
// built with plain `go build ./cmd/caddy`.
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/caddy-model-gateway/gateway"
)

func main() {
	caddycmd.Main()
}
