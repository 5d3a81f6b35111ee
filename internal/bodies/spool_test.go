package bodies

import (
	"bytes"
	"errors"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
)

// multipartRequest builds a request whose body is written by write.
func multipartRequest(t *testing.T, write func(mw *multipart.Writer)) (*http.Request, string) {
	t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	write(mw)
	mw.Close()
	r, _ := http.NewRequest(http.MethodPost, "/v1/audio/transcriptions", &b)
	r.ContentLength = -1 // as a chunked upload: the limit is found while reading
	return r, mw.Boundary()
}

func TestSpoolForm(t *testing.T) {
	audio := bytes.Repeat([]byte("0123456789abcdef"), 64<<10) // 1 MiB
	r, boundary := multipartRequest(t, func(mw *multipart.Writer) {
		w, _ := mw.CreateFormFile("file", "a.wav")
		w.Write(audio)
		mw.WriteField("model", "whisper-1")
	})
	form, cleanup, err := SpoolForm(r, boundary, 2<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	if v, _ := form.Value("model"); v != "whisper-1" || len(form.Parts) != 2 {
		t.Fatalf("%+v", form.Parts)
	}
	f := form.Files("file")[0]
	// each attempt reads the whole file from its start
	for range 2 {
		rc, _ := f.Open()
		got, _ := io.ReadAll(rc)
		if f.Size != int64(len(audio)) || !bytes.Equal(got, audio) || f.Filename != "a.wav" {
			t.Fatalf("spooled %d bytes", len(got))
		}
	}

	tests := []struct {
		name  string
		write func(mw *multipart.Writer)
		limit int64
		want  string // "too large" for ErrTooLarge
	}{
		{"over the limit", func(mw *multipart.Writer) { w, _ := mw.CreateFormFile("file", "a.wav"); w.Write(audio) }, 1 << 20, "too large"},
		{"a long field", func(mw *multipart.Writer) { mw.WriteField("prompt", strings.Repeat("x", MaxFieldBytes+1)) }, 2 << 20, "longer than"},
		{"many parts", func(mw *multipart.Writer) {
			for range MaxParts + 1 {
				mw.WriteField("n", "1")
			}
		}, 2 << 20, "more than 256 parts"},
		{"a part without a name", func(mw *multipart.Writer) { mw.CreatePart(map[string][]string{"Content-Disposition": {"form-data"}}) }, 2 << 20, "no form field name"},
	}
	for _, tt := range tests {
		r, boundary := multipartRequest(t, tt.write)
		_, cleanup, err := SpoolForm(r, boundary, tt.limit)
		cleanup()
		switch {
		case tt.want == "too large":
			if !errors.Is(err, ErrTooLarge) {
				t.Errorf("%s: %v", tt.name, err)
			}
		case err == nil || !strings.Contains(err.Error(), tt.want):
			t.Errorf("%s: %v, want %q", tt.name, err, tt.want)
		}
	}
	// a Content-Length over the limit is refused before reading
	r, boundary = multipartRequest(t, func(mw *multipart.Writer) {})
	r.ContentLength = 3 << 20
	if _, cleanup, err := SpoolForm(r, boundary, 2<<20); !errors.Is(err, ErrTooLarge) {
		t.Errorf("declared too large: %v", err)
	} else {
		cleanup()
	}
}
