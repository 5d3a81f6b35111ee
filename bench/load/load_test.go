package load

import (
	"strings"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	var r Recorder
	for i := 100; i >= 1; i-- {
		r.Add(time.Duration(i) * time.Millisecond)
	}
	for _, tc := range []struct {
		p    float64
		want time.Duration
	}{
		{50, 50 * time.Millisecond},
		{99, 99 * time.Millisecond},
		{99.9, 100 * time.Millisecond},
		{100, 100 * time.Millisecond},
		{0.1, 1 * time.Millisecond},
	} {
		if got := r.Percentile(tc.p); got != tc.want {
			t.Errorf("p%v = %v, want %v", tc.p, got, tc.want)
		}
	}
	if got := r.Mean(); got != 50500*time.Microsecond {
		t.Errorf("mean = %v", got)
	}
	var empty Recorder
	if empty.Percentile(50) != 0 || empty.Mean() != 0 {
		t.Error("empty recorder should report zeros")
	}
	var other Recorder
	other.Add(time.Second)
	r.Merge(&other)
	if r.Count() != 101 || r.Max() != time.Second {
		t.Errorf("after merge: count %d max %v", r.Count(), r.Max())
	}
}

func TestReadEvents(t *testing.T) {
	for _, tc := range []struct {
		name   string
		body   string
		events int
		done   bool
		fail   bool
	}{
		{"openai", "data: {\"a\":1}\n\ndata: {\"a\":2}\n\ndata: [DONE]\n\n", 2, true, false},
		{"crlf and comments", ": keep-alive\r\n\r\ndata:{\"a\":1}\r\n\r\nevent: x\r\ndata: [1]\r\n\r\ndata: [DONE]\r\n\r\n", 2, true, false},
		{"multi-line data", "data: {\"a\":\ndata: 1}\n\ndata: [DONE]\n\n", 1, true, false},
		{"no done", "data: {}\n\ndata: {}\n\n", 2, false, false},
		{"last without blank line", "data: {}\n\ndata: [DONE]", 1, true, false},
		{"not json", "data: {}\n\ndata: hello\n\n", 1, false, true},
		{"event after done", "data: [DONE]\n\ndata: {}\n\n", 0, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			firsts := 0
			events, done, err := ReadEvents(strings.NewReader(tc.body), func() { firsts++ })
			if events != tc.events || done != tc.done || (err != nil) != tc.fail {
				t.Errorf("got %d events, done %v, err %v; want %d, %v, fail %v", events, done, err, tc.events, tc.done, tc.fail)
			}
			if firsts != 1 {
				t.Errorf("first called %d times", firsts)
			}
		})
	}
}

func TestValidateCompletion(t *testing.T) {
	good := `{"object":"chat.completion","choices":[{"message":{"content":"hi"}}],"usage":{"total_tokens":3}}`
	if err := ValidateCompletion(200, []byte(good)); err != nil {
		t.Error(err)
	}
	for _, bad := range []string{
		`{"object":"chat.completion","choices":[]}`,
		`{"object":"chat.completion","choices":[{"message":{"content":""}}],"usage":{"total_tokens":3}}`,
		`{"object":"chat.completion","choices":[{"message":{"content":"hi"}}]}`,
		`not json`,
	} {
		if ValidateCompletion(200, []byte(bad)) == nil {
			t.Errorf("accepted %s", bad)
		}
	}
	if ValidateCompletion(502, []byte(good)) == nil {
		t.Error("accepted status 502")
	}
}
