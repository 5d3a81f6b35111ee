package sealed

import (
	"bytes"
	"errors"
	"testing"
)

func TestSealOpens(t *testing.T) {
	k, err := NewKey("  0123456789abcdef-secret\n")
	if err != nil {
		t.Fatal(err)
	}
	s, err := k.Seal([]byte("sk-vendor-key"), "channel/east")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(s, []byte("sk-vendor-key")) {
		t.Fatal("the secret is in the sealed bytes in clear")
	}
	again, _ := k.Seal([]byte("sk-vendor-key"), "channel/east")
	if bytes.Equal(s, again) {
		t.Fatal("two seals of one secret are equal: the nonce is not fresh")
	}
	if got, err := k.Open(s, "channel/east"); err != nil || string(got) != "sk-vendor-key" {
		t.Fatalf("open: %q, %v", got, err)
	}
	if _, err := k.Open(s, "channel/west"); !errors.Is(err, ErrWrongKey) {
		t.Fatalf("opened for another row: %v", err)
	}
	other, _ := NewKey("another-key-of-16+chars")
	if _, err := other.Open(s, "channel/east"); !errors.Is(err, ErrWrongKey) {
		t.Fatalf("opened with another key: %v", err)
	}
	// the same material (a file's trailing newline aside) opens it
	same, _ := NewKey("0123456789abcdef-secret")
	if _, err := same.Open(s, "channel/east"); err != nil {
		t.Fatal(err)
	}
}

func TestShortKeyRefused(t *testing.T) {
	if _, err := NewKey("short"); err == nil {
		t.Fatal("a 5-character secrets_key was accepted")
	}
}
