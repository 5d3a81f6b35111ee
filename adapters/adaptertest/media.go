package adaptertest

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters"
	"github.com/caddy-model-gateway/gateway/internal/goldentest"
)

// The media kit checks a provider of the media endpoints
// (adapters.MediaProvider: image generations and edits, speech,
// transcriptions) against fixtures under <Testdata>/media:
//
//	request/NAME.json   a client's request: {"path": where the client sent
//	                    it, "body": its JSON body, or "form": its multipart
//	                    parts in order ({"name", "value"} for a field,
//	                    {"name", "filename", "content_type", "data" or
//	                    "data_base64"} for a file), "model": the upstream
//	                    model, "dialect": the client's (default openai)}
//	  NAME.golden         → the request the provider builds, or its refusal
//	response/NAME.json  the same, with "answer": the vendor's 2xx answer
//	                    (a JSON string is raw text)
//	  NAME.golden         → the neutral answer, and what the client reads
//	error/NAME.json     {"status", "body"}
//	  NAME.golden         → DecodeError's *adapters.Error
//
// The client's request is decoded by its dialect as the relay decodes it
// (a form through adapters.UploadDecoder, the answer rendered through
// adapters.MediaEncoder). Besides the goldens: ServesMedia says yes to
// exactly the media the suite lists; a request the family cannot carry is
// refused with a 4xx *adapters.Error; the key travels only in KeyHeader;
// an upload is streamed from the spool (NewRequest reads no file whole,
// every file opened is closed, a second attempt sends the same bytes); an
// answer keeps the upstream's bytes exactly when it says it does, and
// counts the images it holds; a media meter, where the provider has one
// for the answer, reads from pieces of any size what decoding the whole
// answer reads and says so when the answer is cut short; every medium
// served has a request fixture and (but speech, whose answer is relayed
// undecoded) a response fixture; every golden is checked by some fixture.

// MediaSuite describes one media provider for RunMedia.
type MediaSuite struct {
	// Name is the family's module name: gateway.adapters.<Name>.
	Name string
	// Provider, when set, is checked instead of the registered module (a
	// kit's own tests give it a provider that breaks the contract). It
	// must be an adapters.MediaProvider.
	Provider adapters.Provider
	// Testdata is the fixture directory; default "testdata". The kit
	// reads <Testdata>/media.
	Testdata string
	// KeyHeader is the header the key travels in.
	KeyHeader string
	// The media the family serves.
	Images, ImageEdits, Speech, Transcriptions bool
}

// medium is one of the four media requests, as ServesMedia tells them
// apart.
type medium string

const (
	imageGeneration medium = "image generation"
	imageEdit       medium = "image edit"
	speech          medium = "speech"
	transcription   medium = "transcription"
)

func mediumOf(req *adapters.Request) medium {
	switch {
	case req.Op == adapters.OpSpeech:
		return speech
	case req.Op == adapters.OpTranscription:
		return transcription
	case req.Media != nil && req.Media.Edit:
		return imageEdit
	}
	return imageGeneration
}

// mediaFixture is one request or response fixture.
type mediaFixture struct {
	Dialect string          `json:"dialect"`
	Path    string          `json:"path"`
	Body    json.RawMessage `json:"body"`
	Form    []formField     `json:"form"`
	Model   string          `json:"model"`
	Answer  json.RawMessage `json:"answer"`
}

// formField is one part of a fixture's multipart body.
type formField struct {
	Name        string `json:"name"`
	Value       string `json:"value"`
	Filename    string `json:"filename"`
	ContentType string `json:"content_type"`
	Data        string `json:"data"`
	DataBase64  []byte `json:"data_base64"`
}

// mediaKit is one RunMedia's state.
type mediaKit struct {
	s       MediaSuite
	p       adapters.Provider
	m       adapters.MediaProvider
	checked map[string]bool
	// the media the request and response fixtures reached
	requested, answered map[medium]bool
}

// RunMedia checks a media provider's whole contract against its fixtures.
// Call it once from the family's tests.
func RunMedia(t *testing.T, s MediaSuite) {
	if s.Testdata == "" {
		s.Testdata = "testdata"
	}
	if s.KeyHeader == "" {
		t.Fatal("adaptertest: MediaSuite.KeyHeader is required")
	}
	k := &mediaKit{s: s, p: s.Provider, checked: map[string]bool{}, requested: map[medium]bool{}, answered: map[medium]bool{}}
	if k.p == nil {
		if k.p = family(t, s.Name).Provider; k.p == nil {
			t.Fatalf("%s.%s is no provider", Namespace, s.Name)
		}
	}
	var ok bool
	if k.m, ok = k.p.(adapters.MediaProvider); !ok {
		t.Fatalf("%s is no adapters.MediaProvider", s.Name)
	}
	t.Run("serves", k.serves)
	t.Run("request", k.requests)
	t.Run("response", k.responses)
	t.Run("error", func(t *testing.T) { checkErrors(t, k.dir("error"), k.checked, k.p.DecodeError) })
	if !t.Failed() {
		t.Run("coverage", k.coverage)
	}
}

func (k *mediaKit) dir(sub string) string { return filepath.Join(k.s.Testdata, "media", sub) }

func (k *mediaKit) serving() map[medium]bool {
	return map[medium]bool{imageGeneration: k.s.Images, imageEdit: k.s.ImageEdits, speech: k.s.Speech, transcription: k.s.Transcriptions}
}

// serves asks ServesMedia about each medium, as an OpenAI client sends it.
func (k *mediaKit) serves(t *testing.T) {
	requests := map[medium]*adapters.Request{
		imageGeneration: {Op: adapters.OpImage, Media: &adapters.MediaRequest{Prompt: "a kite", N: 1}},
		imageEdit:       {Op: adapters.OpImage, Media: &adapters.MediaRequest{Edit: true, Prompt: "a kite", N: 1, Form: &adapters.Form{}}},
		speech:          {Op: adapters.OpSpeech, Media: &adapters.MediaRequest{Input: "hello"}},
		transcription:   {Op: adapters.OpTranscription, Media: &adapters.MediaRequest{Form: &adapters.Form{}}},
	}
	for what, want := range k.serving() {
		req := requests[what]
		req.Dialect, req.Model = "openai", "client-model"
		if got := k.m.ServesMedia(req); got != want {
			t.Errorf("ServesMedia(%s) = %v, the suite says %v", what, got, want)
		}
	}
}

// fixtures calls fn with each fixture of a directory, decoded, and the
// golden it is checked against.
func (k *mediaKit) fixtures(t *testing.T, sub string, fn func(t *testing.T, f *mediaFixture, golden string)) {
	eachFixture(t, k.dir(sub), k.checked, func(t *testing.T, raw []byte, golden string) {
		var f mediaFixture
		if err := json.Unmarshal(raw, &f); err != nil {
			t.Fatal(err)
		}
		if f.Path == "" {
			t.Fatal(`a media fixture needs the client's "path"`)
		}
		fn(t, &f, golden)
	})
}

// clientDialect is the dialect the fixture's client speaks.
func clientDialect(t *testing.T, f *mediaFixture) adapters.Dialect {
	t.Helper()
	name := cmp.Or(f.Dialect, "openai")
	d := family(t, name).Dialect
	if d == nil {
		t.Fatalf("%s is no dialect", name)
	}
	return d
}

// decode reads the fixture's client request as the relay does, its files
// spooled by sp with each file's bytes repeated times.
func (k *mediaKit) decode(t *testing.T, f *mediaFixture, sp *spool, repeat int) *adapters.Request {
	t.Helper()
	d := clientDialect(t, f)
	var req *adapters.Request
	var err error
	if f.Form != nil {
		ud, ok := d.(adapters.UploadDecoder)
		if !ok {
			t.Fatalf("the %s dialect takes no uploads (adapters.UploadDecoder)", d.Name())
		}
		r := goldentest.Post(f.Path, "Content-Type", "multipart/form-data; boundary=adaptertest")
		op, _ := d.Route(r)
		req, err = ud.DecodeUpload(op, sp.form(f.Form, repeat), r)
	} else {
		r := goldentest.Post(f.Path, "Content-Type", "application/json")
		op, _ := d.Route(r)
		req, err = d.DecodeRequest(op, f.Body, r)
	}
	if err != nil {
		t.Fatalf("the %s dialect refuses the fixture's client request: %v", d.Name(), err)
	}
	if req.Media == nil {
		t.Fatalf("the %s dialect decoded %s as no media request (%s)", d.Name(), f.Path, req.Op)
	}
	if !k.serving()[mediumOf(req)] {
		t.Fatalf("a fixture for a %s, which the suite says the family does not serve", mediumOf(req))
	}
	return req
}

func (k *mediaKit) upstream(model string) *adapters.Upstream {
	return &adapters.Upstream{Channel: "kit", BaseURL: BaseURL, Key: kitKey, Model: cmp.Or(model, "adaptertest-model")}
}

// send builds the upstream request for req and sends it to a recorder;
// nil and the refusal when the family refuses it.
func (k *mediaKit) send(t *testing.T, f *mediaFixture, req *adapters.Request) (*recorder, error) {
	t.Helper()
	hr, err := k.m.NewRequest(context.Background(), k.upstream(f.Model), req)
	if err != nil {
		var e *adapters.Error
		if !errors.As(err, &e) || e.Status < 400 || e.Status > 499 {
			t.Errorf("a request the family cannot carry must be refused with a 4xx *adapters.Error, got %#v", err)
		}
		return nil, err
	}
	do := &recorder{answers: []answer{{Status: 200}}}
	if _, err := do.Do(hr); err != nil {
		t.Fatalf("the upstream body could not be read: %v", err)
	}
	checkKey(t, do, k.s.KeyHeader, kitKey)
	return do, nil
}

func (k *mediaKit) requests(t *testing.T) {
	k.fixtures(t, "request", func(t *testing.T, f *mediaFixture, golden string) {
		sp := &spool{}
		req := k.decode(t, f, sp, 1)
		k.requested[mediumOf(req)] = true
		if !k.m.ServesMedia(req) {
			t.Errorf("ServesMedia is false for the fixture's %s", mediumOf(req))
		}
		var out strings.Builder
		do, err := k.send(t, f, req)
		if err != nil {
			renderError(t, &out, err)
			goldentest.Golden(t, golden, []byte(out.String()))
			return
		}
		do.render(&out, kitKey)
		if n := sp.unclosed(); n != 0 {
			t.Errorf("%d of the upload files opened were not closed", n)
		}
		// a failover sends the same request again from the same spool
		again, err := k.send(t, f, req)
		if err != nil {
			t.Fatalf("a second attempt was refused: %v", err)
		}
		var second strings.Builder
		again.render(&second, kitKey)
		if second.String() != out.String() {
			t.Errorf("a second attempt sent other bytes than the first:\n%s", second.String())
		}
		if f.Form != nil {
			k.streamed(t, f)
		}
		goldentest.Golden(t, golden, []byte(out.String()))
	})
}

// streamed checks that the upload's files are read as the upstream reads
// the body, not whole while the request is built: each file is made a
// MiB or more, and NewRequest must return before any is read to its end.
func (k *mediaKit) streamed(t *testing.T, f *mediaFixture) {
	t.Helper()
	sp := &spool{}
	repeat := 1
	for _, p := range f.Form {
		if n := len(p.Data) + len(p.DataBase64); n > 0 {
			repeat = max(repeat, (1<<20)/n+1)
		}
	}
	req := k.decode(t, f, sp, repeat)
	hr, err := k.m.NewRequest(context.Background(), k.upstream(f.Model), req)
	if err != nil {
		t.Fatalf("a larger upload was refused: %v", err)
	}
	if whole := sp.whole(); whole != "" {
		t.Errorf("NewRequest read %s whole before the upstream read a byte: stream uploads from the spool", whole)
	}
	if hr.Body != nil {
		_, _ = io.Copy(io.Discard, hr.Body)
		hr.Body.Close()
	}
	if n := sp.unclosed(); n != 0 {
		t.Errorf("%d of the upload files opened were not closed", n)
	}
}

func (k *mediaKit) responses(t *testing.T) {
	k.fixtures(t, "response", func(t *testing.T, f *mediaFixture, golden string) {
		if f.Answer == nil {
			t.Fatal(`a response fixture needs the vendor's "answer"`)
		}
		req := k.decode(t, f, &spool{}, 1)
		what := mediumOf(req)
		if what == speech {
			t.Fatal("a speech answer is relayed as it comes, never decoded: it has no response fixture")
		}
		k.answered[what] = true
		body := rawBody(f.Answer)
		resp, err := k.m.DecodeMediaResponse(req, body)
		var out strings.Builder
		if err != nil {
			fmt.Fprintf(&out, "→ error %v\n", err)
			goldentest.Golden(t, golden, []byte(out.String()))
			return
		}
		k.checkAnswer(t, req, resp, body)
		k.meter(t, req, resp, body)
		// a translated answer's time is the clock's, so its goldens blank it
		neutral := *resp
		neutral.Raw = nil
		if resp.Raw != nil {
			fmt.Fprintf(&out, "# the upstream's bytes are kept, for a client of %s\n", resp.Dialect)
		} else {
			neutral.Created = 0
		}
		out.Write(goldentest.Neutral(neutral))
		enc, ok := clientDialect(t, f).(adapters.MediaEncoder)
		if !ok {
			t.Fatalf("the client's dialect answers no media (adapters.MediaEncoder)")
		}
		client, ct, err := enc.EncodeMediaResponse(req, resp)
		if err != nil {
			fmt.Fprintf(&out, "\n→ the client reads an error: %v\n", err)
		} else {
			fmt.Fprintf(&out, "\n→ the client reads %s\n", ct)
			var buf bytes.Buffer
			if json.Indent(&buf, client, "", "  ") == nil {
				indented := buf.Bytes()
				if resp.Raw == nil {
					indented = goldentest.Stable(indented)
				}
				out.Write(indented)
				out.WriteString("\n")
			} else {
				out.WriteString(printable(client))
			}
		}
		goldentest.Golden(t, golden, []byte(out.String()))
	})
}

// checkAnswer holds a decoded answer to what the relay and billing rely on.
func (k *mediaKit) checkAnswer(t *testing.T, req *adapters.Request, resp *adapters.MediaResponse, body []byte) {
	t.Helper()
	if (resp.Raw != nil) != (resp.Dialect != "") {
		t.Errorf("an answer with dialect %q and %d bytes of its own: both or neither", resp.Dialect, len(resp.Raw))
	}
	if resp.Raw != nil && !bytes.Equal(resp.Raw, body) {
		t.Errorf("the answer kept other bytes than the upstream's")
	}
	if resp.Raw == nil && resp.Media.Images != int64(len(resp.Images)) {
		t.Errorf("the answer counts %d images and holds %d", resp.Media.Images, len(resp.Images))
	}
	if req.Op == adapters.OpImage && resp.Created <= 0 {
		t.Errorf("an images answer without its creation time")
	}
	u, m := resp.Usage, resp.Media
	if m.Images < 0 || m.AudioMillis < 0 || m.ImageInputTokens < 0 || u.PromptTokens < 0 || u.CompletionTokens < 0 ||
		m.ImageInputTokens > u.PromptTokens {
		t.Errorf("usage that cannot be billed: %+v %+v", u, m)
	}
}

// meter writes the answer to the provider's media meter, when it has one
// for req, in pieces of several sizes, and cut short.
func (k *mediaKit) meter(t *testing.T, req *adapters.Request, whole *adapters.MediaResponse, body []byte) {
	t.Helper()
	mm, ok := k.p.(adapters.MediaMeter)
	if !ok || mm.NewMediaMeter(req) == nil {
		return
	}
	if whole.Raw == nil {
		t.Errorf("a metered answer is relayed as it is, but DecodeMediaResponse translated it")
	}
	for _, piece := range []int{1, 7, 64, len(body)} {
		w := mm.NewMediaMeter(req)
		for off := 0; off < len(body); off += piece {
			if _, err := w.Write(body[off:min(off+piece, len(body))]); err != nil {
				t.Fatalf("the meter refused a piece: %v", err)
			}
		}
		got, err := w.Result()
		if err != nil {
			t.Errorf("pieces of %d: %v", piece, err)
			continue
		}
		if got.Media != whole.Media || got.Usage != whole.Usage || got.Created != whole.Created {
			t.Errorf("pieces of %d: the meter read %+v %+v, decoding whole %+v %+v", piece, got.Media, got.Usage, whole.Media, whole.Usage)
		}
	}
	w := mm.NewMediaMeter(req)
	_, _ = w.Write(body[:len(body)/2])
	if _, err := w.Result(); err == nil {
		t.Errorf("an answer cut in half was metered without an error")
	}
}

func (k *mediaKit) coverage(t *testing.T) {
	for what, served := range k.serving() {
		if !served {
			continue
		}
		if !k.requested[what] {
			t.Errorf("no request fixture is a %s", what)
		}
		if what != speech && !k.answered[what] {
			// an edit's answer is shaped as a generation's
			if what != imageEdit || !k.answered[imageGeneration] {
				t.Errorf("no response fixture answers a %s", what)
			}
		}
	}
	if fixtureCount(k.dir("error")) == 0 {
		t.Errorf("no error fixture in %s", k.dir("error"))
	}
	uncheckedGoldens(t, k.checked, k.dir("request"), k.dir("response"), k.dir("error"))
}

// spool stands for the relay's upload spool: it hands out the files and
// counts how they are opened, read and closed.
// The files are read by the provider's body writer, often its own
// goroutine, so the counts are atomic.
type spool struct {
	opened, closed atomic.Int64
	files          []*spooledFile
}

type spooledFile struct {
	name string
	size int64
	read atomic.Int64
}

// unclosed is how many files were opened and not closed.
func (sp *spool) unclosed() int64 { return sp.opened.Load() - sp.closed.Load() }

// form is the fixture's parts as a spooled form, each file's bytes
// repeated.
func (sp *spool) form(fields []formField, repeat int) *adapters.Form {
	form := &adapters.Form{}
	for _, p := range fields {
		if p.Filename == "" {
			form.Parts = append(form.Parts, adapters.FormPart{Name: p.Name, Value: p.Value})
			continue
		}
		data := bytes.Repeat(append([]byte(p.Data), p.DataBase64...), repeat)
		sf := &spooledFile{name: p.Filename, size: int64(len(data))}
		sp.files = append(sp.files, sf)
		form.Parts = append(form.Parts, adapters.FormPart{Name: p.Name, File: &adapters.FormFile{
			Filename: p.Filename, ContentType: p.ContentType, Size: sf.size,
			Open: func() (io.ReadCloser, error) {
				sp.opened.Add(1)
				return &spoolReader{r: bytes.NewReader(data), f: sf, sp: sp}, nil
			},
		}})
	}
	return form
}

// whole names a file read to its end, or is "".
func (sp *spool) whole() string {
	for _, f := range sp.files {
		if f.size > 0 && f.read.Load() >= f.size {
			return f.name
		}
	}
	return ""
}

type spoolReader struct {
	r      *bytes.Reader
	f      *spooledFile
	sp     *spool
	closed bool
}

func (r *spoolReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	r.f.read.Add(int64(n))
	return n, err
}

func (r *spoolReader) Close() error {
	if !r.closed {
		r.closed = true
		r.sp.closed.Add(1)
	}
	return nil
}
