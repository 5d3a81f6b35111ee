package caddymodule

import (
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
)

func TestCheckCallbackURL(t *testing.T) {
	tests := []struct {
		url  string
		want string // "" when accepted
	}{
		{"https://hooks.example.com/video?x=1", ""},
		{"https://93.184.216.34/cb", ""},
		{"https://[2606:4700::1111]/cb", ""},
		{"HTTPS://Hooks.Example.com/cb", ""},
		{"http://hooks.example.com/cb", "must use https"},
		{"ftp://hooks.example.com/cb", "must use https"},
		{"//hooks.example.com/cb", "absolute https URL"},
		{"https:///cb", "absolute https URL"},
		{"https://localhost/cb", "localhost"},
		{"https://LOCALHOST./cb", "localhost"},
		{"https://a.b.localhost/cb", "localhost"},
		{"https://127.0.0.1/cb", "loopback"},
		{"https://10.0.0.8/cb", "private"},
		{"https://172.16.4.4/cb", "private"},
		{"https://192.168.1.1:8443/cb", "private"},
		{"https://169.254.169.254/cb", "link-local"},
		{"https://0.0.0.0/cb", "unspecified"},
		// the one address policy (adapters.CheckPublicAddr), as the image
		// fetcher dials by it
		{"https://[::127.0.0.1]/cb", "IPv4-compatible"},
		{"https://100.64.0.1/cb", "carrier-grade NAT"},
		{"https://0.0.0.1/cb", `"this network"`},
		{"https://[64:ff9b::7f00:1]/cb", "carries 127.0.0.1, a loopback address"},
		{"https://[64:ff9b::808:808]/cb", ""},
		{"https://203.0.113.5/cb", "documentation"},
		{"https://[::1]/cb", "loopback"},
		{"https://[fe80::1%25eth0]/cb", "link-local"},
		{"https://[fd00::1]/cb", "private"},
		{"https://[::ffff:10.0.0.1]/cb", "private"},
		{"https://[::ffff:169.254.0.1]/cb", "link-local"},
		{"https://2130706433/cb", "neither a name nor an IP"},
		{"https://0x7f.0.0.1/cb", "neither a name nor an IP"},
		{"https://127.1/cb", "neither a name nor an IP"},
	}
	for _, tt := range tests {
		e := checkCallbackURL(tt.url, "")
		switch {
		case tt.want == "" && e != nil:
			t.Errorf("%s refused: %s", tt.url, e.Message)
		case tt.want != "" && (e == nil || !strings.Contains(e.Message, tt.want)):
			t.Errorf("%s: got %v, want a refusal saying %q", tt.url, e, tt.want)
		case e != nil && e.Status != 400:
			t.Errorf("%s: status %d", tt.url, e.Status)
		}
	}
}

func TestParseTaskSubmissionForms(t *testing.T) {
	a, e := parseTaskSubmission([]byte(`{"model":"m","prompt":"p","duration":6,"seed":-3,"image":"https://x/y.png",
		"aspect_ratio":"16:9","size":"720p","negative_prompt":"n","metadata":{"callback_url":"https://h.example/cb","mode":"pro","n":{"x":[1,2]}}}`))
	if e != nil {
		t.Fatal(e)
	}
	b, e := parseTaskSubmission([]byte(`{"model":"m","input":{"prompt":"p","duration":6,"seed":-3,"image":"https://x/y.png",
		"aspect_ratio":"16:9","size":"720p","negative_prompt":"n","metadata":{"callback_url":"https://h.example/cb","mode":"pro","n":{"x":[1,2]}}}}`))
	if e != nil {
		t.Fatal(e)
	}
	for _, s := range []*taskSubmission{a, b} {
		r := s.req
		if r.Model != "m" || r.Prompt != "p" || r.Duration != 6 || r.Seed == nil || *r.Seed != -3 || r.Image != "https://x/y.png" ||
			r.AspectRatio != "16:9" || r.Size != "720p" || r.NegativePrompt != "n" || r.CallbackURL != "https://h.example/cb" ||
			string(r.Metadata) != `{"mode":"pro","n":{"x":[1,2]}}` || strings.Join(s.metaKeys, ",") != "mode,n" {
			t.Fatalf("form %s decoded to %+v (metadata %s)", s.form, r, r.Metadata)
		}
	}
	if a.form != "A" || b.form != "B" {
		t.Fatalf("forms %s %s", a.form, b.form)
	}
	// no metadata and null fields decode to nothing
	c, e := parseTaskSubmission([]byte(`{"model":"m","prompt":"p","seed":null,"metadata":null}`))
	if e != nil || c.req.Seed != nil || c.req.Metadata != nil || c.req.CallbackURL != "" {
		t.Fatalf("nulls: %+v %v", c, e)
	}
}

func TestPriceConfigTaskPrices(t *testing.T) {
	p, err := (&PriceConfig{Task: "0.05", VideoSecond: "0.10", MaxSeconds: 12}).price()
	if err != nil || p.Task != 50_000 || p.VideoSecond != 100_000 || p.MaxSeconds != 12 {
		t.Fatalf("price %+v, %v", p, err)
	}
	if _, err := (&PriceConfig{VideoSecond: "0.10"}).price(); err == nil || !strings.Contains(err.Error(), "needs max_seconds") {
		t.Fatalf("video_second without max_seconds: %v", err)
	}
	if _, err := (&PriceConfig{Task: "-1"}).price(); err == nil {
		t.Fatal("a negative task price was accepted")
	}
}

func TestTaskBackoff(t *testing.T) {
	p := &taskPoller{cfg: &TasksConfig{PollInterval: caddy.Duration(time.Second), MaxPollInterval: caddy.Duration(4 * time.Second)}}
	want := []time.Duration{time.Second, 1500 * time.Millisecond, 2250 * time.Millisecond, 3375 * time.Millisecond, 4 * time.Second, 4 * time.Second}
	for i, w := range want {
		if got := p.backoff(i + 1); got != w {
			t.Errorf("poll %d waits %s, want %s", i+1, got, w)
		}
	}
	if id := newTaskID(); len(id) != len("task_")+26 || id == newTaskID() {
		t.Fatalf("task ids %q", id)
	}
}

// TestTaskDirectiveOrder: outside a route block the task handler sits
// after authentication and before the relay, which answers every path.
func TestTaskDirectiveOrder(t *testing.T) {
	src := "{\n\tgateway\n}\n:8080 {\n\tgateway_relay\n\tgateway_tasks\n\tgateway_auth\n}\n"
	out, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(src), nil)
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	auth, tasks, relay := strings.Index(s, `"gateway_auth"`), strings.Index(s, `"gateway_tasks"`), strings.Index(s, `"gateway_relay"`)
	if auth < 0 || !(auth < tasks && tasks < relay) {
		t.Fatalf("handlers in the wrong order: %s", out)
	}
}
