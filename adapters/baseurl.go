package adapters

// BaseURLDefaulter is implemented by a family whose upstream address
// follows from its own options (a cloud region's endpoint), so a channel
// may leave base_url out; a family reached at an address only the operator
// knows has no default, and its channels must set base_url.
type BaseURLDefaulter interface {
	DefaultBaseURL() string
}
