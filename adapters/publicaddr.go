package adapters

import (
	"fmt"
	"net/netip"
)

// NotPublicAddrError is CheckPublicAddr's refusal; its message says what
// the address is, fit for a client.
type NotPublicAddrError struct{ msg string }

func (e *NotPublicAddrError) Error() string { return e.msg }

// reservedRange is a range of addresses that is not on the public internet
// beyond what netip's predicates already cover.
type reservedRange struct {
	prefix netip.Prefix
	what   string
}

// reservedRanges4 are the IPv4 special-purpose ranges that are not globally
// reachable (IANA's registry), past private, loopback, link-local and
// multicast.
var reservedRanges4 = []reservedRange{
	{netip.MustParsePrefix("0.0.0.0/8"), `"this network"`},
	{netip.MustParsePrefix("100.64.0.0/10"), "carrier-grade NAT shared address space, a private range"},
	{netip.MustParsePrefix("192.0.0.0/24"), "IETF protocol assignments"},
	{netip.MustParsePrefix("192.0.2.0/24"), "documentation (TEST-NET-1)"},
	{netip.MustParsePrefix("192.88.99.0/24"), "deprecated 6to4 relay anycast"},
	{netip.MustParsePrefix("198.18.0.0/15"), "benchmarking"},
	{netip.MustParsePrefix("198.51.100.0/24"), "documentation (TEST-NET-2)"},
	{netip.MustParsePrefix("203.0.113.0/24"), "documentation (TEST-NET-3)"},
	{netip.MustParsePrefix("240.0.0.0/4"), "reserved, and broadcast"},
}

// reservedRanges6 are IPv6 ranges that carry an IPv4 address a resolver or
// relay may turn into a private one, or that are not globally reachable;
// everything outside 2000::/3 is refused after them.
var reservedRanges6 = []reservedRange{
	{netip.MustParsePrefix("::/96"), "deprecated IPv4-compatible"},
	{netip.MustParsePrefix("::ffff:0:0:0/96"), "IPv4-translated"},
	{netip.MustParsePrefix("64:ff9b:1::/48"), "local-use NAT64, a private range"},
	{netip.MustParsePrefix("100::/64"), "discard-only"},
	{netip.MustParsePrefix("2001::/23"), "IETF protocol assignments (Teredo, benchmarking, ORCHID)"},
	{netip.MustParsePrefix("2001:db8::/32"), "documentation"},
	{netip.MustParsePrefix("2002::/16"), "deprecated 6to4"},
	{netip.MustParsePrefix("3fff::/20"), "documentation"},
	{netip.MustParsePrefix("fec0::/10"), "deprecated site-local, a private range"},
}

var (
	// nat64 is the well-known NAT64 prefix: its last four bytes are an IPv4
	// address, judged as such.
	nat64 = netip.MustParsePrefix("64:ff9b::/96")
	// globalUnicast6 is the only IPv6 space allocated for global unicast.
	globalUnicast6 = netip.MustParsePrefix("2000::/3")
)

// CheckPublicAddr is the gateway's one address policy, for every address
// it connects to on a client's word (an image it fetches) or hands to a
// vendor to connect to (a callback URL): nil for an address on the public
// internet, otherwise a *NotPublicAddrError that says what the address
// is. Loopback, private (with CGNAT, local-use NAT64 and
// site-local), link-local, unspecified, multicast, documentation,
// benchmarking and reserved addresses are refused, and so is an address
// with a zone; an IPv4 address in IPv6 clothing (IPv4-mapped, NAT64) is
// judged as the IPv4 address it carries, and the deprecated forms that
// carry one (IPv4-compatible, IPv4-translated, 6to4, Teredo) are refused.
func CheckPublicAddr(ip netip.Addr) error {
	orig := ip
	ip = ip.Unmap()
	if nat64.Contains(ip) {
		b := ip.As16()
		ip = netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]})
	}
	refuse := func(what string) error {
		if orig != ip {
			return &NotPublicAddrError{fmt.Sprintf("%s carries %s, %s", orig, ip, what)}
		}
		return &NotPublicAddrError{fmt.Sprintf("%s is %s", ip, what)}
	}
	switch {
	case !ip.IsValid():
		return &NotPublicAddrError{"an invalid address"}
	case ip.IsLoopback():
		return refuse("a loopback address")
	case ip.IsPrivate():
		return refuse("a private address")
	case ip.IsLinkLocalUnicast():
		return refuse("a link-local address")
	case ip.IsLinkLocalMulticast():
		return refuse("a link-local multicast address")
	case ip.IsUnspecified():
		return refuse("an unspecified address")
	case ip.IsMulticast(), ip.IsInterfaceLocalMulticast():
		return refuse("a multicast address")
	case ip.Zone() != "":
		return refuse("an address with a zone, which means something only on one host")
	}
	ranges := reservedRanges4
	if ip.Is6() {
		ranges = reservedRanges6
	}
	for _, r := range ranges {
		if r.prefix.Contains(ip) {
			return refuse(fmt.Sprintf("in %s, %s", r.prefix, r.what))
		}
	}
	if ip.Is6() && !globalUnicast6.Contains(ip) {
		return refuse("outside 2000::/3, the only IPv6 space for global unicast")
	}
	return nil
}
