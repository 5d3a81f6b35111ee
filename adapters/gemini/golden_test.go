package gemini_test

import (
	"github.com/caddy-model-gateway/gateway/internal/goldentest"
)

// The shared golden-file helpers, under the names these tests use.
var (
	golden  = goldentest.Golden
	neutral = goldentest.Neutral
	chatOf  = goldentest.ChatOf
	inputs  = goldentest.Inputs
	read    = goldentest.Read
	base    = goldentest.Base
	post    = goldentest.Post
)
