package tasks

import (
	"strings"
	"testing"
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
		e := CheckCallbackURL(tt.url, "")
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
