package bodies

import (
	"bytes"
	"errors"
	"io"
	"mime/multipart"
	"net/http"
	"runtime"
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
	disk := NewBudget(Limits{Total: 1 << 30})
	who := Owner{Key: 1, Address: "192.0.2.1"}
	form, cleanup, err := SpoolForm(r, boundary, 2<<20, disk, who)
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
		_, cleanup, err := SpoolForm(r, boundary, tt.limit, disk, who)
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
	if _, cleanup, err := SpoolForm(r, boundary, 2<<20, disk, who); !errors.Is(err, ErrTooLarge) {
		t.Errorf("declared too large: %v", err)
	} else {
		cleanup()
	}
}

// An upload holds room on disk as its bytes arrive: one that declares
// 25 MiB and stalls holds what it sent and a chunk, and gives it back at
// cleanup. Past its owner's share it fails with ErrKeyBusy.
func TestSpoolFormHoldsWhatArrived(t *testing.T) {
	disk := NewBudget(Limits{Total: 1 << 30, PerKey: 1 << 20})
	head := "--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\n\r\n"
	pr, pw := io.Pipe()
	go func() {
		pw.Write([]byte(head))
		pw.Write(bytes.Repeat([]byte("a"), 100<<10))
	}()
	r, _ := http.NewRequest(http.MethodPost, "/v1/audio/transcriptions", pr)
	r.ContentLength = 25 << 20
	type result struct {
		cleanup func()
		err     error
	}
	done := make(chan result, 1)
	go func() {
		_, cleanup, err := SpoolForm(r, "b", 25<<20, disk, Owner{Key: 7})
		done <- result{cleanup, err}
	}()
	for {
		if all, _, _ := disk.holding(); all >= 100<<10 {
			if all > 100<<10+int64(len(head))+spoolChunk {
				t.Fatalf("a stalled upload holds %d bytes", all)
			}
			break
		}
		runtime.Gosched()
	}
	// the key's share is 1 MiB: its upload fails once it sends more
	go pw.Write(bytes.Repeat([]byte("a"), 1<<20))
	res := <-done
	if !errors.Is(res.err, ErrKeyBusy) {
		t.Fatalf("an upload past its key's share: %v", res.err)
	}
	res.cleanup()
	if all, keys, _ := disk.holding(); all != 0 || len(keys) != 0 {
		t.Fatalf("after cleanup: %d bytes, %v", all, keys)
	}
	pw.Close()
}
