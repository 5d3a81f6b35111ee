package load

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Request bodies: the smallest realistic chat completion, and its streaming
// twin asking for the usage chunk (a gateway passes that chunk on only when
// the client asked for it).
var (
	ChatBody   = []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Say hello"}]}`)
	StreamBody = []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Say hello"}],"stream":true,"stream_options":{"include_usage":true}}`)
)

// NewTransport returns an HTTP/1.1 keep-alive transport that keeps up to
// conns idle connections to one host, so a run of conc workers never
// reconnects.
func NewTransport(conns int) *http.Transport {
	return &http.Transport{
		Proxy: nil,
		DialContext: (&net.Dialer{
			Timeout:   10 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		MaxIdleConns:          0,
		MaxIdleConnsPerHost:   conns,
		IdleConnTimeout:       90 * time.Second,
		DisableCompression:    true,
		ResponseHeaderTimeout: 60 * time.Second,
		ForceAttemptHTTP2:     false,
	}
}

// Client sends chat completions to one target and validates the answers.
type Client struct {
	HTTP  *http.Client
	URL   string // full URL of the chat completions endpoint
	Token string // sent as Authorization: Bearer
	// Events is how many data events (before [DONE]) a valid stream has.
	Events int
	// Timeout bounds one request, answer included.
	Timeout time.Duration
}

var bodyPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func (c *Client) newRequest(ctx context.Context, body []byte) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+c.Token)
	return req, nil
}

type completion struct {
	Object  string `json:"object"`
	Choices []struct {
		Message struct {
			Content string `json:"content"`
		} `json:"message"`
	} `json:"choices"`
	Usage *struct {
		TotalTokens int `json:"total_tokens"`
	} `json:"usage"`
}

// Chat is an Op: one non-streaming completion, valid when the status is 200
// and the body is a chat.completion with content and usage.
func (c *Client) Chat(ctx context.Context, start time.Time, res *Result) {
	if c.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.Timeout)
		defer cancel()
	}
	req, err := c.newRequest(ctx, ChatBody)
	if err != nil {
		res.Fail(err)
		return
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		res.Fail(err)
		return
	}
	buf := bodyPool.Get().(*bytes.Buffer)
	buf.Reset()
	defer bodyPool.Put(buf)
	_, err = buf.ReadFrom(resp.Body)
	resp.Body.Close()
	end := time.Now()
	if err != nil {
		res.Fail(fmt.Errorf("reading answer: %w", err))
		return
	}
	if err := ValidateCompletion(resp.StatusCode, buf.Bytes()); err != nil {
		res.Fail(err)
		return
	}
	res.OK++
	res.Latency.Add(end.Sub(start))
}

// ValidateCompletion checks one non-streaming answer.
func ValidateCompletion(status int, body []byte) error {
	if status != http.StatusOK {
		return fmt.Errorf("status %d: %s", status, clip(body))
	}
	var c completion
	if err := json.Unmarshal(body, &c); err != nil {
		return fmt.Errorf("answer is not JSON: %v: %s", err, clip(body))
	}
	if c.Object != "chat.completion" || len(c.Choices) == 0 || c.Choices[0].Message.Content == "" {
		return fmt.Errorf("answer has no choices[0].message.content: %s", clip(body))
	}
	if c.Usage == nil || c.Usage.TotalTokens == 0 {
		return fmt.Errorf("answer has no usage: %s", clip(body))
	}
	return nil
}

// Stream is an Op: one streaming completion, valid when the status is 200,
// every event is JSON, the stream ends with [DONE] and it carried exactly
// c.Events events. It records time to first event and total time.
func (c *Client) Stream(ctx context.Context, start time.Time, res *Result) {
	c.stream(ctx, start, res, nil)
}

// stream runs one stream; opened, when set, is called once: with true when
// the first event has arrived, with false when the stream failed before it.
func (c *Client) stream(ctx context.Context, start time.Time, res *Result, opened func(ok bool)) {
	signal := func(ok bool) {
		if opened != nil {
			opened(ok)
			opened = nil
		}
	}
	defer signal(false)
	if c.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.Timeout)
		defer cancel()
	}
	req, err := c.newRequest(ctx, StreamBody)
	if err != nil {
		res.Fail(err)
		return
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := c.HTTP.Do(req)
	if err != nil {
		res.Fail(err)
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		res.Fail(fmt.Errorf("status %d: %s", resp.StatusCode, clip(b)))
		return
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		res.Fail(fmt.Errorf("stream answered with Content-Type %q", ct))
		return
	}
	var ttfe time.Duration
	events, done, err := ReadEvents(resp.Body, func() {
		ttfe = time.Since(start)
		signal(true)
	})
	end := time.Now()
	res.Events += int64(events)
	switch {
	case err != nil:
		res.Fail(fmt.Errorf("after %d events: %w", events, err))
	case !done:
		res.Fail(fmt.Errorf("stream ended after %d events without [DONE]", events))
	case c.Events > 0 && events != c.Events:
		res.EventMismatch++
		res.Fail(fmt.Errorf("stream carried %d events, the upstream sent %d", events, c.Events))
	default:
		res.OK++
		res.TTFE.Add(ttfe)
		res.Latency.Add(end.Sub(start))
	}
}

// ReadEvents reads a text/event-stream body to its end and returns how many
// events carried data other than [DONE] and whether [DONE] came last. Each
// event's data must be valid JSON. first is called when the first event is
// complete (its blank line read).
func ReadEvents(r io.Reader, first func()) (events int, done bool, err error) {
	br := bufio.NewReaderSize(r, 8<<10)
	var data []byte
	hasData := false
	firstSeen := false
	finish := func() error {
		if !hasData {
			return nil
		}
		hasData = false
		if !firstSeen {
			firstSeen = true
			if first != nil {
				first()
			}
		}
		if done {
			return errors.New("event after [DONE]")
		}
		if string(data) == "[DONE]" {
			done = true
			return nil
		}
		if !json.Valid(data) {
			return fmt.Errorf("event %d is not JSON: %s", events+1, clip(data))
		}
		events++
		return nil
	}
	for {
		line, rerr := br.ReadSlice('\n')
		if rerr == bufio.ErrBufferFull {
			long := append([]byte(nil), line...)
			for rerr == bufio.ErrBufferFull {
				line, rerr = br.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		trimmed := bytes.TrimRight(line, "\r\n")
		switch {
		case len(line) == 0:
		case len(trimmed) == 0:
			if err := finish(); err != nil {
				return events, done, err
			}
		case bytes.HasPrefix(trimmed, []byte("data:")):
			v := bytes.TrimPrefix(trimmed[5:], []byte(" "))
			if hasData {
				data = append(data, '\n')
			} else {
				data = data[:0]
			}
			data = append(data, v...)
			hasData = true
		}
		if rerr != nil {
			if rerr == io.EOF {
				// a last event without its blank line still counts
				return events, done, finish()
			}
			return events, done, rerr
		}
	}
}

func clip(b []byte) string {
	const n = 300
	s := strings.TrimSpace(string(b))
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
