package gatewaytest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
)

// Fake is what every fake upstream offers a test: its address, its
// behaviour, and the requests it received. FakeOpenAI, FakeAnthropic and
// FakeGemini each speak their vendor's wire format as the vendor's API
// reference describes it and refuse, with the vendor's own error shape,
// what the real API refuses.
type Fake interface {
	BaseURL() string
	Set(change func(b *Behavior))
	Requests() []Recorded
	Close()
}

// Tool use is the same for every fake, a weather bot: offered tools, the
// model says ToolText and calls get_weather for Paris and Rome in
// parallel (WeatherCalls); given the results of its calls it says
// "Weather: <the results, joined by ", ">.".
const ToolText = "Checking."

// Call is a tool call a fake's model makes.
type Call struct{ Name, Args string }

// WeatherCalls are the calls the weather bot makes.
var WeatherCalls = []Call{{"get_weather", `{"city":"Paris"}`}, {"get_weather", `{"city":"Rome"}`}}

// FakeSignature is the thought signature FakeGemini puts on its first
// function call, base64 as Gemini sends it.
const FakeSignature = "c2lnLXBhcmlz"

// answer is what the model says to a request, and which calls it makes.
func answer(b *Behavior, rec *Recorded) (text string, calls []Call) {
	switch {
	case len(rec.Results) > 0:
		return "Weather: " + strings.Join(rec.Results, ", ") + ".", nil
	case len(rec.Tools) > 0:
		return ToolText, WeatherCalls
	}
	return b.Reply, nil
}

// recorder is the request log and the behaviour a fake shares with its
// test, under one lock.
type recorder struct {
	mu       sync.Mutex
	requests []Recorded
	b        Behavior
}

// defaultBehavior is where every fake starts.
func defaultBehavior() Behavior {
	return Behavior{Reply: "Hello from the fake upstream", PromptTokens: 10, CompletionTokens: 20}
}

// Set changes behaviour under the lock.
func (f *recorder) Set(change func(b *Behavior)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	change(&f.b)
}

// Requests returns what the fake received so far, refused requests too.
func (f *recorder) Requests() []Recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Recorded(nil), f.requests...)
}

// record logs a request as it arrives and returns the behaviour to answer
// it with and the entry's index, for update.
func (f *recorder) record(rec Recorded) (Behavior, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, rec)
	return f.b, len(f.requests) - 1
}

// update stores what the fake read from request i.
func (f *recorder) update(i int, rec *Recorded) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests[i] = *rec
}

func writeJSONStatus(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func startSSE(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
}

// spaced rewrites compact JSON as Python's json.dumps and many
// OpenAI-compatible servers write it: ", " between members and elements,
// ": " after a key.
func spaced(b []byte) []byte {
	out := make([]byte, 0, len(b)+len(b)/8)
	in := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		out = append(out, c)
		switch {
		case in && c == '\\' && i+1 < len(b):
			i++
			out = append(out, b[i])
		case c == '"':
			in = !in
		case !in && (c == ',' || c == ':'):
			out = append(out, ' ')
		}
	}
	return out
}

// sse writes one event (event may be empty) and flushes it.
func sse(w http.ResponseWriter, event string, v any) {
	b, _ := json.Marshal(v)
	if event != "" {
		fmt.Fprintf(w, "event: %s\n", event)
	}
	fmt.Fprintf(w, "data: %s\n\n", b)
	w.(http.Flusher).Flush()
}

// splitWords splits text into words that keep their following space, as
// models stream them.
func splitWords(text string) []string {
	var out []string
	for _, w := range strings.SplitAfter(text, " ") {
		if w != "" {
			out = append(out, w)
		}
	}
	return out
}
