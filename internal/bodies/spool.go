package bodies

import (
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// Bounds of an upload's fields, which are held in memory.
const (
	MaxFieldBytes = 64 << 10
	MaxParts      = 256
)

// spoolChunk is how much room on disk an upload takes from its budget
// at a time, ahead of the bytes it sends: a stalled upload holds at most
// this more than it sent.
const spoolChunk = 64 << 10

// SpoolForm reads a multipart body part by part: fields into memory
// (each at most MaxFieldBytes), files each into an unlinked temporary
// file, the whole at most limit bytes, held in budget for who as the
// bytes arrive (a busy budget or share fails it with ErrBusy, ErrKeyBusy
// or ErrAddressBusy). The returned cleanup closes the files, which frees
// their space, and gives back what they held.
func SpoolForm(r *http.Request, boundary string, limit int64, budget *Budget, who Owner) (*adapters.Form, func(), error) {
	var files []*os.File
	in := &charged{r: r.Body, b: budget, held: Held{owner: who}, end: limit + 1}
	if r.ContentLength >= 0 && r.ContentLength < limit {
		in.end = r.ContentLength + 1
	}
	cleanup := func() {
		for _, f := range files {
			f.Close()
		}
		budget.Give(in.held)
		in.held.n = 0
	}
	if boundary == "" {
		return nil, cleanup, adapters.BadRequest("the multipart/form-data Content-Type has no boundary")
	}
	if r.ContentLength > limit {
		return nil, cleanup, ErrTooLarge
	}
	mr := multipart.NewReader(&Capped{R: in, N: limit}, boundary)
	form := &adapters.Form{}
	for {
		part, err := mr.NextPart()
		if err == io.EOF {
			return form, cleanup, nil
		}
		if err != nil {
			return nil, cleanup, tooLargeOr(err)
		}
		if len(form.Parts) >= MaxParts {
			return nil, cleanup, adapters.BadRequest("the upload has more than %d parts", MaxParts)
		}
		name := part.FormName()
		if name == "" {
			return nil, cleanup, adapters.BadRequest("a part of the upload has no form field name")
		}
		if part.FileName() == "" {
			v, err := io.ReadAll(io.LimitReader(part, MaxFieldBytes+1))
			if err != nil {
				return nil, cleanup, tooLargeOr(err)
			}
			if len(v) > MaxFieldBytes {
				return nil, cleanup, adapters.BadRequest("the upload's field %q is longer than %d bytes", name, MaxFieldBytes)
			}
			form.Parts = append(form.Parts, adapters.FormPart{Name: name, Value: string(v)})
			continue
		}
		f, err := os.CreateTemp("", "gateway-upload-*")
		if err != nil {
			return nil, cleanup, fmt.Errorf("spooling the upload: %w", err)
		}
		files = append(files, f)
		// unlinked at once: the space is freed when the file is closed,
		// even if the process dies first
		_ = os.Remove(f.Name())
		n, err := io.Copy(f, part)
		if err != nil {
			return nil, cleanup, tooLargeOr(err)
		}
		ff := &adapters.FormFile{Filename: part.FileName(), ContentType: part.Header.Get("Content-Type"), Size: n}
		ff.Open = func() (io.ReadCloser, error) { return io.NopCloser(io.NewSectionReader(f, 0, n)), nil }
		form.Parts = append(form.Parts, adapters.FormPart{Name: name, File: ff})
	}
}

// tooLargeOr is err, or the bound it names as the sentinel itself (the
// multipart reader wraps what it read).
func tooLargeOr(err error) error {
	for _, bound := range []error{ErrTooLarge, ErrBusy, ErrKeyBusy, ErrAddressBusy} {
		if errors.Is(err, bound) {
			return bound
		}
	}
	return err
}

// charged reads r, taking room in b ahead of the bytes it reads, a chunk
// at a time, and never past end (the declared length or the limit, and a
// byte for the probe past it).
type charged struct {
	r    io.Reader
	b    *Budget
	held Held
	end  int64
	left int64 // taken and not yet read
}

func (c *charged) Read(p []byte) (int, error) {
	if c.left == 0 {
		n := min(spoolChunk, c.end-c.held.n)
		if n <= 0 {
			// past the end: what follows is refused by Capped, or by
			// the Content-Length net/http holds the body to
			n = 1
		}
		if err := c.b.Take(&c.held, n); err != nil {
			return 0, err
		}
		c.left = n
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	k, err := c.r.Read(p)
	c.left -= int64(k)
	return k, err
}
