package adapters

// ModelEncoder is implemented by dialects that can render a single model
// object, for GET /v1/models/{id} and GET /v1beta/models/{model}.
type ModelEncoder interface {
	EncodeModel(m ModelInfo) []byte
}
