package integration

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestTaskCallbackAddressPolicy: a callback URL whose host is an address
// off the public internet is refused at submit, by the same policy the
// image fetcher dials by, on a callback-capable family that would
// otherwise hand it to the vendor: 400 in the task shape, nothing sent,
// nothing charged.
func TestTaskCallbackAddressPolicy(t *testing.T) {
	s := startFamilies(t)
	key := s.gw.AddUser("ada", 5_000_000)
	tests := []struct{ host, says string }{
		// the addresses issue 18 found passing
		{"[::127.0.0.1]", "IPv4-compatible"},
		{"100.64.0.1", "carrier-grade NAT"},
		{"0.0.0.1", `"this network"`},
		{"[64:ff9b::7f00:1]", "carries 127.0.0.1, a loopback address"},
		// and their kin
		{"[64:ff9b::a9fe:a9fe]", "carries 169.254.169.254, a link-local address"},
		{"[64:ff9b:1::a00:1]", "local-use NAT64"},
		{"[::ffff:10.0.0.1]", "private"},
		{"[fec0::1]", "site-local"},
		{"[ff02::1]", "multicast"},
		{"0.0.0.0", "unspecified"},
		{"[2002:7f00:1::1]", "6to4"},
		{"192.0.2.10", "documentation"},
		{"[2001:db8::1]", "documentation"},
		{"198.18.0.1", "benchmarking"},
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			body := fmt.Sprintf(`{"model":"viduq1","prompt":"x","metadata":{"callback_url":"https://%s/hooks/video"}}`, tt.host)
			code, a, raw := famCall(t, s.gw, http.MethodPost, "/api/generate/submit", key, body)
			if code != http.StatusBadRequest || a.Error == nil || a.Error.Type != "invalid_request_error" ||
				!strings.Contains(a.Error.Message, "'metadata.callback_url' is not on the public internet") || !strings.Contains(a.Error.Message, tt.says) {
				t.Fatalf("got %d %s, want a 400 saying %q", code, raw, tt.says)
			}
		})
	}
	if n := len(s.vidu.Jobs()); n != 0 {
		t.Fatalf("%d refused submits reached Vidu", n)
	}
	rows := s.gw.WaitUsage("ada", len(tests))
	for _, r := range rows {
		if r.Cost != 0 || r.Status != http.StatusBadRequest {
			t.Fatalf("a refused submit's row: %+v", r)
		}
	}
	if q, used := s.gw.Quota("ada"); q != 5_000_000 || used != 0 {
		t.Fatalf("refused callbacks cost: quota %d used %d", q, used)
	}
}

// TestTaskViduDuration: a duration Vidu's model does not make is refused
// by the gateway before anything is sent (viduq1 makes 5-second videos
// only), at no cost; the length it makes is taken and reserved.
func TestTaskViduDuration(t *testing.T) {
	s := startFamilies(t)
	key := s.gw.AddUser("ada", 5_000_000)
	for _, d := range []int{1, 4, 8, 10} {
		code, a, raw := famCall(t, s.gw, http.MethodPost, "/api/generate/submit", key,
			fmt.Sprintf(`{"model":"viduq1","prompt":"x","duration":%d}`, d))
		if code != http.StatusBadRequest || a.Error == nil || a.Error.Type != "invalid_request_error" ||
			!strings.Contains(a.Error.Message, fmt.Sprintf("vidu's viduq1 makes videos of 5 seconds only, not %d", d)) {
			t.Fatalf("duration %d: got %d %s, want the gateway's 400", d, code, raw)
		}
	}
	if n := len(s.vidu.Jobs()); n != 0 {
		t.Fatalf("%d refused submits reached Vidu", n)
	}
	s.gw.WaitUsage("ada", 4)
	if q, used := s.gw.Quota("ada"); q != 5_000_000 || used != 0 {
		t.Fatalf("refused durations cost: quota %d used %d", q, used)
	}
	// the length viduq1 makes is sent, and reserved: 5 s at 80000 units
	sub := submitTask(t, s.gw, key, `{"model":"viduq1","prompt":"x","duration":5}`)
	if got := submitted(t, s.vidu.Last(t), "duration"); got != "5" {
		t.Fatalf("Vidu got duration %s", got)
	}
	if q, _ := s.gw.Quota("ada"); q != 5_000_000-400_000 {
		t.Fatalf("quota after a 5-second submit %s: %d", sub.Data.TaskID, q)
	}
}
