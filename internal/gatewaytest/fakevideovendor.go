package gatewaytest

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// videoVendor is a fake video vendor's server: its API (serve) and the
// finished videos it hosts, over the job table every video fake shares.
type videoVendor struct {
	*httptest.Server
	*JobStore
	prefix string // of its job ids
}

func newVideoVendor(t testing.TB, prefix string, serve http.HandlerFunc) *videoVendor {
	v := &videoVendor{JobStore: &JobStore{}, prefix: prefix}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /fake-files/{name}", v.serveFile)
	mux.HandleFunc("/", serve)
	v.Server = httptest.NewServer(mux)
	t.Cleanup(v.Server.Close)
	return v
}

// BaseURL is the address a channel's base_url names.
func (v *videoVendor) BaseURL() string { return v.Server.URL }

// serveFile serves a finished job's video: a few bytes in an MP4 box.
func (v *videoVendor) serveFile(w http.ResponseWriter, r *http.Request) {
	id := strings.TrimSuffix(r.PathValue("name"), ".mp4")
	j, ok := v.download(id)
	if !ok || j.State != JobSucceeded {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "video/mp4")
	fmt.Fprintf(w, "\x00\x00\x00\x18ftypmp42fake video of %s", id)
}

// accept records a submit the vendor took, queued, seconds long.
func (v *videoVendor) accept(path string, body []byte, seconds float64) Job {
	j := &Job{Path: path, Body: append(json.RawMessage(nil), body...), Seconds: seconds}
	return v.add(j, func(seq int) string {
		j.VideoURL = v.Server.URL + "/fake-files/" + fmt.Sprintf("%s%06d", v.prefix, seq) + ".mp4"
		j.FileID = fmt.Sprintf("%d", 900000+seq)
		return fmt.Sprintf("%s%06d", v.prefix, seq)
	})
}

// readJSONObject reads a submit body (bounded) and decodes it as an
// object; ok is false when it is not one.
func readJSONObject(r *http.Request) (raw []byte, body map[string]json.RawMessage, ok bool) {
	raw, err := readAllLimited(r, 32<<20)
	if err != nil {
		return nil, nil, false
	}
	if json.Unmarshal(raw, &body) != nil || body == nil {
		return raw, nil, false
	}
	return raw, body, true
}

func readAllLimited(r *http.Request, n int64) ([]byte, error) {
	raw, err := io.ReadAll(io.LimitReader(r.Body, n+1))
	if err == nil && int64(len(raw)) > n {
		err = fmt.Errorf("body larger than %d bytes", n)
	}
	return raw, err
}

func isBase64(s string) bool {
	b, err := base64.StdEncoding.DecodeString(s)
	return err == nil && len(b) > 0
}

// stringField returns body[key] as a string; present is false when absent,
// ok false when present but not a string.
func stringField(body map[string]json.RawMessage, key string) (s string, present, ok bool) {
	raw, present := body[key]
	if !present {
		return "", false, true
	}
	ok = json.Unmarshal(raw, &s) == nil
	return s, true, ok
}

// isImageRef reports whether s is what vendors take as an image: an http(s)
// URL, or base64 (dataURL: as a data:image/...;base64, URL, else bare).
func isImageRef(s string, dataURL bool) bool {
	if strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://") {
		return true
	}
	if dataURL {
		rest, ok := strings.CutPrefix(s, "data:image/")
		if !ok {
			return false
		}
		_, b64, ok := strings.Cut(rest, ";base64,")
		return ok && isBase64(b64)
	}
	return !strings.HasPrefix(s, "data:") && isBase64(s)
}
