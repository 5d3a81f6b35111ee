package account_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/account"
	"github.com/caddy-model-gateway/gateway/keys"
	"github.com/caddy-model-gateway/gateway/store"
	_ "github.com/caddy-model-gateway/gateway/store/sqlite"
)

func openStore(t *testing.T) store.Store {
	t.Helper()
	st, err := store.Open("sqlite", filepath.Join(t.TempDir(), "gateway.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func mustCreate(t *testing.T, st store.Store, name, role string, quota int64) *store.User {
	t.Helper()
	u, err := account.CreateUser(context.Background(), st, account.Operator,
		account.NewUser{Username: name, Password: "password-" + name, Role: role, Quota: quota})
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	return u
}

// code is err's Refusal code, or its InputError code, or "".
func code(err error) string {
	var (
		ref *account.Refusal
		ie  *account.InputError
	)
	switch {
	case errors.As(err, &ref):
		return ref.Code
	case errors.As(err, &ie):
		if ie.Code == "" {
			return "invalid_request"
		}
		return ie.Code
	}
	return ""
}

func ptr[T any](v T) *T { return &v }

// TestRolesWhoMayDoWhat: administrators manage users; only root makes or
// manages administrators; nobody changes their own role or status; root
// cannot be granted on the web, only by the operator.
func TestRolesWhoMayDoWhat(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	root := mustCreate(t, st, "root", store.RoleRoot, 0)
	admin := mustCreate(t, st, "boss", store.RoleAdmin, 0)
	peer := mustCreate(t, st, "peer", store.RoleAdmin, 0)
	user := mustCreate(t, st, "worker", store.RoleUser, 0)

	create := func(actor *store.User, role string) error {
		_, err := account.CreateUser(ctx, st, actor, account.NewUser{Username: "n" + role + actor.Username, Password: "long-enough", Role: role})
		return err
	}
	for _, c := range []struct {
		name  string
		err   error
		code  string
		isNil bool
	}{
		{"admin makes a user", create(admin, store.RoleUser), "", true},
		{"admin makes an admin", create(admin, store.RoleAdmin), "role_not_allowed", false},
		{"root makes root", create(root, store.RoleRoot), "role_not_allowed", false},
		{"root makes an admin", create(root, store.RoleAdmin), "", true},
		{"operator makes root", create(account.Operator, store.RoleRoot), "", true},
		{"admin disables a peer admin", upd(st, admin, peer.ID, account.UserChange{Status: ptr(store.UserDisabled)}), "not_allowed", false},
		{"admin disables themself", upd(st, admin, admin.ID, account.UserChange{Status: ptr(store.UserDisabled)}), "not_allowed", false},
		{"admin credits root", upd(st, admin, root.ID, account.UserChange{QuotaDelta: ptr[int64](5)}), "not_allowed", false},
		{"root credits themself", upd(st, root, root.ID, account.UserChange{QuotaDelta: ptr[int64](5)}), "", true},
		{"admin credits themself", upd(st, admin, admin.ID, account.UserChange{QuotaDelta: ptr[int64](5)}), "not_allowed", false},
		{"admin debits themself", upd(st, admin, admin.ID, account.UserChange{QuotaDelta: ptr[int64](-1)}), "not_allowed", false},
		{"admin promotes a user", upd(st, admin, user.ID, account.UserChange{Role: ptr(store.RoleAdmin)}), "role_not_allowed", false},
		{"admin sets a bad status", upd(st, admin, user.ID, account.UserChange{Status: ptr("sleeping")}), "invalid_status", false},
		{"admin sets negative limits", upd(st, admin, user.ID, account.UserChange{Limits: &account.LimitsChange{RPM: ptr[int64](-1)}}), "invalid_limits", false},
		{"admin debits below zero", upd(st, admin, user.ID, account.UserChange{QuotaDelta: ptr[int64](-1)}), "invalid_quota", false},
		{"admin credits a user", upd(st, admin, user.ID, account.UserChange{QuotaDelta: ptr[int64](5)}), "", true},
		{"operator sets root's limits", upd(st, account.Operator, root.ID, account.UserChange{Limits: &account.LimitsChange{RPM: ptr[int64](3)}}), "", true},
	} {
		if c.isNil != (c.err == nil) || code(c.err) != c.code {
			t.Errorf("%s: %v (code %q), want code %q", c.name, c.err, code(c.err), c.code)
		}
	}
	if _, err := account.UpdateUser(ctx, st, admin, 99999, account.UserChange{}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("missing user: %v", err)
	}
	// key limits: only root sets an administrator's
	_, adminKey, err := account.CreateToken(ctx, st, admin.ID, account.TokenSpec{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := account.SetKeyLimits(ctx, st, peer, adminKey.ID, account.LimitsChange{RPM: ptr[int64](1)}); code(err) != "not_allowed" {
		t.Fatalf("an admin set another admin's key limits: %v", err)
	}
	got, err := account.SetKeyLimits(ctx, st, root, adminKey.ID, account.LimitsChange{RPM: ptr[int64](1)})
	if err != nil || got.Limits.RPM != 1 {
		t.Fatalf("root's key limits: %+v, %v", got, err)
	}
}

func upd(st store.Store, actor *store.User, id int64, c account.UserChange) error {
	_, err := account.UpdateUser(context.Background(), st, actor, id, c)
	return err
}

// TestUpdateUserEndsSessions: disabling a user or changing their role
// logs them out; a credit, or a role set to what it was, does not.
func TestUpdateUserEndsSessions(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	root := mustCreate(t, st, "root", store.RoleRoot, 0)
	user := mustCreate(t, st, "worker", store.RoleUser, 0)
	sessions := account.Sessions{Store: st}
	live := func() bool {
		id, err := sessions.Start(ctx, user.ID)
		if err != nil {
			t.Fatal(err)
		}
		return func() bool { _, _, err := sessions.User(ctx, id); return err == nil }()
	}
	for _, c := range []struct {
		name   string
		change account.UserChange
		ends   bool
	}{
		{"credit", account.UserChange{QuotaDelta: ptr[int64](10)}, false},
		{"same role", account.UserChange{Role: ptr(store.RoleUser)}, false},
		{"limits", account.UserChange{Limits: &account.LimitsChange{TPM: ptr[int64](9)}}, false},
		{"new role", account.UserChange{Role: ptr(store.RoleAdmin)}, true},
		{"disabled", account.UserChange{Status: ptr(store.UserDisabled)}, true},
		{"enabled", account.UserChange{Status: ptr(store.UserEnabled)}, false},
	} {
		id, err := sessions.Start(ctx, user.ID)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := account.UpdateUser(ctx, st, root, user.ID, c.change); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		_, _, err = sessions.User(ctx, id)
		if ended := errors.Is(err, account.ErrSessionExpired); ended != c.ends {
			t.Errorf("%s: session ended = %v (%v), want %v", c.name, ended, err, c.ends)
		}
	}
	if !live() {
		t.Fatal("a new session of the re-enabled user is refused")
	}
	u, err := st.UserByID(ctx, user.ID)
	if err != nil || u.Quota != 10 || u.Limits.TPM != 9 || u.Role != store.RoleAdmin {
		t.Fatalf("after the changes: %+v, %v", u, err)
	}
}

// TestSessionsSlideAndEnd: a session past a quarter of its life slides
// forward; a password change ends every session but the one that asked.
func TestSessionsSlideAndEnd(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	u := mustCreate(t, st, "pat", store.RoleUser, 0)
	sessions := account.Sessions{Store: st, Lifetime: time.Hour}
	fresh, err := sessions.Start(ctx, u.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, slid, err := sessions.User(ctx, fresh); err != nil || !slid.IsZero() {
		t.Fatalf("a fresh session: slid %v, %v", slid, err)
	}
	old := "an-old-session-id"
	if err := st.CreateSession(ctx, &store.Session{IDHash: keys.Hash(old), UserID: u.ID, ExpiresAt: time.Now().Add(30 * time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if _, slid, err := sessions.User(ctx, old); err != nil || slid.IsZero() {
		t.Fatalf("a half-spent session: slid %v, %v", slid, err)
	}
	if err := account.ChangePassword(ctx, st, u, "wrong", "new-password", fresh); code(err) != "invalid_request" {
		t.Fatalf("a wrong current password: %v", err)
	}
	if err := account.ChangePassword(ctx, st, u, "password-pat", "new-password", fresh); err != nil {
		t.Fatal(err)
	}
	if _, _, err := sessions.User(ctx, fresh); err != nil {
		t.Fatalf("the session that changed the password ended: %v", err)
	}
	if _, _, err := sessions.User(ctx, old); !errors.Is(err, account.ErrSessionExpired) {
		t.Fatalf("another session outlived the password: %v", err)
	}
	if err := sessions.EndAll(ctx, u.ID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := sessions.User(ctx, fresh); !errors.Is(err, account.ErrSessionExpired) {
		t.Fatalf("a session outlived EndAll: %v", err)
	}
	if _, err := account.NewGate(st, account.GateConfig{}).LogIn(ctx, "10.0.0.1", "pat", "new-password"); err != nil {
		t.Fatalf("the new password: %v", err)
	}
}

// TestGateLogin: an address is refused on its own failures only, and the
// right password from an address that has not failed always gets in.
func TestGateLogin(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	mustCreate(t, st, "pat", store.RoleUser, 0)
	g := account.NewGate(st, account.GateConfig{Attempts: 2, Window: time.Minute})
	for range 2 {
		if _, err := g.LogIn(ctx, "10.0.0.1", "pat", "guess"); !errors.Is(err, account.ErrBadCredentials) {
			t.Fatalf("a wrong guess: %v", err)
		}
	}
	if _, err := g.LogIn(ctx, "10.0.0.1", "pat", "password-pat"); code(err) != "rate_limited" {
		t.Fatalf("a third attempt from the failing address: %v", err)
	}
	var ref *account.Refusal
	if _, err := g.LogIn(ctx, "10.0.0.1", "pat", "password-pat"); !errors.As(err, &ref) || ref.RetryAfter <= 0 {
		t.Fatalf("a refusal without a wait: %v", err)
	}
	for range 3 {
		if _, err := g.LogIn(ctx, "10.0.0.2", "pat", "password-pat"); err != nil {
			t.Fatalf("the right password from another address: %v", err)
		}
	}
	// with the name's failures over the limit (from 10.0.0.1), one typo
	// from a clean address does not refuse its next, right password
	if _, err := g.LogIn(ctx, "10.0.0.4", "pat", "typo"); !errors.Is(err, account.ErrBadCredentials) {
		t.Fatalf("a typo: %v", err)
	}
	if _, err := g.LogIn(ctx, "10.0.0.4", "pat", "password-pat"); err != nil {
		t.Fatalf("the right password after one typo from a clean address: %v", err)
	}
	// but a second failure from an address while the name is under attack
	// refuses it for the window: a spread-out guesser gets two guesses an
	// address
	for _, guess := range []string{"guess-1", "guess-2"} {
		if _, err := g.LogIn(ctx, "10.0.0.5", "pat", guess); !errors.Is(err, account.ErrBadCredentials) {
			t.Fatalf("a guess from a new address: %v", err)
		}
	}
	if _, err := g.LogIn(ctx, "10.0.0.5", "pat", "password-pat"); code(err) != "rate_limited" {
		t.Fatalf("a third attempt from an address that failed twice at a name under attack: %v", err)
	}
	if _, err := g.LogIn(ctx, "10.0.0.3", "no such\tname", "x"); code(err) != "invalid_request" {
		t.Fatalf("an impossible name: %v", err)
	}
	if n := account.ClientNetwork("2001:db8::1"); n != "2001:db8::/64" {
		t.Fatalf("an IPv6 client counts as %q", n)
	}
	if n := account.ClientNetwork("::ffff:10.0.0.1"); n != "10.0.0.1" {
		t.Fatalf("a mapped IPv4 client counts as %q", n)
	}
}

// TestGateRegister: registration is refused when closed; signups per
// network are limited, and a refused signup is given back.
func TestGateRegister(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	inviter := mustCreate(t, st, "inviter", store.RoleUser, 0)
	closed := account.NewGate(st, account.GateConfig{})
	if _, err := closed.Register(ctx, "10.0.0.1", "new", "long-enough", ""); code(err) != "registration_closed" {
		t.Fatalf("closed registration: %v", err)
	}
	g := account.NewGate(st, account.GateConfig{Registration: true, Signups: 1, SignupWindow: time.Hour, InvitationReward: 7})
	if _, err := g.Register(ctx, "10.0.0.1", "inviter", "long-enough", ""); code(err) != "invalid_request" {
		t.Fatalf("a taken name: %v", err)
	}
	if _, err := g.Register(ctx, "10.0.0.1", "new", "long-enough", "nonsense"); code(err) != "invalid_request" {
		t.Fatalf("a wrong invitation code: %v", err)
	}
	u, err := g.Register(ctx, "10.0.0.1", "new", "long-enough", " "+inviter.InviteCode+" ")
	if err != nil || u.InvitedBy != inviter.ID {
		t.Fatalf("a signup after refused ones: %+v, %v", u, err)
	}
	if _, err := g.Register(ctx, "10.0.0.1", "newer", "long-enough", ""); code(err) != "rate_limited" {
		t.Fatalf("a second signup from one network: %v", err)
	}
	// the invitation's reward is paid by the invitee's first payment of at
	// least the reward
	if _, err := account.UpdateUser(ctx, st, account.Operator, u.ID, account.UserChange{QuotaDelta: ptr[int64](6)}); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.UserByID(ctx, inviter.ID); got.InvitationQuota != 0 {
		t.Fatalf("the inviter has %d after a payment smaller than the reward, want 0", got.InvitationQuota)
	}
	if _, err := account.UpdateUser(ctx, st, account.Operator, u.ID, account.UserChange{QuotaDelta: ptr[int64](7)}); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.UserByID(ctx, inviter.ID); got.InvitationQuota != 7 {
		t.Fatalf("the inviter has %d after the invitee's first payment, want 7", got.InvitationQuota)
	}
}

// TestPlaygroundTokenMadeOnce: concurrent first uses make one token.
func TestPlaygroundTokenMadeOnce(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	u := mustCreate(t, st, "pia", store.RoleUser, 0)
	var wg sync.WaitGroup
	ids := make([]int64, 8)
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if tok, err := account.PlaygroundToken(ctx, st, u.ID); err == nil {
				ids[i] = tok.ID
			}
		}()
	}
	wg.Wait()
	for _, id := range ids {
		if id == 0 || id != ids[0] {
			t.Fatalf("playground tokens %v, want one", ids)
		}
	}
	tokens, _ := st.ListTokens(ctx, u.ID)
	if len(tokens) != 1 || tokens[0].Name != account.PlaygroundTokenName {
		t.Fatalf("tokens %+v", tokens)
	}
}
