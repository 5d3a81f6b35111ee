package openai

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// speechRequest is the part of POST /v1/audio/speech the gateway reads;
// the body goes upstream as sent.
type speechRequest struct {
	Model string `json:"model"`
	Input string `json:"input"`
	Voice any    `json:"voice"`
}

func decodeSpeech(req *adapters.Request, body []byte) error {
	var w speechRequest
	if err := adapters.DecodeJSON(body, &w); err != nil {
		return err
	}
	if w.Input == "" {
		return adapters.BadRequest("'input' is required: the text to speak")
	}
	if w.Voice == nil {
		return adapters.BadRequest("'voice' is required, for example \"alloy\"")
	}
	req.Model = w.Model
	req.Media = &adapters.MediaRequest{Input: w.Input}
	return nil
}

// transcriptionFormats are the response formats a transcription answers in.
var transcriptionFormats = map[string]bool{"json": true, "text": true, "srt": true, "vtt": true, "verbose_json": true}

func decodeTranscription(req *adapters.Request, form *adapters.Form) error {
	files := form.Files("file")
	if len(files) == 0 {
		if _, ok := form.Value("file"); ok {
			return adapters.BadRequest("'file' must be a file part (with a filename), not a text field")
		}
		return adapters.BadRequest("the transcription has no audio: send it as a file part named 'file'")
	}
	if len(files) > 1 {
		return adapters.BadRequest("the transcription has %d 'file' parts: send exactly one", len(files))
	}
	model, _ := form.Value("model")
	format, _ := form.Value("response_format")
	if format != "" && !transcriptionFormats[format] {
		return adapters.BadRequest("'response_format' must be one of json, text, srt, vtt or verbose_json, not %q", format)
	}
	if v, _ := form.Value("stream"); v == "true" {
		return adapters.BadRequest("streamed transcriptions are not served by this gateway: leave 'stream' unset")
	}
	req.Model = model
	req.Media = &adapters.MediaRequest{ResponseFormat: format, Form: form}
	return nil
}

// upstreamTranscriptionFormat is the format the upstream is asked for.
// Only json and verbose_json answers say how long the audio was, which is
// what a transcription is billed by, so a client's text is asked for as
// json and its srt or vtt as verbose_json (whose segments carry the
// timings), and the gateway renders the format the client asked for.
func upstreamTranscriptionFormat(client string) string {
	switch client {
	case "text":
		return "json"
	case "srt", "vtt":
		return "verbose_json"
	}
	return client
}

// transcriptionResponse is a json or verbose_json transcription.
type transcriptionResponse struct {
	Text     *string  `json:"text"`
	Duration *float64 `json:"duration"`
	Segments []struct {
		Start float64 `json:"start"`
		End   float64 `json:"end"`
		Text  string  `json:"text"`
	} `json:"segments"`
	Usage *struct {
		Type         string   `json:"type"`
		Seconds      *float64 `json:"seconds"`
		InputTokens  int64    `json:"input_tokens"`
		OutputTokens int64    `json:"output_tokens"`
	} `json:"usage"`
}

func decodeTranscriptionResponse(req *adapters.Request, body []byte) (*adapters.MediaResponse, error) {
	var w transcriptionResponse
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, fmt.Errorf("upstream answered a transcription that is not JSON: %w", err)
	}
	if w.Text == nil {
		return nil, fmt.Errorf("upstream answered a transcription without text")
	}
	resp := &adapters.MediaResponse{Raw: body, Dialect: Name, ContentType: "application/json", Text: *w.Text}
	seconds := w.Duration
	if u := w.Usage; u != nil {
		switch u.Type {
		case "duration":
			if u.Seconds != nil {
				seconds = u.Seconds
			}
		case "tokens":
			resp.Usage = adapters.Usage{PromptTokens: u.InputTokens, CompletionTokens: u.OutputTokens}
		}
	}
	if seconds != nil && *seconds >= 0 && !math.IsInf(*seconds, 0) {
		resp.Media.AudioMillis = int64(math.Ceil(min(*seconds, 1e9) * 1000))
		resp.Media.AudioKnown = true
	}
	return resp, nil
}

// encodeTranscription answers in the format the client asked for: the
// upstream's own body for json and verbose_json, and text, srt or vtt
// rendered from the json or verbose_json the upstream was asked for.
func encodeTranscription(req *adapters.Request, resp *adapters.MediaResponse) ([]byte, string, error) {
	format := req.Media.ResponseFormat
	if format == upstreamTranscriptionFormat(format) {
		return resp.Raw, "application/json", nil
	}
	if format == "text" {
		return []byte(resp.Text + "\n"), "text/plain; charset=utf-8", nil
	}
	var w transcriptionResponse
	if err := json.Unmarshal(resp.Raw, &w); err != nil {
		return nil, "", fmt.Errorf("upstream answered invalid JSON: %w", err)
	}
	var b strings.Builder
	if format == "vtt" {
		b.WriteString("WEBVTT\n\n")
	}
	for i, s := range w.Segments {
		if format == "srt" {
			fmt.Fprintf(&b, "%d\n%s --> %s\n%s\n\n", i+1, timestamp(s.Start, ','), timestamp(s.End, ','), strings.TrimSpace(s.Text))
		} else {
			fmt.Fprintf(&b, "%s --> %s\n%s\n\n", timestamp(s.Start, '.'), timestamp(s.End, '.'), strings.TrimSpace(s.Text))
		}
	}
	if format == "vtt" {
		return []byte(b.String()), "text/vtt; charset=utf-8", nil
	}
	return []byte(b.String()), "text/plain; charset=utf-8", nil
}

// timestamp writes seconds as HH:MM:SS,mmm (SubRip) or HH:MM:SS.mmm
// (WebVTT).
func timestamp(seconds float64, sep byte) string {
	ms := int64(math.Round(max(seconds, 0) * 1000))
	return fmt.Sprintf("%02d:%02d:%02d%c%03d", ms/3600000, ms/60000%60, ms/1000%60, sep, ms%1000)
}
