package integration

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand"
	"mime/multipart"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
)

// Uploads: spooled to disk so memory does not grow with them, re-sent
// byte for byte when a channel fails, and bounded in how much disk they
// take at once.

// TestMediaUploadMemory uploads 20 MiB and then 200 MiB through the
// gateway: its peak resident memory must not grow with the upload, which
// is spooled to disk and streamed on, never held.
func TestMediaUploadMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("uploads 220 MiB")
	}
	s := startMedia(t, "300MB")
	upload := func(size int64) {
		t.Helper()
		pr, pw := io.Pipe()
		mw := multipart.NewWriter(pw)
		h := sha256.New()
		go func() {
			mw.WriteField("model", "whisper-1")
			w, _ := mw.CreateFormFile("file", "long.wav")
			src := rand.New(rand.NewSource(size))
			buf := make([]byte, 256<<10)
			for left := size; left > 0; left -= int64(len(buf)) {
				chunk := buf[:min(int64(len(buf)), left)]
				src.Read(chunk)
				h.Write(chunk)
				if _, err := w.Write(chunk); err != nil {
					pw.CloseWithError(err)
					return
				}
			}
			pw.CloseWithError(mw.Close())
		}()
		req, _ := http.NewRequest(http.MethodPost, s.gw.URL+"/v1/audio/transcriptions", pr)
		req.Header.Set("Authorization", "Bearer "+s.key)
		req.Header.Set("Content-Type", mw.FormDataContentType())
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), gatewaytest.FakeTranscriptText()) {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
		last := s.openai.Requests()[len(s.openai.Requests())-1]
		if len(last.Files) != 1 || last.Files[0].Size != size || last.Files[0].SHA256 != hex.EncodeToString(h.Sum(nil)) {
			t.Fatalf("upstream got %+v, want %d bytes", last.Files, size)
		}
	}
	upload(20 << 20)
	small := s.gw.PeakRSS()
	upload(200 << 20)
	large := s.gw.PeakRSS()
	t.Logf("peak RSS after 20 MiB: %d MiB, after 200 MiB: %d MiB", small>>20, large>>20)
	// holding the upload would add 180 MiB; a fixed margin allows for
	// buffers and the runtime
	if grew := large - small; grew > 48<<20 {
		t.Fatalf("peak RSS grew by %d MiB for a 180 MiB larger upload", grew>>20)
	}
}

// mediaFailoverConfig has two OpenAI channels for whisper-1 and tts-1,
// the first preferred, the second with a short timeout.
func mediaFailoverConfig() *caddyfile {
	return gatewayConfig().
		channel("first", "openai", "{{UP1}}", "sk-media-first", "whisper-1", "priority 10").
		channel("second", "openai", "{{UP2}}", "sk-media-second", "whisper-1 tts-1", "timeout 1s").
		price("whisper-1", "audio_second 0.0001").
		price("tts-1", "characters 15")
}

// TestMediaUploadFailover: a spooled upload is re-sent, byte for byte, to
// the next channel when the first fails, and billed once; speech from an
// upstream that goes silent is cut at the channel's timeout.
func TestMediaUploadFailover(t *testing.T) {
	first, second := gatewaytest.NewFakeOpenAI(t, "sk-media-first"), gatewaytest.NewFakeOpenAI(t, "sk-media-second")
	gw := gatewaytest.Start(t, mediaFailoverConfig().String(), gatewaytest.Vars{"UP1": first.URL, "UP2": second.URL})
	s := &mediaSetup{gw: gw, openai: second, key: gw.AddUser("artist", mediaQuota)}
	c := s.client()
	u := &usageCheck{t: t, s: s}
	ctx := context.Background()

	first.Set(func(b *gatewaytest.Behavior) { b.FailStatus = 503 })
	audio := randomBytes(9, 3<<20)
	res, err := c.Audio.Transcriptions.New(ctx, openai.AudioTranscriptionNewParams{Model: "whisper-1", File: openai.File(bytes.NewReader(audio), "a.ogg", "audio/ogg")})
	if err != nil {
		t.Fatal(err)
	}
	if res.Text != gatewaytest.FakeTranscriptText() {
		t.Fatalf("answer %+v", res)
	}
	tried, got := first.Requests(), second.Requests()
	if len(tried) != 1 || len(got) != 1 || len(got[0].Files) != 1 || got[0].Files[0].SHA256 != sha(audio) || got[0].Files[0].ContentType != "audio/ogg" {
		t.Fatalf("first tried %d, second got %+v", len(tried), got)
	}
	u.expect("/v1/audio/transcriptions", "whisper-1", 200, 725)

	second.Set(func(b *gatewaytest.Behavior) { b.Media.SpeechHangAfter = 64 << 10 })
	resp, err := c.Audio.Speech.New(ctx, openai.AudioSpeechNewParams{Model: "tts-1", Input: "silence",
		Voice: openai.AudioSpeechNewParamsVoiceUnion{OfString: openai.String("alloy")}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err == nil || len(b) != 64<<10 {
		t.Fatalf("read %d bytes, err %v: want the bytes sent, then an error", len(b), err)
	}
	u.expect("/v1/audio/speech", "tts-1", 502, perMillion(7, 15_000_000))
	if rows := gw.WaitUsage("artist", u.rows); !strings.Contains(rows[u.rows-1].Error, "timeout") {
		t.Fatalf("row error %q", rows[u.rows-1].Error)
	}
	u.balance()
}

// TestMediaUploadsInFlightBounded: the disk uploads take at once is
// bounded (max_inflight_uploads), counted as their bytes arrive: a
// stalled upload holds what it sent, not its Content-Length. Past the
// bound an upload gets a 503 with Retry-After at once, and the space is
// given back when an upload ends.
func TestMediaUploadsInFlightBounded(t *testing.T) {
	// shares larger than the whole: this is about the whole
	s := startMedia(t, "2MB", "max_inflight_uploads 3MB", "max_inflight_uploads_per_key 4MB", "max_inflight_uploads_per_address 4MB")
	host := strings.TrimPrefix(s.gw.URL, "http://")
	body, ct := form(t, map[string]string{"model": "whisper-1"}, map[string][]byte{"file": randomBytes(10, 3<<19)})
	probe := func() (*http.Response, string) {
		resp, out := s.gw.Do(http.MethodPost, "/v1/audio/transcriptions", s.key, body, http.Header{"Content-Type": {ct}})
		return resp, string(out)
	}
	refused := func(resp *http.Response, out string) bool {
		return resp.StatusCode == 503 && resp.Header.Get("Retry-After") != "" && strings.Contains(out, "too many uploads")
	}
	// stall sends an upload that says it is 1.9 MB, sends 1.2 MB of it
	// and stalls. The channel gets the answer if one comes, or nil when
	// the gateway closes the connection (after refusing an upload it has
	// not read, the kernel may reset the connection and lose the answer).
	stall := func() (net.Conn, chan *http.Response) {
		conn, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		fmt.Fprintf(conn, "POST /v1/audio/transcriptions HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n"+
			"Content-Type: multipart/form-data; boundary=stall\r\nContent-Length: 1900000\r\n\r\n"+
			"--stall\r\nContent-Disposition: form-data; name=\"file\"; filename=\"stalled.wav\"\r\n\r\n", host, s.key)
		conn.Write(randomBytes(11, 1_200_000))
		answered := make(chan *http.Response, 1)
		go func() {
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				resp = nil
			}
			answered <- resp
		}()
		return conn, answered
	}
	// one stalled upload holds its 1.2 MB, not the 1.9 MB it declares:
	// a probe of 1.5 MB fits beside it
	conn1, answered1 := stall()
	if resp, out := probe(); resp.StatusCode != 200 {
		t.Fatalf("a 1.5 MB upload beside one stalled at 1.2 MB of 3 MB: %d %s", resp.StatusCode, out)
	}
	// a second stalled upload leaves no room for the probe, which is
	// refused at once. On a busy machine a probe may take its space before
	// a stalled upload is read; then the stalled upload is the one
	// refused, as it should be, and it is sent again.
	conn2, answered2 := stall()
	eventually(t, "the stalled uploads to hold their space", func() bool {
		for _, st := range []struct {
			conn     *net.Conn
			answered *chan *http.Response
		}{{&conn1, &answered1}, {&conn2, &answered2}} {
			select {
			case a := <-*st.answered:
				if a != nil {
					out, _ := io.ReadAll(a.Body)
					if !refused(a, string(out)) {
						t.Fatalf("a stalled upload was answered: %d %s", a.StatusCode, out)
					}
				}
				(*st.conn).Close()
				*st.conn, *st.answered = stall()
			default:
			}
		}
		return refused(probe())
	})
	// a stalled upload is answered only when refused (the probe may have
	// taken its space as it was sent again)
	for _, answered := range []chan *http.Response{answered1, answered2} {
		select {
		case a := <-answered:
			if a != nil {
				out, _ := io.ReadAll(a.Body)
				if !refused(a, string(out)) {
					t.Fatalf("a stalled upload was answered while it held its space: %d %s", a.StatusCode, out)
				}
			}
		default:
		}
	}
	conn1.Close()
	conn2.Close()
	// the space is back
	eventually(t, "the space to come back", func() bool {
		resp, _ := probe()
		return resp.StatusCode == 200
	})
}

// TestStalledUploadsStallNoOneElse is issue 30's attack on uploads: 41
// multipart bodies that declare max_upload_size and stall after their
// first bytes took the whole max_inflight_uploads (charged at the
// declared size), and every other user's upload got 503. They hold what
// they sent now: another user's upload is served while they stall.
func TestStalledUploadsStallNoOneElse(t *testing.T) {
	s := startMedia(t, "2MB", "max_inflight_uploads 82MB") // 41 of the largest upload, as 1 GiB is of 25 MiB
	victim := s.gw.AddUser("victim", mediaQuota)
	host := strings.TrimPrefix(s.gw.URL, "http://")
	var conns []net.Conn
	var answers []chan *http.Response
	for range 41 {
		conn, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		fmt.Fprintf(conn, "POST /v1/audio/transcriptions HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n"+
			"Content-Type: multipart/form-data; boundary=stall\r\nContent-Length: 2000000\r\n\r\n"+
			"--stall\r\nContent-Disposition: form-data; name=\"file\"; filename=\"stalled.wav\"\r\n\r\n", host, s.key)
		conn.Write(randomBytes(12, 1<<10))
		answered := make(chan *http.Response, 1)
		go func() {
			resp, _ := http.ReadResponse(bufio.NewReader(conn), nil)
			answered <- resp
		}()
		conns, answers = append(conns, conn), append(answers, answered)
	}
	c := openai.NewClient(option.WithBaseURL(s.gw.URL+"/v1/"), option.WithAPIKey(victim), option.WithMaxRetries(0))
	audio := randomBytes(13, 3<<19)
	for i := range 3 {
		res, err := c.Audio.Transcriptions.New(context.Background(), openai.AudioTranscriptionNewParams{Model: "whisper-1",
			File: openai.File(bytes.NewReader(audio), "a.ogg", "audio/ogg")})
		if err != nil || res.Text != gatewaytest.FakeTranscriptText() {
			t.Fatalf("another user's upload %d while 41 uploads stall: %v", i, err)
		}
		time.Sleep(20 * time.Millisecond) // give the stalled uploads every chance to reach the gateway
	}
	for i, answered := range answers {
		select {
		case a := <-answered:
			t.Fatalf("stalled upload %d was answered: %v", i, a)
		default:
		}
		conns[i].Close()
	}
}
