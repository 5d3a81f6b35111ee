package adapters

import "net/http"

// MaxRerankDocuments bounds the documents of one rerank request, as the
// rerank APIs do (Cohere recommends at most 1,000 a request).
const MaxRerankDocuments = 1000

// RerankRequest asks for documents ordered by relevance to a query.
type RerankRequest struct {
	Query     string
	Documents []string
	// TopN is how many results to return, the most relevant first; 0
	// means all of them.
	TopN int
	// ReturnDocuments asks for each result's text beside its index. The
	// gateway fills it in from the request, so upstreams are never asked
	// to send documents back.
	ReturnDocuments bool
}

// RerankResult is one document's place in a ranking.
type RerankResult struct {
	Index          int // the document's position in the request
	RelevanceScore float64
}

// CheckRerankResults refuses a ranking that names a document the request
// did not have, or more results than it asked for: an upstream answer that
// cannot be true is not relayed.
func CheckRerankResults(req *RerankRequest, results []RerankResult) error {
	want := len(req.Documents)
	if req.TopN > 0 {
		want = min(want, req.TopN)
	}
	if len(results) > want {
		return Errorf(http.StatusBadGateway, ErrAPI, "the upstream returned %d rerank results for %d documents (top_n %d)", len(results), len(req.Documents), req.TopN)
	}
	for _, r := range results {
		if r.Index < 0 || r.Index >= len(req.Documents) {
			return Errorf(http.StatusBadGateway, ErrAPI, "the upstream ranked document %d of %d", r.Index, len(req.Documents))
		}
	}
	return nil
}
