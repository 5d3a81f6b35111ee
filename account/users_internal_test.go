package account

import (
	"testing"

	"golang.org/x/crypto/bcrypt"
)

// TestDummyHash: the hash an unknown name's login is compared against is a
// valid bcrypt hash at the cost HashPassword uses, so that the login takes
// as long as a wrong password's.
func TestDummyHash(t *testing.T) {
	cost, err := bcrypt.Cost(dummyHash)
	if err != nil {
		t.Fatalf("dummyHash is no bcrypt hash: %v", err)
	}
	real, err := HashPassword("long-enough")
	if err != nil {
		t.Fatal(err)
	}
	want, _ := bcrypt.Cost([]byte(real))
	if cost != want {
		t.Fatalf("dummyHash costs %d, HashPassword's hashes %d", cost, want)
	}
	if bcrypt.CompareHashAndPassword(dummyHash, []byte("no such user")) != nil {
		t.Fatal("dummyHash is not the hash of its password")
	}
}
