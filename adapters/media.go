package adapters

import (
	"context"
	"io"
	"net/http"
)

// Media requests: image generations and edits, speech and transcriptions.
// They are billed by what they produce (images, seconds of audio,
// characters) rather than by tokens alone, and the multipart ones carry
// uploads the gateway never holds in memory: the relay spools each file
// part to a temporary file and a provider re-sends it from there for each
// attempt.

// MediaRequest is what a media request asks for, as far as routing,
// billing and translation need to know.
type MediaRequest struct {
	// Edit is true for an image edit (multipart, with images), false for
	// a generation.
	Edit bool
	// Prompt is the image prompt.
	Prompt string
	// N is how many images are asked for (1 when the client said nothing).
	N int64
	// Size and Quality as asked, or as the vendor's default for the model
	// when the client said nothing; "auto" or "" when the model decides.
	Size, Quality string
	// ResponseFormat is the answer's format the client asked for: url or
	// b64_json for images; json, text, srt, vtt or verbose_json for
	// transcriptions ("" when unset: the vendor's default).
	ResponseFormat string
	// Input is the text to speak (speech), counted for billing.
	Input string
	// Form is the multipart body of an upload (image edits,
	// transcriptions), its parts in the order the client sent them.
	Form *Form
}

// Form is a multipart/form-data body as the client sent it: its small
// fields held in memory, its files spooled to disk.
type Form struct {
	Parts []FormPart
}

// FormPart is a field (File nil) or a file part.
type FormPart struct {
	Name  string
	Value string    // a field's value
	File  *FormFile // a file part
}

// FormFile is an uploaded file, spooled by the gateway.
type FormFile struct {
	Filename    string
	ContentType string
	Size        int64
	// Open reads the file from its start; each attempt on a channel opens
	// it anew, so a failover re-sends the same bytes.
	Open func() (io.ReadCloser, error)
}

// Value returns the last value of a field, and whether it was sent.
func (f *Form) Value(name string) (string, bool) {
	v, ok := "", false
	for _, p := range f.Parts {
		if p.File == nil && p.Name == name {
			v, ok = p.Value, true
		}
	}
	return v, ok
}

// Files returns the file parts sent under any of the names, in order.
func (f *Form) Files(names ...string) []*FormFile {
	var out []*FormFile
	for _, p := range f.Parts {
		if p.File == nil {
			continue
		}
		for _, n := range names {
			if p.Name == n {
				out = append(out, p.File)
				break
			}
		}
	}
	return out
}

// MediaUsage is what a media answer produced, for billing.
type MediaUsage struct {
	// Images generated, and the size and quality the upstream says it
	// used ("" when it does not say).
	Images        int64
	Size, Quality string
	// AudioMillis is the length of transcribed audio, in milliseconds;
	// AudioKnown is false when the upstream did not report it.
	AudioMillis int64
	AudioKnown  bool
	// ImageInputTokens is the part of Usage.PromptTokens that were image
	// tokens (gpt-image-1 edits), priced apart.
	ImageInputTokens int64
}

// GeneratedImage is one image of an answer.
type GeneratedImage struct {
	B64           string // base64 bytes, when given inline
	URL           string // when given by URL
	MimeType      string
	RevisedPrompt string
}

// MediaResponse is a finished media answer.
type MediaResponse struct {
	Created int64
	Images  []GeneratedImage
	Text    string // a transcription's text, translated
	// Usage holds token counts where the upstream reports them (image
	// models billed by tokens); Media the other quantities.
	Usage Usage
	Media MediaUsage
	// Raw, Dialect and ContentType carry the upstream's own body when it
	// spoke the client's dialect, so it is written back untouched.
	Raw         []byte
	Dialect     string
	ContentType string
}

// MediaProvider is the media capability: image generations and edits,
// speech, transcriptions. A Form's files are streamed from disk into the
// upstream body, never read whole.
type MediaProvider interface {
	// NewRequest builds the upstream request for req.Media. A family with
	// other capabilities builds theirs here too (the operation says which).
	NewRequest(ctx context.Context, up *Upstream, req *Request) (*http.Request, error)
	// ServesMedia reports whether the provider serves the media request
	// (an operation, and an edit or a generation for images); false makes
	// the relay refuse it with a 400 naming the model and the endpoint.
	ServesMedia(req *Request) bool
	// DecodeMediaResponse decodes a 2xx answer to an image or
	// transcription request. Speech answers are not decoded: their bytes
	// are streamed to the client as they come.
	DecodeMediaResponse(req *Request, body []byte) (*MediaResponse, error)
}

// UploadDecoder is implemented by dialects whose clients send multipart
// uploads: the relay spools the body into a Form (bounded by the gateway's
// max_upload_size) and the dialect reads the request from it.
type UploadDecoder interface {
	DecodeUpload(op Operation, form *Form, r *http.Request) (*Request, error)
}

// MediaEncoder is implemented by dialects that answer media requests: it
// renders a media answer for the client, with its content type.
type MediaEncoder interface {
	EncodeMediaResponse(req *Request, resp *MediaResponse) (body []byte, contentType string, err error)
}

// NewBodyRequest builds an upstream POST whose body is streamed from r
// with the given content type (a multipart body written through a pipe).
func NewBodyRequest(ctx context.Context, url, contentType string, r io.Reader) (*http.Request, error) {
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, url, r)
	if err != nil {
		return nil, err
	}
	hr.Header.Set("Content-Type", contentType)
	return hr, nil
}

// MediaMeter is optionally implemented by media providers whose answers a
// client of the same dialect takes as they are (an answer another dialect
// reads must be decoded whole, so not every family has one): the relay streams the upstream's
// bytes to the client as they arrive and writes them to the meter too,
// which keeps only what billing needs, so a large answer (images inline as
// base64) is never held whole.
type MediaMeter interface {
	// NewMediaMeter returns a meter for req's answer, or nil when the
	// answer must be decoded whole (DecodeMediaResponse).
	NewMediaMeter(req *Request) MediaMeterWriter
}

// MediaMeterWriter reads an answer written to it in pieces. Result is
// what it saw, for billing: when the answer was cut short or malformed,
// what it counted so far, with an error.
type MediaMeterWriter interface {
	io.Writer
	Result() (*MediaResponse, error)
}
