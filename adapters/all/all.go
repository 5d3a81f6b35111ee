// Package all registers every vendor family this project ships as a
// gateway.adapters.* Caddy module. Adding a family is one blank import
// here. The root package imports this one, and so do tests that need every
// dialect (the conformance kit, the Caddyfile tests).
package all

import (
	_ "github.com/caddy-model-gateway/gateway/adapters/anthropic"
	_ "github.com/caddy-model-gateway/gateway/adapters/azure"
	_ "github.com/caddy-model-gateway/gateway/adapters/bedrock"
	_ "github.com/caddy-model-gateway/gateway/adapters/cohere"
	_ "github.com/caddy-model-gateway/gateway/adapters/demo"
	_ "github.com/caddy-model-gateway/gateway/adapters/gemini"
	_ "github.com/caddy-model-gateway/gateway/adapters/jina"
	_ "github.com/caddy-model-gateway/gateway/adapters/kling"
	_ "github.com/caddy-model-gateway/gateway/adapters/minimax"
	_ "github.com/caddy-model-gateway/gateway/adapters/openai"
	_ "github.com/caddy-model-gateway/gateway/adapters/openaicompat"
	_ "github.com/caddy-model-gateway/gateway/adapters/seedance"
	_ "github.com/caddy-model-gateway/gateway/adapters/vertex"
	_ "github.com/caddy-model-gateway/gateway/adapters/vidu"
)
