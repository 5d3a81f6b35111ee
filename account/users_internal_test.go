package account

import (
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"
)

// TestDummyHash: the hash an unknown name's login is compared against is a
// valid bcrypt hash at the cost HashPassword uses, so that the login takes
// as long as a wrong password's; the one written out is at the default
// cost.
func TestDummyHash(t *testing.T) {
	if cost, err := bcrypt.Cost(dummyHash); err != nil || cost != bcrypt.DefaultCost {
		t.Fatalf("dummyHash: cost %d, %v; want a bcrypt hash at %d", cost, err, bcrypt.DefaultCost)
	}
	if bcrypt.CompareHashAndPassword(dummyHash, []byte("no such user")) != nil {
		t.Fatal("dummyHash is not the hash of its password")
	}
	cost, err := bcrypt.Cost(unknownUserHash())
	if err != nil {
		t.Fatalf("unknownUserHash is no bcrypt hash: %v", err)
	}
	real, err := HashPassword("long-enough")
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := bcrypt.Cost([]byte(real)); cost != want {
		t.Fatalf("unknownUserHash costs %d, HashPassword's hashes %d", cost, want)
	}
}

func TestPasswordCostFrom(t *testing.T) {
	for v, want := range map[string]int{"": bcrypt.DefaultCost, "4": 4, "12": 12, "31": 31} {
		if got, err := passwordCostFrom(v); err != nil || got != want {
			t.Errorf("%q: %d, %v; want %d", v, got, err, want)
		}
	}
	for _, v := range []string{"3", "32", "ten", "-1", " 4"} {
		_, err := passwordCostFrom(v)
		if err == nil || !strings.Contains(err.Error(), PasswordCostEnv) {
			t.Errorf("%q: %v, want an error naming %s", v, err, PasswordCostEnv)
		}
	}
}
