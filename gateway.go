// Package gateway is the Caddy Model Gateway: a model gateway built as Caddy
// plugins. Importing this package registers every module it consists of, so
// `xcaddy build --with github.com/caddy-model-gateway/gateway=./` builds a
// Caddy with the whole gateway, and cmd/caddy does the same without xcaddy.
package gateway

import (
	// the Caddy glue: app, handlers, Caddyfile, CLI
	_ "github.com/caddy-model-gateway/gateway/caddymodule"
	// HTTP/2 extended CONNECT for WebSockets (see the package)
	_ "github.com/caddy-model-gateway/gateway/internal/h2xconnect"

	// upstream families (gateway.adapters.*), one blank import each there
	_ "github.com/caddy-model-gateway/gateway/adapters/all"

	// payment providers (gateway.payments.*) for self-serve top-up
	_ "github.com/caddy-model-gateway/gateway/payments/stripe"

	// stores: SQLite for one machine, PostgreSQL for several instances
	_ "github.com/caddy-model-gateway/gateway/store/postgres"
	_ "github.com/caddy-model-gateway/gateway/store/sqlite"
)
