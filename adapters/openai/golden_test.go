package openai_test

import (
	"regexp"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/adapters/openai"
	"github.com/caddy-model-gateway/gateway/internal/goldentest"
)

// The shared golden-file helpers, under the names these tests use.
var (
	golden = goldentest.Golden
	inputs = goldentest.Inputs
	read   = goldentest.Read
	base   = goldentest.Base
	post   = goldentest.Post
	stem   = goldentest.Stem
	drain  = goldentest.Drain
)

var (
	oai  adapters.Dialect = openai.Adapter{}
	prov                  = openai.Adapter{}
)

var (
	// ids the encoders make up from the clock; recorded ids carry capitals
	genIDRe = regexp.MustCompile(`"chatcmpl-[0-9a-z]+"`)
)

// stable blanks what encoders fill from the clock.
func stable(b []byte) []byte {
	return genIDRe.ReplaceAll(goldentest.Stable(b), []byte(`"chatcmpl-GENERATED"`))
}
