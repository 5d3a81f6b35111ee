package integration

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/caddy-model-gateway/gateway/internal/gatewaytest"
)

// Audio: transcriptions (multipart uploads) billed by the second and
// speech billed by the character.

func TestMediaAudio(t *testing.T) {
	s := startMedia(t, "25MB")
	c := s.client()
	ctx := context.Background()
	u := &usageCheck{t: t, s: s}
	audio := randomBytes(7, 512<<10)
	// 7.25 s at 0.0001 USD a second
	const transcriptionCost = 725

	params := func(format openai.AudioResponseFormat) openai.AudioTranscriptionNewParams {
		return openai.AudioTranscriptionNewParams{Model: "whisper-1", File: openai.File(bytes.NewReader(audio), "speech.mp3", "audio/mpeg"), ResponseFormat: format}
	}
	t.Run("json and verbose_json", func(t *testing.T) {
		res, err := c.Audio.Transcriptions.New(ctx, params(openai.AudioResponseFormatJSON))
		if err != nil {
			t.Fatal(err)
		}
		if res.Text != gatewaytest.FakeTranscriptText() || res.Usage.Seconds != gatewaytest.FakeAudioSeconds {
			t.Fatalf("answer %+v", res)
		}
		last := s.openai.Requests()[len(s.openai.Requests())-1]
		if len(last.Files) != 1 || last.Files[0].SHA256 != sha(audio) || last.Files[0].Filename != "speech.mp3" || last.Body["response_format"] != "json" {
			t.Fatalf("upstream got %+v %v", last.Files, last.Body)
		}
		u.expect("/v1/audio/transcriptions", "whisper-1", 200, transcriptionCost)

		res, err = c.Audio.Transcriptions.New(ctx, params(openai.AudioResponseFormatVerboseJSON))
		if err != nil {
			t.Fatal(err)
		}
		if res.Duration != gatewaytest.FakeAudioSeconds || len(res.Segments) != 2 || res.Language != "english" {
			t.Fatalf("answer %+v", res)
		}
		u.expect("/v1/audio/transcriptions", "whisper-1", 200, transcriptionCost)
	})

	want := map[openai.AudioResponseFormat]struct{ body, ct, upstream string }{
		openai.AudioResponseFormatText: {gatewaytest.FakeTranscriptText() + "\n", "text/plain; charset=utf-8", "json"},
		openai.AudioResponseFormatSRT: {"1\n00:00:00,000 --> 00:00:03,500\nHello from the fake upstream.\n\n2\n00:00:03,500 --> 00:00:07,250\nThis is a test.\n\n",
			"text/plain; charset=utf-8", "verbose_json"},
		openai.AudioResponseFormatVTT: {"WEBVTT\n\n00:00:00.000 --> 00:00:03.500\nHello from the fake upstream.\n\n00:00:03.500 --> 00:00:07.250\nThis is a test.\n\n",
			"text/vtt; charset=utf-8", "verbose_json"},
	}
	for _, format := range []openai.AudioResponseFormat{openai.AudioResponseFormatText, openai.AudioResponseFormatSRT, openai.AudioResponseFormatVTT} {
		t.Run(string(format), func(t *testing.T) {
			var text string
			var raw *http.Response
			err := c.Post(ctx, "audio/transcriptions", params(format), &text, option.WithResponseInto(&raw))
			if err != nil {
				t.Fatal(err)
			}
			w := want[format]
			if text != w.body || raw.Header.Get("Content-Type") != w.ct {
				t.Fatalf("%s answered %q (%s), want %q", format, text, raw.Header.Get("Content-Type"), w.body)
			}
			// the upstream is asked for a format that says how long the audio was
			last := s.openai.Requests()[len(s.openai.Requests())-1]
			if last.Body["response_format"] != w.upstream || last.Files[0].SHA256 != sha(audio) {
				t.Fatalf("upstream got %v", last.Body)
			}
			u.expect("/v1/audio/transcriptions", "whisper-1", 200, transcriptionCost)
		})
	}

	t.Run("no duration reported: the reservation's estimate is charged", func(t *testing.T) {
		s.openai.Set(func(b *gatewaytest.Behavior) { b.Media.NoAudioUsage = true })
		defer s.openai.Set(func(b *gatewaytest.Behavior) { b.Media.NoAudioUsage = false })
		if _, err := c.Audio.Transcriptions.New(ctx, params(openai.AudioResponseFormatJSON)); err != nil {
			t.Fatal(err)
		}
		// 512 KiB at 16 kbit/s is 262 seconds
		u.expect("/v1/audio/transcriptions", "whisper-1", 200, 262*100)
		if rows := s.gw.WaitUsage("artist", u.rows); !rows[u.rows-1].Estimated {
			t.Fatal("the row does not say its charge is estimated")
		}
	})

	t.Run("missing file part, wrong content type, wrong family", func(t *testing.T) {
		body, ct := form(t, map[string]string{"model": "whisper-1"}, nil)
		resp, out := s.gw.Do(http.MethodPost, "/v1/audio/transcriptions", s.key, body, http.Header{"Content-Type": {ct}})
		if resp.StatusCode != 400 || !strings.Contains(string(out), "'file'") {
			t.Fatalf("%d %s", resp.StatusCode, out)
		}
		u.expect("/v1/audio/transcriptions", "", 400, 0)
		resp, out = s.gw.Do(http.MethodPost, "/v1/audio/transcriptions", s.key, []byte(`{"model":"whisper-1"}`), nil)
		if resp.StatusCode != 400 || !strings.Contains(string(out), "multipart/form-data") {
			t.Fatalf("%d %s", resp.StatusCode, out)
		}
		u.expect("/v1/audio/transcriptions", "whisper-1", 400, 0) // a refusal whose model is known is counted under it
		_, err := c.Audio.Speech.New(ctx, openai.AudioSpeechNewParams{Model: "imagen-4.0-generate-001", Input: "hi", Voice: openai.AudioSpeechNewParamsVoiceUnion{OfString: openai.String("alloy")}})
		if e := sdkError(t, err); e.StatusCode != 400 || !strings.Contains(e.Message, "no speech endpoint") || !strings.Contains(e.Message, "imagen-4.0-generate-001") {
			t.Fatalf("%d %s", e.StatusCode, e.Message)
		}
		u.expect("/v1/audio/speech", "imagen-4.0-generate-001", 400, 0)
	})

	t.Run("speech bytes arrive intact with the upstream's content type", func(t *testing.T) {
		for _, format := range []openai.AudioSpeechNewParamsResponseFormat{"", openai.AudioSpeechNewParamsResponseFormatOpus} {
			input := "The quick brown fox jumps over the lazy dog, " + string(format) + " édition."
			resp, err := c.Audio.Speech.New(ctx, openai.AudioSpeechNewParams{Model: "tts-1", Input: input,
				Voice: openai.AudioSpeechNewParamsVoiceUnion{OfString: openai.String("alloy")}, ResponseFormat: format})
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			if wantAudio := gatewaytest.FakeSpeech(input, string(format)); !bytes.Equal(got, wantAudio) {
				t.Fatalf("%d bytes arrived, want the upstream's %d", len(got), len(wantAudio))
			}
			if ct := resp.Header.Get("Content-Type"); ct != gatewaytest.SpeechContentType(string(format)) {
				t.Fatalf("content type %q", ct)
			}
			// 15 USD per million characters
			u.expect("/v1/audio/speech", "tts-1", 200, perMillion(int64(len([]rune(input))), 15_000_000))
		}
	})

	t.Run("speech that breaks off mid-answer", func(t *testing.T) {
		s.openai.Set(func(b *gatewaytest.Behavior) { b.Media.SpeechBreakAfter = 100 << 10 })
		defer s.openai.Set(func(b *gatewaytest.Behavior) { b.Media.SpeechBreakAfter = 0 })
		resp, err := c.Audio.Speech.New(ctx, openai.AudioSpeechNewParams{Model: "tts-1", Input: "broken",
			Voice: openai.AudioSpeechNewParamsVoiceUnion{OfString: openai.String("alloy")}})
		if err != nil {
			t.Fatal(err)
		}
		_, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil {
			t.Fatal("a cut answer ended cleanly")
		}
		// the upstream spoke, and is billed
		u.expect("/v1/audio/speech", "tts-1", 502, perMillion(6, 15_000_000))
	})
	u.balance()
}
