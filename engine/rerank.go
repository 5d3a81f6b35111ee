package engine

import (
	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/billing"
	"github.com/caddy-model-gateway/gateway/tokenizer"
)

// Bounds of a rerank's worst case. A token is at least a byte, and a
// rerank model reads each document beside the query, with a few special
// tokens per pair. Upstreams that bill by search (Cohere) count a search
// unit per rerankSearchDocs documents, each document split into chunks of
// rerankChunkTokens tokens, query included.
const (
	rerankPairTokens  = 8
	rerankSearchDocs  = 100
	rerankChunkTokens = 500
)

// RerankReservation is a rerank's worst-case cost, whether its upstream
// reports tokens or search units: every document read beside the query,
// at the input price, plus the search units those pairs could make up, at
// the search-unit price.
func RerankReservation(req *adapters.RerankRequest, price *billing.Price) int64 {
	q := int64(len(req.Query))
	var tokens, chunks int64
	for _, d := range req.Documents {
		pair := q + int64(len(d)) + rerankPairTokens
		tokens += pair
		chunks += max(1, (pair+rerankChunkTokens-1)/rerankChunkTokens)
	}
	units := (chunks + rerankSearchDocs - 1) / rerankSearchDocs
	return price.Cost(adapters.Usage{PromptTokens: tokens, SearchUnits: units})
}

// RerankTokens counts a rerank locally, for an upstream that reported no
// usage: the query once beside each document.
func RerankTokens(model string, req *adapters.RerankRequest) int64 {
	q := tokenizer.Count(model, req.Query)
	n := int64(0)
	for _, d := range req.Documents {
		n += q + tokenizer.Count(model, d)
	}
	return n
}
