package adapters

import "testing"

func TestSignatureTags(t *testing.T) {
	if got := TagSignature("gemini", "CiQBabc="); got != "gemini:CiQBabc=" {
		t.Fatalf("tag: %q", got)
	}
	if got := TagSignature("anthropic", "gemini:CiQB"); got != "gemini:CiQB" {
		t.Fatalf("a tagged signature was tagged again: %q", got)
	}
	if got := TagSignature("anthropic", ""); got != "" {
		t.Fatalf("empty: %q", got)
	}
	if s, ok := UntagSignature("gemini", "gemini:CiQB"); !ok || s != "CiQB" {
		t.Fatalf("untag: %q %v", s, ok)
	}
	for _, sig := range []string{"anthropic:Eq", "CiQB", "", ":x", "Gemini:x"} {
		if _, ok := UntagSignature("gemini", sig); ok {
			t.Errorf("%q untagged as gemini", sig)
		}
	}
	if v := SignatureVendor("EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"); v != "" {
		t.Fatalf("a base64 signature has vendor %q", v)
	}
}
