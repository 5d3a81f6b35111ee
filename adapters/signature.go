package adapters

import "strings"

// A thinking signature is only valid for the vendor that issued it, and a
// conversation can move between channel families. In neutral form a
// Part.Signature or StreamEvent.Signature is therefore tagged
// "<vendor>:<signature>": a dialect tags what it decodes and untags what it
// writes back to its own clients, and a provider sends an upstream only the
// signatures its vendor issued.

// TagSignature tags a vendor's own signature; a signature that already
// carries a tag (one the gateway handed out for another vendor) is kept.
func TagSignature(vendor, sig string) string {
	if sig == "" || SignatureVendor(sig) != "" {
		return sig
	}
	return vendor + ":" + sig
}

// SignatureVendor returns the tag of a tagged signature, or "".
func SignatureVendor(sig string) string {
	i := strings.IndexByte(sig, ':')
	if i <= 0 || i > 32 {
		return ""
	}
	for _, c := range sig[:i] {
		if c < 'a' || c > 'z' {
			return ""
		}
	}
	return sig[:i]
}

// UntagSignature returns the vendor's signature without its tag, and false
// when sig belongs to another vendor or is empty.
func UntagSignature(vendor, sig string) (string, bool) {
	if sig == "" || SignatureVendor(sig) != vendor {
		return "", false
	}
	return sig[len(vendor)+1:], true
}
