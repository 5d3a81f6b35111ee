package account

import (
	"context"
	"errors"
	"fmt"
	"unicode"
	"unicode/utf8"

	"golang.org/x/crypto/bcrypt"

	"github.com/caddy-model-gateway/gateway/internal/usernames"
	"github.com/caddy-model-gateway/gateway/keys"
	"github.com/caddy-model-gateway/gateway/store"
)

// HashPassword returns the bcrypt hash the store keeps.
func HashPassword(password string) (string, error) {
	cost, err := PasswordCost()
	if err != nil {
		return "", err
	}
	b, err := bcrypt.GenerateFromPassword([]byte(password), cost)
	if err != nil {
		return "", fmt.Errorf("hashing password: %w", err)
	}
	return string(b), nil
}

// dummyHash is compared against when a user does not exist, so a login for
// an unknown name takes as long as one with a wrong password. It is
// bcrypt("no such user") at bcrypt.DefaultCost written out, not made at
// init: hashing it there cost every start of the binary (the server, each
// CLI command, `caddy version`) about 60 ms of CPU. TestDummyHash keeps it
// at bcrypt.DefaultCost; at another PasswordCost, unknownUserHash makes
// its own.
var dummyHash = []byte("$2a$10$6/LrCD/d.mOnnWWyJdmhUubENAcOPk964ZrDn.D0MurcamH2Ckske")

// ErrBadCredentials is one answer for a wrong name and a wrong password.
var ErrBadCredentials = errors.New("wrong username or password")

// checkCredentials checks a username and password. A missing user, a wrong password and
// a disabled account are all ErrBadCredentials, so a caller learns nothing
// about which names exist.
func checkCredentials(ctx context.Context, st store.Store, username, password string) (*store.User, error) {
	u, err := st.UserByName(ctx, username)
	if errors.Is(err, store.ErrNotFound) {
		_ = bcrypt.CompareHashAndPassword(unknownUserHash(), []byte(password))
		return nil, ErrBadCredentials
	}
	if err != nil {
		return nil, err
	}
	if bcrypt.CompareHashAndPassword([]byte(u.PasswordHash), []byte(password)) != nil || u.Status != store.UserEnabled {
		return nil, ErrBadCredentials
	}
	return u, nil
}

// CheckUsername refuses names people could not tell apart or type.
func CheckUsername(name string) error {
	if name == "" {
		return inputErrorf("username is required")
	}
	if utf8.RuneCountInString(name) > maxUsername {
		return inputErrorf("username must be at most %d characters", maxUsername)
	}
	for _, r := range name {
		if unicode.IsSpace(r) || !unicode.IsPrint(r) {
			return inputErrorf("username must not contain spaces or control characters")
		}
	}
	return nil
}

// CheckNewUsername is CheckUsername for a name about to be taken, which
// also may not mix alphabets whose letters pass for each other's ("rооt"
// with a Cyrillic о), so no new name is a look-alike of another. Names
// taken before this rule keep working (CheckUsername at login), and the
// store refuses a name a person would read as a taken one
// (usernames.Key: case, width and look-alike letters aside).
func CheckNewUsername(name string) error {
	if err := CheckUsername(name); err != nil {
		return err
	}
	if a, b, ok := usernames.CheckScripts(name); !ok {
		return inputErrorf("username mixes %s and %s letters, which could pass for another name: write it in one alphabet", a, b)
	}
	return nil
}

// CheckPassword refuses passwords too short to resist guessing.
func CheckPassword(password string) error {
	if len(password) < MinPassword {
		return inputErrorf("password must be at least %d characters", MinPassword)
	}
	if len(password) > maxPassword {
		return inputErrorf("password must be at most %d bytes", maxPassword)
	}
	return nil
}

// NewUser is a user as an administrator or the operator creates one.
type NewUser struct {
	Username string
	Password string
	Role     string // default user
	Quota    int64
	Limits   store.Limits
}

// CreateUser checks that actor may create n and creates the user with a
// hashed password and an invitation code of its own, in one insert. The
// role is checked first: a refusal of who may do this comes before what
// was typed.
func CreateUser(ctx context.Context, st store.Store, actor *store.User, n NewUser) (*store.User, error) {
	if n.Role == "" {
		n.Role = store.RoleUser
	}
	if err := MayGrant(actor, n.Role); err != nil {
		return nil, err
	}
	u, err := prepareUser(n.Username, n.Password)
	if err != nil {
		return nil, err
	}
	if n.Quota < 0 {
		return nil, inputErrorf("quota must not be negative")
	}
	u.Role, u.Quota, u.Limits = n.Role, n.Quota, n.Limits
	if err := st.CreateUser(ctx, u); err != nil {
		return nil, nameTaken(err, n.Username)
	}
	return u, nil
}

// register creates a user who signed up on their own. A non-empty
// inviteCode must be another user's invitation code; that user is owed
// reward, paid into their invitation quota when the new user first pays.
func register(ctx context.Context, st store.Store, username, password, inviteCode string, reward store.InvitationReward) (*store.User, error) {
	u, err := prepareUser(username, password)
	if err != nil {
		return nil, err
	}
	if inviteCode != "" {
		inviter, err := st.UserByInviteCode(ctx, inviteCode)
		if errors.Is(err, store.ErrNotFound) {
			return nil, inputErrorf("the invitation code is not valid: check it, or register without one")
		}
		if err != nil {
			return nil, err
		}
		u.InvitedBy = inviter.ID
	}
	if err := st.RegisterUser(ctx, u, reward); err != nil {
		return nil, nameTaken(err, username)
	}
	return u, nil
}

func prepareUser(username, password string) (*store.User, error) {
	if err := CheckNewUsername(username); err != nil {
		return nil, err
	}
	if err := CheckPassword(password); err != nil {
		return nil, err
	}
	hash, err := HashPassword(password)
	if err != nil {
		return nil, err
	}
	invite, err := keys.Random("", inviteCodeLen)
	if err != nil {
		return nil, err
	}
	return &store.User{Username: username, PasswordHash: hash, InviteCode: invite}, nil
}

func nameTaken(err error, name string) error {
	if errors.Is(err, store.ErrConflict) {
		return inputErrorf("the username %q is taken, or reads as a name taken (case, width and look-alike letters aside): choose another", name)
	}
	return err
}

// SetPassword checks and stores a new password and, in the same
// transaction, ends every session of the user but keepSession (the id of
// the session that made the change; "" ends them all): whoever knew the
// old password is logged out with it.
func SetPassword(ctx context.Context, st store.Store, userID int64, password, keepSession string) error {
	if err := CheckPassword(password); err != nil {
		return err
	}
	hash, err := HashPassword(password)
	if err != nil {
		return err
	}
	keep := ""
	if keepSession != "" {
		keep = keys.Hash(keepSession)
	}
	return st.UpdatePassword(ctx, userID, hash, keep)
}

// ChangePassword is a user changing their own password: the current one
// must be right, so a borrowed session cannot lock its owner out.
func ChangePassword(ctx context.Context, st store.Store, u *store.User, current, password, keepSession string) error {
	if bcrypt.CompareHashAndPassword([]byte(u.PasswordHash), []byte(current)) != nil {
		return inputErrorf("current_password is wrong")
	}
	return SetPassword(ctx, st, u.ID, password, keepSession)
}
