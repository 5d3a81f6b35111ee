package azure

import (
	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/adapters/openai"
)

// ImageTokens implements adapters.ImageTokens: Azure OpenAI counts images
// as OpenAI does, by the model behind the deployment.
func (Adapter) ImageTokens(deployment string) int64 { return openai.ImageTokensFor(deployment) }

var _ adapters.ImageTokens = Adapter{}
