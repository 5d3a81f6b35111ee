package integration

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
)

// The helpers every integration test shares: one way to wait for the
// gateway's background work, one way to read an error it answered.

// eventually polls cond for up to a minute: the gateway's writer, poller
// and caches work in the background. The deadline only turns a hang into a
// failure.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	within(t, time.Minute, what, cond)
}

// within polls cond until it holds, and fails the test when it has not
// within limit; use it where the limit is what the test checks (a cache
// TTL, a log flush), eventually where any time will do.
func within(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up after %s waiting for %s", limit, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// sdkError is err as the OpenAI SDK's API error: the status, code and
// message the gateway answered. It fails the test when err is not one.
func sdkError(t *testing.T, err error) *openai.Error {
	t.Helper()
	var e *openai.Error
	if !errors.As(err, &e) {
		t.Fatalf("err = %v, want an API error", err)
	}
	return e
}

// apiError asserts err is the SDK's API error with the status and code
// (any code when code is empty).
func apiError(t *testing.T, err error, status int, code string) *openai.Error {
	t.Helper()
	var e *openai.Error
	if !errors.As(err, &e) {
		t.Fatalf("err = %v, want an API error %d", err, status)
	}
	if e.StatusCode != status || (code != "" && e.Code != code) {
		t.Fatalf("got %d code %q (%s), want %d code %q", e.StatusCode, e.Code, e.Message, status, code)
	}
	return e
}

// openAIError is the error object of the envelope /v1/* and /api/*
// answer with: {"error":{"message","type","param","code"}}.
type openAIError struct {
	Message string `json:"message"`
	Type    string `json:"type"`
	Param   string `json:"param"`
	Code    string `json:"code"`
}

// errorBody reads body as the OpenAI error envelope; ok is false when it
// is not JSON or carries no error object.
func errorBody(body []byte) (e openAIError, ok bool) {
	var env struct {
		Error *openAIError `json:"error"`
	}
	if json.Unmarshal(body, &env) != nil || env.Error == nil {
		return openAIError{}, false
	}
	return *env.Error, true
}

// downloadedCSV waits until the browser has written file whole and returns
// its records: the file can be there a moment before its bytes (CI once
// read a download empty), so a read counts once its last line is ended.
func downloadedCSV(t *testing.T, file string) [][]string {
	t.Helper()
	var recs [][]string
	eventually(t, "the CSV is downloaded", func() bool {
		b, err := os.ReadFile(file)
		if err != nil || len(b) == 0 || b[len(b)-1] != '\n' {
			return false
		}
		recs, err = csv.NewReader(bytes.NewReader(b)).ReadAll()
		return err == nil
	})
	return recs
}
