package adapters

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

// TestCheckPublicAddr is the one address policy's table; the image
// fetcher's dial check and the task endpoint's callback check both answer
// by it (TestCheckFetchAddr, and integration's TestTaskCallbackAddressPolicy).
func TestCheckPublicAddr(t *testing.T) {
	tests := []struct {
		ip   string
		says string // "" for an address allowed
	}{
		{"8.8.8.8", ""},
		{"93.184.216.34", ""},
		{"100.128.0.1", ""},
		{"172.32.0.1", ""},
		{"2606:4700:4700::1111", ""},
		{"2a00:1450:4001::200e", ""},
		{"::ffff:8.8.8.8", ""},   // IPv4-mapped, judged as 8.8.8.8
		{"64:ff9b::808:808", ""}, // NAT64 of 8.8.8.8

		// the addresses issue 18 found passing the callback check
		{"::127.0.0.1", "IPv4-compatible"},
		{"100.64.0.1", "carrier-grade NAT"},
		{"0.0.0.1", `"this network"`},
		{"64:ff9b::7f00:1", "carries 127.0.0.1, a loopback address"},

		{"127.0.0.1", "loopback"},
		{"127.1.2.3", "loopback"},
		{"::1", "loopback"},
		{"::ffff:127.0.0.1", "loopback"},
		{"10.0.0.1", "private"},
		{"172.16.5.4", "private"},
		{"192.168.1.1", "private"},
		{"::ffff:10.1.1.1", "private"},
		{"fc00::1", "private"},
		{"fd12:3456::1", "private"},
		{"100.127.255.254", "carrier-grade NAT"},
		{"64:ff9b::a00:1", "carries 10.0.0.1, a private address"},
		{"64:ff9b::6440:1", "carries 100.64.0.1"},
		{"64:ff9b:1::808:808", "local-use NAT64"},
		{"fec0::1", "site-local"},
		{"169.254.169.254", "link-local"},
		{"::ffff:169.254.169.254", "link-local"},
		{"64:ff9b::a9fe:a9fe", "link-local"},
		{"fe80::1", "link-local"},
		{"fe80::1%eth0", "link-local"},
		{"2606:4700:4700::1111%eth0", "zone"},
		{"0.0.0.0", "unspecified"},
		{"::", "unspecified"},
		{"0.1.2.3", `"this network"`},
		{"224.0.0.1", "multicast"},
		{"239.255.255.250", "multicast"},
		{"ff02::1", "multicast"},
		{"ff0e::1", "multicast"},
		{"192.0.0.8", "IETF protocol assignments"},
		{"192.0.2.10", "documentation"},
		{"198.51.100.7", "documentation"},
		{"203.0.113.9", "documentation"},
		{"2001:db8::1", "documentation"},
		{"3fff::1", "documentation"},
		{"198.18.0.1", "benchmarking"},
		{"192.88.99.1", "6to4"},
		{"240.0.0.1", "reserved"},
		{"255.255.255.255", "broadcast"},
		{"::808:808", "IPv4-compatible"},
		{"::ffff:0:a00:1", "IPv4-translated"},
		{"2002:7f00:1::1", "6to4"},
		{"2002:808:808::1", "6to4"},
		{"2001:0:4136:e378:8000:63bf:3fff:fdd2", "Teredo"},
		{"2001:2::1", "benchmarking"},
		{"100::1", "discard-only"},
		{"4000::1", "outside 2000::/3"},
		{"1::1", "outside 2000::/3"},
	}
	for _, tt := range tests {
		err := CheckPublicAddr(netip.MustParseAddr(tt.ip))
		switch {
		case tt.says == "" && err != nil:
			t.Errorf("%s refused: %v", tt.ip, err)
		case tt.says != "" && err == nil:
			t.Errorf("%s allowed, want refused as %s", tt.ip, tt.says)
		case tt.says != "" && !strings.Contains(err.Error(), tt.says):
			t.Errorf("%s: %q does not say %q", tt.ip, err, tt.says)
		}
		var npe *NotPublicAddrError
		if err != nil && !errors.As(err, &npe) {
			t.Errorf("%s: %v is not a *NotPublicAddrError", tt.ip, err)
		}
		// the fetcher dials by the same policy
		if ferr := checkFetchAddr(netip.MustParseAddr(tt.ip)); (ferr == nil) != (err == nil) || (ferr != nil && !errors.Is(ferr, errBlockedAddress)) {
			t.Errorf("%s: the fetcher says %v, the policy %v", tt.ip, ferr, err)
		}
	}
	if err := CheckPublicAddr(netip.Addr{}); err == nil {
		t.Error("the zero Addr allowed")
	}
}
