package azure_test

import (
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/adapters/adaptertest"
	"github.com/caddy-model-gateway/gateway/adapters/azure"
)

// TestConformance checks Azure OpenAI's deployment contract (paths,
// api-version, the api-key header, OpenAI's error envelope) against the
// fixtures under testdata/azure.
func TestConformance(t *testing.T) {
	adaptertest.RunAzure(t, adaptertest.AzureSuite{
		Name:              "azure",
		DefaultAPIVersion: azure.DefaultAPIVersion,
		Refused:           []adapters.Operation{adapters.OpRerank, adapters.OpImage, adapters.OpSpeech, adapters.OpResponses},
	})
}
