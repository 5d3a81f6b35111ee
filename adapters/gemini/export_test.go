package gemini

import (
	"context"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// SetFetchImage replaces the image fetcher for a test and returns the
// function that restores it.
func SetFetchImage(f func(context.Context, string) (*adapters.Image, error)) (restore func()) {
	old := fetchImage
	fetchImage = f
	return func() { fetchImage = old }
}
