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

// FakeGemini is an upstream that speaks the Gemini API as its reference
// describes it: models/{model}:generateContent,
// :streamGenerateContent?alt=sse (each chunk a GenerateContentResponse)
// and :countTokens, under /v1beta. It refuses what the real API refuses:
// a missing or wrong x-goog-api-key, no contents, a role other than user
// or model, function responses that do not answer the previous turn's
// calls, and (as Gemini 3 does) a function call sent back without the
// thought signature it was given.
type FakeGemini struct {
	*httptest.Server
	Key string // the key it expects in x-goog-api-key
	recorder
	// Videos is Veo's job table (fakevideo.go).
	Videos *JobStore
}

var _ Fake = (*FakeGemini)(nil)

// NewFakeGemini starts a fake that expects key.
func NewFakeGemini(t testing.TB, key string) *FakeGemini {
	Secret(key)
	f := &FakeGemini{Key: key, Videos: &JobStore{}}
	f.b = defaultBehavior()
	f.Server = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.Close)
	return f
}

// BaseURL is the address a channel's base_url names.
func (f *FakeGemini) BaseURL() string { return f.URL }

// geminiStatus is the google.rpc status an HTTP status comes with.
func geminiStatus(status int) string {
	switch status {
	case 400:
		return "INVALID_ARGUMENT"
	case 403:
		return "PERMISSION_DENIED"
	case 404:
		return "NOT_FOUND"
	case 429:
		return "RESOURCE_EXHAUSTED"
	case 503:
		return "UNAVAILABLE"
	case 504:
		return "DEADLINE_EXCEEDED"
	}
	return "INTERNAL"
}

func geminiError(w http.ResponseWriter, status int, msg string) {
	writeJSONStatus(w, status, map[string]any{"error": map[string]any{"code": status, "message": msg, "status": geminiStatus(status)}})
}

type geminiPart struct {
	Text             *string `json:"text"`
	Thought          bool    `json:"thought"`
	ThoughtSignature string  `json:"thoughtSignature"`
	InlineData       *struct {
		MimeType string `json:"mimeType"`
		Data     string `json:"data"`
	} `json:"inlineData"`
	FunctionCall *struct {
		Name string         `json:"name"`
		Args map[string]any `json:"args"`
	} `json:"functionCall"`
	FunctionResponse *struct {
		Name     string         `json:"name"`
		Response map[string]any `json:"response"`
	} `json:"functionResponse"`
}

func (f *FakeGemini) serve(w http.ResponseWriter, r *http.Request) {
	if f.Videos.serveVeo(w, r, f.Key) {
		return
	}
	raw, _ := io.ReadAll(r.Body)
	var mbody map[string]any
	_ = json.Unmarshal(raw, &mbody)
	cfg, i := f.record(Recorded{Path: r.URL.Path, Header: r.Header.Clone(), Body: mbody, Raw: raw})
	if r.Header.Get("x-goog-api-key") != f.Key {
		geminiError(w, 400, "API key not valid. Please pass a valid API key.")
		return
	}
	if cfg.FailStatus != 0 {
		geminiError(w, cfg.FailStatus, "The service is currently unavailable.")
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/v1beta/models/")
	model, method, _ := strings.Cut(rest, ":")
	if !ok || model == "" {
		geminiError(w, 404, "no such method")
		return
	}
	if f.geminiMedia(w, i, model, method, raw) {
		return // Imagen's :predict, or image output
	}
	var body struct {
		Contents []struct {
			Role  string       `json:"role"`
			Parts []geminiPart `json:"parts"`
		} `json:"contents"`
		SystemInstruction *struct {
			Parts []geminiPart `json:"parts"`
		} `json:"systemInstruction"`
		Tools []struct {
			FunctionDeclarations []struct {
				Name string `json:"name"`
			} `json:"functionDeclarations"`
		} `json:"tools"`
		GenerateContentRequest json.RawMessage `json:"generateContentRequest"`
	}
	if err := json.Unmarshal(raw, &body); err != nil {
		geminiError(w, 400, "Invalid JSON payload received.")
		return
	}
	rec := f.Requests()[i]
	rec.Model = model
	if method == "countTokens" {
		f.update(i, &rec)
		writeJSONStatus(w, 200, map[string]any{"totalTokens": CountTokens})
		return
	}
	stream := method == "streamGenerateContent"
	if (method != "generateContent" && !stream) || (stream && r.URL.Query().Get("alt") != "sse") {
		geminiError(w, 400, "this fake serves generateContent and streamGenerateContent?alt=sse")
		return
	}
	if len(body.Contents) == 0 {
		geminiError(w, 400, "* GenerateContentRequest.contents: contents is not specified")
		return
	}
	rec.Stream = stream
	if si := body.SystemInstruction; si != nil {
		for _, p := range si.Parts {
			if p.Text != nil {
				rec.System += *p.Text
			}
		}
	}
	for _, t := range body.Tools {
		for _, d := range t.FunctionDeclarations {
			rec.Tools = append(rec.Tools, d.Name)
		}
	}
	var lastCalls []string
	for i, c := range body.Contents {
		switch c.Role {
		case "model":
			lastCalls = nil
			first := true
			for _, p := range c.Parts {
				if p.FunctionCall == nil {
					continue
				}
				if first && p.ThoughtSignature == "" {
					geminiError(w, 400, fmt.Sprintf("Function call `%s` in the %d. content block is missing a `thought_signature`.", p.FunctionCall.Name, i))
					return
				}
				if first {
					rec.Signatures = append(rec.Signatures, p.ThoughtSignature)
				}
				first = false
				lastCalls = append(lastCalls, p.FunctionCall.Name)
			}
		case "user", "":
			var answered, results []string
			for _, p := range c.Parts {
				switch {
				case p.Text != nil && i == 0:
					rec.Prompt += *p.Text
				case p.InlineData != nil:
					rec.Image, _ = base64.StdEncoding.DecodeString(p.InlineData.Data)
				case p.FunctionResponse != nil:
					answered = append(answered, p.FunctionResponse.Name)
					out, _ := json.Marshal(p.FunctionResponse.Response["output"])
					var text string
					if json.Unmarshal(out, &text) != nil {
						text = string(out)
					}
					results = append(results, text)
				}
			}
			if strings.Join(answered, ",") != strings.Join(lastCalls, ",") {
				geminiError(w, 400, "Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn.")
				return
			}
			rec.Results, lastCalls = results, nil
		default:
			geminiError(w, 400, "Please use a valid role: user, model.")
			return
		}
	}
	f.update(i, &rec)
	f.answer(w, &cfg, &rec)
}

func (f *FakeGemini) answer(w http.ResponseWriter, cfg *Behavior, rec *Recorded) {
	text, calls := answer(cfg, rec)
	// Gemini's promptTokenCount includes the cached tokens
	var usage map[string]any
	if !cfg.NoUsage {
		usage = map[string]any{"promptTokenCount": cfg.PromptTokens, "candidatesTokenCount": cfg.CompletionTokens,
			"totalTokenCount": cfg.PromptTokens + cfg.CompletionTokens, "cachedContentTokenCount": cfg.CachedTokens,
			"promptTokensDetails": []any{map[string]any{"modality": "TEXT", "tokenCount": cfg.PromptTokens}}}
	}
	callParts := []any{}
	for i, c := range calls {
		var args map[string]any
		_ = json.Unmarshal([]byte(c.Args), &args)
		p := map[string]any{"functionCall": map[string]any{"name": c.Name, "args": args}}
		if i == 0 {
			p["thoughtSignature"] = FakeSignature
		}
		callParts = append(callParts, p)
	}
	resp := func(parts []any, finish string, u map[string]any) map[string]any {
		cand := map[string]any{"content": map[string]any{"parts": parts, "role": "model"}, "index": 0}
		if finish != "" {
			cand["finishReason"] = finish
		}
		out := map[string]any{"candidates": []any{cand}, "modelVersion": rec.Model, "responseId": "fake-resp-1"}
		if u != nil {
			out["usageMetadata"] = u
		}
		return out
	}
	if !rec.Stream {
		writeJSONStatus(w, 200, resp(append([]any{map[string]any{"text": text}}, callParts...), "STOP", usage))
		return
	}
	startSSE(w)
	words := splitWords(text)
	for i, word := range words {
		parts := []any{map[string]any{"text": word}}
		if i == len(words)-1 {
			parts = append(parts, callParts...)
			sse(w, "", resp(parts, "STOP", usage))
			break
		}
		var partial map[string]any
		if !cfg.NoUsage {
			partial = map[string]any{"promptTokenCount": cfg.PromptTokens, "totalTokenCount": cfg.PromptTokens}
		}
		sse(w, "", resp(parts, "", partial))
	}
}
