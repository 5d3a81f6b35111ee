// Package account holds the account operations that the CLI and the web
// API share: creating users, registering with an invitation code, issuing
// API keys and redemption codes. It checks what a person typed and turns it
// into store calls; it knows nothing of HTTP or flags, and its InputError
// messages say what to fix without naming either.
package account

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/crypto/bcrypt"

	"github.com/caddy-model-gateway/gateway/keys"
	"github.com/caddy-model-gateway/gateway/store"
)

// InputError is a refusal of what the caller asked for; its message is
// meant for the person who asked.
type InputError struct{ Msg string }

func (e *InputError) Error() string { return e.Msg }

func inputErrorf(format string, args ...any) error {
	return &InputError{Msg: fmt.Sprintf(format, args...)}
}

// Limits on what people type.
const (
	MinPassword    = 8
	maxPassword    = 72 // bcrypt ignores what follows
	maxUsername    = 64
	maxTokenName   = 64
	MaxCodesAtOnce = 10000
	inviteCodeLen  = 10
	codeLen        = 32
)

// HashPassword returns the bcrypt hash the store keeps.
func HashPassword(password string) (string, error) {
	b, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.DefaultCost)
	if err != nil {
		return "", fmt.Errorf("hashing password: %w", err)
	}
	return string(b), nil
}

// dummyHash is compared against when a user does not exist, so a login for
// an unknown name takes as long as one with a wrong password.
var dummyHash, _ = bcrypt.GenerateFromPassword([]byte("no such user"), bcrypt.DefaultCost)

// ErrBadCredentials is one answer for a wrong name and a wrong password.
var ErrBadCredentials = errors.New("wrong username or password")

// Login checks a username and password. A missing user, a wrong password and
// a disabled account are all ErrBadCredentials, so a caller learns nothing
// about which names exist.
func Login(ctx context.Context, st store.Store, username, password string) (*store.User, error) {
	u, err := st.UserByName(ctx, username)
	if errors.Is(err, store.ErrNotFound) {
		_ = bcrypt.CompareHashAndPassword(dummyHash, []byte(password))
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

// CheckRole accepts the store's roles only.
func CheckRole(role string) error {
	switch role {
	case store.RoleUser, store.RoleAdmin, store.RoleRoot:
		return nil
	}
	return inputErrorf("role must be user, admin or root, not %q", role)
}

// NewUser is a user as an administrator creates one.
type NewUser struct {
	Username string
	Password string
	Role     string // default user
	Quota    int64
}

// CreateUser checks n and creates the user with a hashed password and an
// invitation code of its own.
func CreateUser(ctx context.Context, st store.Store, n NewUser) (*store.User, error) {
	u, err := prepareUser(n.Username, n.Password)
	if err != nil {
		return nil, err
	}
	if n.Role == "" {
		n.Role = store.RoleUser
	}
	if err := CheckRole(n.Role); err != nil {
		return nil, err
	}
	if n.Quota < 0 {
		return nil, inputErrorf("quota must not be negative")
	}
	u.Role, u.Quota = n.Role, n.Quota
	if err := st.CreateUser(ctx, u); err != nil {
		return nil, nameTaken(err, n.Username)
	}
	return u, nil
}

// Register creates a user who signed up on their own. A non-empty
// inviteCode must be another user's invitation code; that user is owed
// reward, paid into their invitation quota when the new user first pays.
func Register(ctx context.Context, st store.Store, username, password, inviteCode string, reward int64) (*store.User, error) {
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
	if err := CheckUsername(username); err != nil {
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
		return inputErrorf("the username %q is taken: choose another", name)
	}
	return err
}

// SetPassword checks and stores a new password and ends every session of
// the user but keepSession (the id hash of the session that made the
// change; "" ends them all).
func SetPassword(ctx context.Context, st store.Store, userID int64, password, keepSession string) error {
	if err := CheckPassword(password); err != nil {
		return err
	}
	hash, err := HashPassword(password)
	if err != nil {
		return err
	}
	return st.UpdatePassword(ctx, userID, hash, keepSession)
}

// ChangePassword is a user changing their own password: the current one
// must be right, so a borrowed session cannot lock its owner out.
func ChangePassword(ctx context.Context, st store.Store, u *store.User, current, password, keepSession string) error {
	if bcrypt.CompareHashAndPassword([]byte(u.PasswordHash), []byte(current)) != nil {
		return inputErrorf("current_password is wrong")
	}
	return SetPassword(ctx, st, u.ID, password, keepSession)
}

// TokenSpec is what a person chooses about a new or changed API key.
type TokenSpec struct {
	Name       string
	QuotaLimit int64     // 0: only the user's quota applies
	Models     []string  // empty: every model
	ExpiresAt  time.Time // zero: never
}

func (s *TokenSpec) check() error {
	s.Name = strings.TrimSpace(s.Name)
	if s.Name == "" {
		s.Name = "default"
	}
	if utf8.RuneCountInString(s.Name) > maxTokenName {
		return inputErrorf("token name must be at most %d characters", maxTokenName)
	}
	if s.QuotaLimit < 0 {
		return inputErrorf("token quota must not be negative (0 means no limit of its own)")
	}
	var models []string
	for _, m := range s.Models {
		if m = strings.TrimSpace(m); m != "" {
			models = append(models, m)
		}
	}
	s.Models = models
	return nil
}

func checkExpiry(t time.Time) error {
	if !t.IsZero() && !t.After(time.Now()) {
		return inputErrorf("token expiry must be in the future")
	}
	return nil
}

// CreateToken issues an API key for userID and returns the key, which is
// not stored and so can be shown only this once.
func CreateToken(ctx context.Context, st store.Store, userID int64, spec TokenSpec) (string, *store.Token, error) {
	if err := spec.check(); err != nil {
		return "", nil, err
	}
	if err := checkExpiry(spec.ExpiresAt); err != nil {
		return "", nil, err
	}
	key, err := keys.Generate()
	if err != nil {
		return "", nil, err
	}
	t := &store.Token{UserID: userID, Name: spec.Name, KeyHash: keys.Hash(key), KeyPrefix: keys.DisplayPrefix(key),
		QuotaLimit: spec.QuotaLimit, Models: spec.Models, ExpiresAt: spec.ExpiresAt}
	if err := st.CreateToken(ctx, t); err != nil {
		return "", nil, err
	}
	return key, t, nil
}

// UpdateToken applies spec and status to a token userID owns;
// store.ErrNotFound when there is no such token of theirs.
func UpdateToken(ctx context.Context, st store.Store, userID, id int64, spec TokenSpec, status string) (*store.Token, error) {
	if err := spec.check(); err != nil {
		return nil, err
	}
	if status != store.TokenEnabled && status != store.TokenDisabled {
		return nil, inputErrorf("token status must be enabled or disabled, not %q", status)
	}
	t, err := st.TokenByID(ctx, id)
	if err != nil {
		return nil, err
	}
	if t.UserID != userID {
		return nil, fmt.Errorf("token %d: %w", id, store.ErrNotFound)
	}
	// an expired token can still be renamed or disabled; a new expiry must
	// be ahead
	if !spec.ExpiresAt.Equal(t.ExpiresAt) {
		if err := checkExpiry(spec.ExpiresAt); err != nil {
			return nil, err
		}
	}
	t.Name, t.QuotaLimit, t.Models, t.ExpiresAt, t.Status = spec.Name, spec.QuotaLimit, spec.Models, spec.ExpiresAt, status
	if err := st.UpdateToken(ctx, t); err != nil {
		return nil, err
	}
	return t, nil
}

// CreateCodes makes count redemption codes worth quota units each.
func CreateCodes(ctx context.Context, st store.Store, count int, quota int64, expiresAt time.Time) ([]*store.RedemptionCode, error) {
	if quota <= 0 {
		return nil, inputErrorf("quota must be a positive number of units (1,000,000 = 1 USD)")
	}
	if count <= 0 || count > MaxCodesAtOnce {
		return nil, inputErrorf("count must be between 1 and %d", MaxCodesAtOnce)
	}
	if !expiresAt.IsZero() && !expiresAt.After(time.Now()) {
		return nil, inputErrorf("expiry must be in the future")
	}
	codes := make([]*store.RedemptionCode, count)
	for i := range codes {
		code, err := keys.Random("", codeLen)
		if err != nil {
			return nil, err
		}
		codes[i] = &store.RedemptionCode{Code: code, Quota: quota, ExpiresAt: expiresAt}
	}
	if err := st.CreateRedemptionCodes(ctx, codes); err != nil {
		return nil, err
	}
	return codes, nil
}

// ErrCodeRefused is the one answer for a code that is unknown, used,
// disabled or expired: which of these it was would help a guesser.
var ErrCodeRefused = errors.New("this redemption code cannot be used: check that you typed it correctly")

// Redeem credits a code's quota to userID and returns the amount.
func Redeem(ctx context.Context, st store.Store, userID int64, code string) (int64, error) {
	code = strings.TrimSpace(code)
	if code == "" {
		return 0, inputErrorf("key is required: the redemption code to redeem")
	}
	n, err := st.Redeem(ctx, code, userID)
	if errors.Is(err, store.ErrNotFound) {
		return 0, ErrCodeRefused
	}
	return n, err
}

// Transfer moves amount units (all of it when amount is 0) of userID's
// invitation quota into their quota and returns how much moved.
func Transfer(ctx context.Context, st store.Store, userID, amount int64, all bool) (int64, error) {
	if all {
		u, err := st.UserByID(ctx, userID)
		if err != nil {
			return 0, err
		}
		if u.InvitationQuota <= 0 {
			return 0, inputErrorf("there is no invitation quota to transfer")
		}
		amount = u.InvitationQuota
	} else if amount <= 0 {
		return 0, inputErrorf("quota must be a positive number of units")
	}
	err := st.TransferInvitationQuota(ctx, userID, amount)
	if errors.Is(err, store.ErrInsufficientQuota) {
		if all {
			// spent by a concurrent transfer between the read and the move
			return 0, inputErrorf("the invitation quota changed while transferring: try again")
		}
		return 0, inputErrorf("quota %d exceeds your invitation quota", amount)
	}
	if err != nil {
		return 0, err
	}
	return amount, nil
}
