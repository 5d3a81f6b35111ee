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

// SpoolForm reads a multipart body part by part: fields into memory
// (each at most MaxFieldBytes), files each into an unlinked temporary
// file, the whole at most limit bytes. The returned cleanup closes the
// files, which frees their space.
func SpoolForm(r *http.Request, boundary string, limit int64) (*adapters.Form, func(), error) {
	var files []*os.File
	cleanup := func() {
		for _, f := range files {
			f.Close()
		}
	}
	if boundary == "" {
		return nil, cleanup, adapters.BadRequest("the multipart/form-data Content-Type has no boundary")
	}
	if r.ContentLength > limit {
		return nil, cleanup, ErrTooLarge
	}
	mr := multipart.NewReader(&Capped{R: r.Body, N: limit}, boundary)
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

func tooLargeOr(err error) error {
	if errors.Is(err, ErrTooLarge) {
		return ErrTooLarge
	}
	return err
}
