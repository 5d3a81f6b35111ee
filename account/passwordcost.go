package account

import (
	"fmt"
	"os"
	"strconv"
	"sync"

	"golang.org/x/crypto/bcrypt"
)

// PasswordCostEnv names the environment variable that sets the bcrypt cost
// of the password hashes this process makes (bcrypt.DefaultCost, 10, when
// unset). It is there for test suites, as Devise's stretches and Django's
// test hashers are: a suite that starts hundreds of gateways, each hashing
// its root user's password, and logs people in spent some 8 % of its busy
// CPU in bcrypt at cost 10. Below 10 a password is that much cheaper to
// guess from a stolen database: the gateway says so at start (LowCostWarning).
// A hash keeps the cost it was made with, so a login checks it at that cost.
const PasswordCostEnv = "GATEWAY_PASSWORD_COST"

// PasswordCost is the cost HashPassword hashes at, or an error naming the
// variable when it is set to anything but a bcrypt cost.
var PasswordCost = sync.OnceValues(func() (int, error) { return passwordCostFrom(os.Getenv(PasswordCostEnv)) })

func passwordCostFrom(v string) (int, error) {
	if v == "" {
		return bcrypt.DefaultCost, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < bcrypt.MinCost || n > bcrypt.MaxCost {
		return 0, fmt.Errorf("%s=%q: want a bcrypt cost from %d to %d (unset: %d)", PasswordCostEnv, v, bcrypt.MinCost, bcrypt.MaxCost, bcrypt.DefaultCost)
	}
	return n, nil
}

// LowCostWarning is what the gateway logs at start when passwords are
// hashed below bcrypt's default cost, or "".
func LowCostWarning() string {
	if n, err := PasswordCost(); err == nil && n < bcrypt.DefaultCost {
		return fmt.Sprintf("passwords are hashed at bcrypt cost %d, below the default %d (%s): meant for test suites, not for people's passwords", n, bcrypt.DefaultCost, PasswordCostEnv)
	}
	return ""
}

// unknownUserHash is what a login for a name no user has is compared
// against: a hash at PasswordCost, so that the login takes as long as one
// with a wrong password. At the default cost it is dummyHash, written out.
var unknownUserHash = sync.OnceValue(func() []byte {
	n, err := PasswordCost()
	if err != nil || n == bcrypt.DefaultCost {
		return dummyHash
	}
	h, err := bcrypt.GenerateFromPassword([]byte("no such user"), n)
	if err != nil {
		return dummyHash
	}
	return h
})
