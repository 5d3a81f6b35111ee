package adapters

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
)

// Batches: a vendor's own batch API (OpenAI's /v1/batches, Anthropic's
// /v1/messages/batches). The gateway hands a provider the lines of one
// batch in the vendor's own dialect (an OpenAI batch runs on an
// OpenAI-shaped channel, an Anthropic one on Anthropic's; only a vendor
// whose batch API no client dialect speaks, a NeutralBatchProvider, gets
// them translated), follows it by polling, and reads its results line by
// line to bill each.

// BatchLine is one request of a batch.
type BatchLine struct {
	CustomID string
	// Body is the request's body (an OpenAI line's body, an Anthropic
	// request's params), its model already the upstream's name.
	Body json.RawMessage
	// Req is the line decoded from the batch's dialect, its model the
	// upstream's name: set only for a NeutralBatchProvider.
	Req *Request `json:"-"`
}

// BatchJob is a batch to start at a vendor.
type BatchJob struct {
	// ID is the gateway's id of the batch, sent as the vendor batch's
	// metadata where the vendor keeps any.
	ID string
	// Endpoint is the lines' path (/v1/chat/completions, /v1/embeddings,
	// /v1/responses; /v1/messages for Anthropic).
	Endpoint string
	Lines    []BatchLine
}

// BatchState is a vendor batch as a poll found it.
type BatchState struct {
	// Ended: the vendor is done with it (completed, failed, expired,
	// cancelled); its results can be read.
	Ended bool
	// Failed: it ended without running its lines (the vendor refused the
	// file); Error says why.
	Failed bool
	Error  string
	// Cancelling: a cancel was asked and is under way.
	Cancelling bool
	// Results and Errors name where the results are (the output and error
	// file ids, the results URL), as the provider's BatchResults reads them.
	Results, Errors string
	// Done counts the lines the vendor has finished so far, for progress.
	Done, Total int64
}

// BatchResult is one line of a batch's results.
type BatchResult struct {
	CustomID string
	// Succeeded: the vendor answered the line (Usage is what it billed).
	Succeeded bool
	Usage     Usage
	// Status is the line's HTTP status (200 when it succeeded); Error
	// says why it failed.
	Status int
	Error  string
	// Line is the vendor's result line as it came, handed to the client.
	Line []byte
	// ErrorLine: it belongs in an error file, not the output file
	// (OpenAI's split; Anthropic has one results file).
	ErrorLine bool
	// Resp is a NeutralBatchProvider's answer to the line (Line is then
	// empty): the gateway renders it, or Error, in the batch's dialect.
	Resp *Response `json:"-"`
}

// BatchProvider is an adapter that runs batches on its vendor's batch API.
type BatchProvider interface {
	// BatchDialect is the dialect of the batches it runs ("openai",
	// "anthropic"): only batches of that dialect are sent to it.
	BatchDialect() string
	// SubmitBatch starts job and returns the vendor's batch id.
	SubmitBatch(ctx context.Context, do Doer, up *Upstream, job *BatchJob) (string, error)
	// PollBatch reads the vendor batch's state.
	PollBatch(ctx context.Context, do Doer, up *Upstream, id string) (*BatchState, error)
	// CancelBatch asks the vendor to stop the batch; its lines done so far
	// stay done (and billed).
	CancelBatch(ctx context.Context, do Doer, up *Upstream, id string) error
	// BatchResults reads an ended batch's results and calls each for every
	// line, at most max bytes in all; each's error ends the reading.
	BatchResults(ctx context.Context, do Doer, up *Upstream, id string, st *BatchState, max int64, each func(*BatchResult) error) error
}

// BatchTaker is a BatchProvider whose batch API takes only some batches
// (Bedrock's batch inference: a bucket configured, one of Anthropic's
// models, at least AWS's minimum of records). A batch it does not take
// is planned as if its channel had no batch API (so it may run on the
// gateway).
type BatchTaker interface {
	// TakesBatch reports whether a batch of lines lines for the upstream's
	// model can run on the vendor's batch API.
	TakesBatch(model string, lines int) bool
}

// NeutralBatchProvider is a BatchProvider whose vendor's batch API speaks
// none of the gateway's client dialects (Gemini's batch mode): the gateway
// decodes a batch's lines, of whichever dialect, into neutral requests for
// it (BatchLine.Req), as it translates a request, and renders its neutral
// answers (BatchResult.Resp) in the batch's dialect. Its BatchDialect is "".
type NeutralBatchProvider interface {
	BatchProvider
	// BatchOp reports whether it runs lines of op.
	BatchOp(op Operation) bool
}

// MaxBatchLine bounds one line of a batch's input or results.
const MaxBatchLine = 16 << 20

// EachLine calls fn for each non-empty line of r, at most max bytes in
// all and MaxBatchLine a line; line is valid only during the call.
func EachLine(r io.Reader, max int64, fn func(line []byte) error) error {
	lr := &io.LimitedReader{R: r, N: max + 1}
	sc := bufio.NewScanner(lr)
	sc.Buffer(make([]byte, 0, 64<<10), MaxBatchLine)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) > 0 && line[len(line)-1] == '\r' {
			line = line[:len(line)-1]
		}
		if len(line) == 0 {
			continue
		}
		if err := fn(line); err != nil {
			if lr.N <= 0 {
				// the line was cut by the bound: say so, not that it is malformed
				return fmt.Errorf("more than %d bytes", max)
			}
			return err
		}
	}
	if lr.N <= 0 {
		return fmt.Errorf("more than %d bytes", max)
	}
	if err := sc.Err(); err != nil {
		if err == bufio.ErrTooLong {
			return fmt.Errorf("a line is longer than %d bytes", MaxBatchLine)
		}
		return err
	}
	return nil
}
