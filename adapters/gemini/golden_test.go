package gemini_test

import (
	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/adapters/gemini"
	"github.com/caddy-model-gateway/gateway/internal/goldentest"
)

// The shared test helpers, under the names these tests use.
var (
	read  = goldentest.Read
	post  = goldentest.Post
	drain = goldentest.Drain
)

var (
	gem  adapters.Dialect = gemini.Adapter{}
	prov                  = gemini.Adapter{}
)
