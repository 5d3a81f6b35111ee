package adaptertest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"slices"
	"strings"
	"unicode/utf8"
)

// answer is one canned vendor answer: a JSON body, or raw text when the
// body is a JSON string.
type answer struct {
	Status int               `json:"status"`
	Header map[string]string `json:"header"`
	Body   json.RawMessage   `json:"body"`
}

// call is one request a family sent, as the vendor received it.
type call struct {
	method, url string
	header      http.Header
	body        []byte
}

// recorder is the vendor of a kit: an adapters.Doer that keeps each
// request and answers the next canned answer, in order. A call past the
// last answer is answered 599, so a fixture that forgot one fails loudly.
type recorder struct {
	answers []answer
	calls   []call
}

// Do implements adapters.Doer.
func (r *recorder) Do(hr *http.Request) (*http.Response, error) {
	c := call{method: hr.Method, url: hr.URL.String(), header: hr.Header.Clone()}
	if hr.Body != nil {
		b, err := io.ReadAll(hr.Body)
		hr.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("reading the request body: %w", err)
		}
		c.body = b
	}
	r.calls = append(r.calls, c)
	if len(r.calls) > len(r.answers) {
		return response(599, nil, []byte(`{"adaptertest":"the fixture has no answer for this call"}`)), nil
	}
	a := r.answers[len(r.calls)-1]
	body := []byte(a.Body)
	var text string
	if json.Unmarshal(a.Body, &text) == nil {
		body = []byte(text)
	}
	return response(a.Status, a.Header, body), nil
}

func response(status int, header map[string]string, body []byte) *http.Response {
	if status == 0 {
		status = http.StatusOK
	}
	h := http.Header{"Content-Type": {"application/json"}}
	for k, v := range header {
		h.Set(k, v)
	}
	return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body))}
}

// render writes every call for a golden: method and URL, the headers
// sorted (the key shown as <key>), and the body: JSON indented, a
// multipart form part by part with its boundary named BOUNDARY.
func (r *recorder) render(out *strings.Builder, key string) {
	if len(r.calls) == 0 {
		out.WriteString("(no call)\n")
	}
	for _, c := range r.calls {
		hide := func(s string) string { return strings.ReplaceAll(s, key, "<key>") }
		fmt.Fprintf(out, "%s %s\n", c.method, hide(c.url))
		mediaType, params, _ := mime.ParseMediaType(c.header.Get("Content-Type"))
		names := make([]string, 0, len(c.header))
		for name := range c.header {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			v := strings.Join(c.header[name], ", ")
			if b := params["boundary"]; b != "" {
				v = strings.ReplaceAll(v, b, "BOUNDARY")
			}
			fmt.Fprintf(out, "%s: %s\n", name, hide(v))
		}
		if len(c.body) > 0 {
			out.WriteString("\n")
			switch {
			case strings.HasPrefix(mediaType, "multipart/"):
				renderMultipart(out, c.body, params["boundary"])
			default:
				var buf bytes.Buffer
				if json.Indent(&buf, c.body, "", "  ") == nil {
					out.Write(buf.Bytes())
					out.WriteString("\n")
				} else {
					out.WriteString(printable(c.body) + "\n")
				}
			}
		}
		out.WriteString("\n")
	}
}

func renderMultipart(out *strings.Builder, body []byte, boundary string) {
	mr := multipart.NewReader(bytes.NewReader(body), boundary)
	for {
		p, err := mr.NextPart()
		if err == io.EOF {
			return
		}
		if err != nil {
			fmt.Fprintf(out, "(a broken multipart body: %v)\n", err)
			return
		}
		b, _ := io.ReadAll(p)
		fmt.Fprintf(out, "--BOUNDARY name=%q", p.FormName())
		if p.FileName() != "" {
			fmt.Fprintf(out, " filename=%q", p.FileName())
		}
		if ct := p.Header.Get("Content-Type"); ct != "" {
			fmt.Fprintf(out, " content-type=%s", ct)
		}
		fmt.Fprintf(out, "\n%s\n", printable(b))
	}
}

// printable is b as text, or a note of its size and type when it is not.
func printable(b []byte) string {
	if utf8.Valid(b) && !bytes.ContainsAny(b, "\x00") {
		return string(b)
	}
	return fmt.Sprintf("(%d bytes of %s)", len(b), http.DetectContentType(b))
}
