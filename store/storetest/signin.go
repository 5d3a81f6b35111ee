package storetest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-model-gateway/gateway/store"
)

// Challenges: kept by hash and kind, dead after their expiry, taken once
// however many race for one, and a replacing one ends the user's others
// of its kind.
func testChallenges(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	u := mustUser(t, s, "ch", 0)
	c := &store.Challenge{IDHash: "h1", Kind: store.ChallengeLogin, UserID: u.ID, Data: `{"x":1}`, ExpiresAt: time.Now().Add(time.Minute)}
	if err := s.CreateChallenge(ctx, c, false); err != nil {
		t.Fatal(err)
	}
	if c.CreatedAt.IsZero() {
		t.Fatal("created at not set")
	}
	got, err := s.Challenge(ctx, store.ChallengeLogin, "h1")
	if err != nil {
		t.Fatal(err)
	}
	if got.UserID != u.ID || got.Data != c.Data || got.Kind != store.ChallengeLogin || !got.ExpiresAt.Equal(ms(c.ExpiresAt)) {
		t.Fatalf("got %+v, want %+v", *got, *c)
	}
	if _, err := s.Challenge(ctx, store.ChallengeReset, "h1"); !isNotFound(err) {
		t.Fatalf("another kind: %v, want ErrNotFound", err)
	}
	if err := s.CreateChallenge(ctx, &store.Challenge{IDHash: "h1", Kind: store.ChallengeLogin, ExpiresAt: time.Now().Add(time.Minute)}, false); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a hash twice: %v, want ErrConflict", err)
	}
	// taken once, by one of many at once
	var won atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.TakeChallenge(ctx, store.ChallengeLogin, "h1"); err == nil {
				won.Add(1)
			} else if !isNotFound(err) {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if won.Load() != 1 {
		t.Fatalf("taken %d times, want once", won.Load())
	}
	if _, err := s.Challenge(ctx, store.ChallengeLogin, "h1"); !isNotFound(err) {
		t.Fatalf("taken challenge: %v, want ErrNotFound", err)
	}
	// expired: not found, not taken
	if err := s.CreateChallenge(ctx, &store.Challenge{IDHash: "old", Kind: store.ChallengeLogin, ExpiresAt: time.Now().Add(-time.Second)}, false); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TakeChallenge(ctx, store.ChallengeLogin, "old"); !isNotFound(err) {
		t.Fatalf("expired: %v, want ErrNotFound", err)
	}
	// replace: the user's earlier reset links die
	for _, h := range []string{"r1", "r2"} {
		if err := s.CreateChallenge(ctx, &store.Challenge{IDHash: h, Kind: store.ChallengeReset, UserID: u.ID, ExpiresAt: time.Now().Add(time.Hour)}, true); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Challenge(ctx, store.ChallengeReset, "r1"); !isNotFound(err) {
		t.Fatalf("replaced link: %v, want ErrNotFound", err)
	}
	if _, err := s.Challenge(ctx, store.ChallengeReset, "r2"); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []*store.Challenge{
		{Kind: store.ChallengeLogin, ExpiresAt: time.Now().Add(time.Minute)},
		{IDHash: "no-kind", ExpiresAt: time.Now().Add(time.Minute)},
		{IDHash: "no-expiry", Kind: store.ChallengeLogin},
	} {
		if err := s.CreateChallenge(ctx, bad, false); err == nil {
			t.Errorf("stored %+v", *bad)
		}
	}
}

// ResetPassword: the link sets the password and ends every session in one
// go, and works once; an expired or unknown link changes nothing.
func testResetPassword(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	u := mustUser(t, s, "rp", 0)
	for _, h := range []string{"s1", "s2"} {
		if err := s.CreateSession(ctx, &store.Session{IDHash: h, UserID: u.ID, ExpiresAt: time.Now().Add(time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.CreateChallenge(ctx, &store.Challenge{IDHash: "link", Kind: store.ChallengeReset, UserID: u.ID, ExpiresAt: time.Now().Add(time.Hour)}, true); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ResetPassword(ctx, "nope", "new-hash"); !isNotFound(err) {
		t.Fatalf("unknown link: %v, want ErrNotFound", err)
	}
	if _, err := s.ResetPassword(ctx, "link-but-login", "x"); !isNotFound(err) {
		t.Fatal(err)
	}
	id, err := s.ResetPassword(ctx, "link", "new-hash")
	if err != nil || id != u.ID {
		t.Fatalf("reset: %d, %v", id, err)
	}
	got, _ := s.UserByID(ctx, u.ID)
	if got.PasswordHash != "new-hash" {
		t.Fatalf("password hash %q", got.PasswordHash)
	}
	for _, h := range []string{"s1", "s2"} {
		if _, err := s.SessionByHash(ctx, h); !isNotFound(err) {
			t.Fatalf("session %s after a reset: %v, want ErrNotFound", h, err)
		}
	}
	if _, err := s.ResetPassword(ctx, "link", "again"); !isNotFound(err) {
		t.Fatalf("a link used twice: %v, want ErrNotFound", err)
	}
	if err := s.CreateChallenge(ctx, &store.Challenge{IDHash: "late", Kind: store.ChallengeReset, UserID: u.ID, ExpiresAt: time.Now().Add(-time.Millisecond)}, true); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ResetPassword(ctx, "late", "late-hash"); !isNotFound(err) {
		t.Fatalf("expired link: %v, want ErrNotFound", err)
	}
	if got, _ := s.UserByID(ctx, u.ID); got.PasswordHash != "new-hash" {
		t.Fatalf("an expired link changed the password to %q", got.PasswordHash)
	}
}

// ResealTOTP: every user's secret, confirmed or not, goes through the
// function in the transaction that reseals the runtime items' secrets; an
// error from it changes neither; a secret given back unchanged is not
// counted; the confirmation and last step are kept.
func testResealTOTP(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	a, b, c := mustUser(t, s, "reseal-a", 0), mustUser(t, s, "reseal-b", 0), mustUser(t, s, "reseal-c", 0)
	for _, u := range []*store.User{a, b, c} {
		if err := s.SetTOTP(ctx, &store.TOTP{UserID: u.ID, Secret: "OLD" + u.Username}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.ConfirmTOTP(ctx, a.ID, 100, []string{"c1"}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutRuntime(ctx, &store.RuntimeItem{Kind: store.RuntimeChannel, Name: "ch", Config: `{}`, Secret: []byte("old-ch")}, false); err != nil {
		t.Fatal(err)
	}
	runtime := func(it *store.RuntimeItem) ([]byte, error) { return []byte("new-" + string(it.Secret)), nil }
	boom := errors.New("wrong key")
	if _, err := s.ResealSecrets(ctx, store.Resealers{Runtime: runtime, TOTP: func(userID int64, secret string) (string, error) {
		if userID == c.ID {
			return "", boom
		}
		return "NEW" + secret, nil
	}}); !errors.Is(err, boom) {
		t.Fatalf("reseal: %v, want the function's error", err)
	}
	secret := func(u *store.User) *store.TOTP {
		t.Helper()
		got, err := s.TOTPByUser(ctx, u.ID)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	channel := func() string {
		t.Helper()
		items, err := s.ListRuntime(ctx, store.RuntimeChannel)
		if err != nil || len(items) != 1 {
			t.Fatalf("runtime items: %+v, %v", items, err)
		}
		return string(items[0].Secret)
	}
	if secret(a).Secret != "OLDreseal-a" || secret(b).Secret != "OLDreseal-b" || channel() != "old-ch" {
		t.Fatalf("after a failed reseal: %q %q %q", secret(a).Secret, secret(b).Secret, channel())
	}
	seen := map[int64]string{}
	n, err := s.ResealSecrets(ctx, store.Resealers{Runtime: runtime, TOTP: func(userID int64, sec string) (string, error) {
		seen[userID] = sec
		if userID == b.ID {
			return sec, nil // already sealed as wanted
		}
		return "NEW" + sec, nil
	}})
	if err != nil || n != (store.ResealCounts{Runtime: 1, TOTP: 2}) || len(seen) != 3 || seen[c.ID] != "OLDreseal-c" {
		t.Fatalf("reseal: %+v, %v, saw %v; want 1 and 2 of 3", n, err, seen)
	}
	if got := secret(a); got.Secret != "NEWOLDreseal-a" || got.ConfirmedAt.IsZero() || got.LastStep != 100 {
		t.Fatalf("a after reseal: %+v", got)
	}
	if secret(b).Secret != "OLDreseal-b" || secret(c).Secret != "NEWOLDreseal-c" || channel() != "new-old-ch" {
		t.Fatalf("after reseal: %q %q %q", secret(b).Secret, secret(c).Secret, channel())
	}
}

// TOTP: enrolment replaces an unconfirmed secret but not a confirmed one;
// confirming stores the recovery codes; a step is taken once and never an
// earlier one; recovery codes are single use; deleting clears both.
func testTOTP(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	u := mustUser(t, s, "totp", 0)
	if _, err := s.TOTPByUser(ctx, u.ID); !isNotFound(err) {
		t.Fatalf("no secret: %v", err)
	}
	if err := s.UseTOTPStep(ctx, u.ID, 5); !isNotFound(err) {
		t.Fatalf("step without a secret: %v, want ErrNotFound", err)
	}
	for _, sec := range []string{"FIRST", "SECOND"} {
		if err := s.SetTOTP(ctx, &store.TOTP{UserID: u.ID, Secret: sec}); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.TOTPByUser(ctx, u.ID)
	if err != nil || got.Secret != "SECOND" || !got.ConfirmedAt.IsZero() || got.CreatedAt.IsZero() {
		t.Fatalf("got %+v, %v", got, err)
	}
	if err := s.UseTOTPStep(ctx, u.ID, 5); !isNotFound(err) {
		t.Fatalf("step of an unconfirmed secret: %v, want ErrNotFound", err)
	}
	if err := s.ConfirmTOTP(ctx, u.ID, 100, []string{"c1", "c2"}); err != nil {
		t.Fatal(err)
	}
	if err := s.ConfirmTOTP(ctx, u.ID, 101, nil); !isNotFound(err) {
		t.Fatalf("confirmed twice: %v, want ErrNotFound", err)
	}
	if err := s.SetTOTP(ctx, &store.TOTP{UserID: u.ID, Secret: "THIRD"}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a new secret over a confirmed one: %v, want ErrConflict", err)
	}
	if got, _ := s.TOTPByUser(ctx, u.ID); got.Secret != "SECOND" || got.ConfirmedAt.IsZero() || got.LastStep != 100 {
		t.Fatalf("after confirm: %+v", got)
	}
	for step, want := range map[int64]error{100: store.ErrConflict, 99: store.ErrConflict} {
		if err := s.UseTOTPStep(ctx, u.ID, step); !errors.Is(err, want) {
			t.Fatalf("step %d: %v, want %v", step, err, want)
		}
	}
	// of many at once with one step, one wins
	var won atomic.Int32
	var wg sync.WaitGroup
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if s.UseTOTPStep(ctx, u.ID, 101) == nil {
				won.Add(1)
			}
		}()
	}
	wg.Wait()
	if won.Load() != 1 {
		t.Fatalf("step 101 taken %d times, want once", won.Load())
	}
	if n, err := s.CountRecoveryCodes(ctx, u.ID); err != nil || n != 2 {
		t.Fatalf("recovery codes %d, %v", n, err)
	}
	if err := s.UseRecoveryCode(ctx, u.ID, "c1"); err != nil {
		t.Fatal(err)
	}
	if err := s.UseRecoveryCode(ctx, u.ID, "c1"); !isNotFound(err) {
		t.Fatalf("a code used twice: %v, want ErrNotFound", err)
	}
	other := mustUser(t, s, "totp-other", 0)
	if err := s.UseRecoveryCode(ctx, other.ID, "c2"); !isNotFound(err) {
		t.Fatalf("another user's code: %v, want ErrNotFound", err)
	}
	if err := s.ReplaceRecoveryCodes(ctx, u.ID, []string{"d1", "d2", "d3"}); err != nil {
		t.Fatal(err)
	}
	if err := s.UseRecoveryCode(ctx, u.ID, "c2"); !isNotFound(err) {
		t.Fatalf("a replaced code: %v, want ErrNotFound", err)
	}
	if n, _ := s.CountRecoveryCodes(ctx, u.ID); n != 3 {
		t.Fatalf("recovery codes %d, want 3", n)
	}
	if err := s.DeleteTOTP(ctx, u.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TOTPByUser(ctx, u.ID); !isNotFound(err) {
		t.Fatalf("deleted: %v", err)
	}
	if n, _ := s.CountRecoveryCodes(ctx, u.ID); n != 0 {
		t.Fatalf("recovery codes after delete: %d", n)
	}
}

// Passkeys: stored per user, found by credential id, one credential id
// once, updated on use, deleted only by their owner.
func testPasskeys(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	u := mustUser(t, s, "pk", 0)
	other := mustUser(t, s, "pk-other", 0)
	if l, err := s.ListPasskeys(ctx, u.ID); err != nil || len(l) != 0 || l == nil {
		t.Fatalf("no passkeys: %v, %v", l, err)
	}
	a := &store.Passkey{UserID: u.ID, Name: "laptop", CredentialID: "cred-a", Data: `{"n":0}`}
	b := &store.Passkey{UserID: u.ID, Name: "phone", CredentialID: "cred-b", Data: `{"n":0}`}
	for _, p := range []*store.Passkey{a, b} {
		if err := s.AddPasskey(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	if a.ID == 0 || b.ID <= a.ID || a.CreatedAt.IsZero() {
		t.Fatalf("ids %d %d", a.ID, b.ID)
	}
	if err := s.AddPasskey(ctx, &store.Passkey{UserID: other.ID, CredentialID: "cred-a", Data: "{}"}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a credential twice: %v, want ErrConflict", err)
	}
	l, err := s.ListPasskeys(ctx, u.ID)
	if err != nil || len(l) != 2 || l[0].Name != "laptop" || l[1].CredentialID != "cred-b" || !l[0].LastUsedAt.IsZero() {
		t.Fatalf("list %+v, %v", l, err)
	}
	if err := s.UsePasskey(ctx, a.ID, `{"n":1}`); err != nil {
		t.Fatal(err)
	}
	got, err := s.PasskeyByCredential(ctx, "cred-a")
	if err != nil || got.ID != a.ID || got.UserID != u.ID || got.Data != `{"n":1}` || got.LastUsedAt.IsZero() {
		t.Fatalf("by credential %+v, %v", got, err)
	}
	if _, err := s.PasskeyByCredential(ctx, "nope"); !isNotFound(err) {
		t.Fatalf("unknown credential: %v", err)
	}
	if err := s.DeletePasskey(ctx, other.ID, a.ID); !isNotFound(err) {
		t.Fatalf("another's delete: %v, want ErrNotFound", err)
	}
	if err := s.DeletePasskey(ctx, u.ID, a.ID); err != nil {
		t.Fatal(err)
	}
	if l, _ := s.ListPasskeys(ctx, u.ID); len(l) != 1 || l[0].ID != b.ID {
		t.Fatalf("after delete %+v", l)
	}
}

// SSO links: one a user, an identity linked once, a pending email link
// claimed once by the first sign-in's subject.
func testSSOLinks(t *testing.T, open Opener) {
	ctx := context.Background()
	s := open(t)
	u := mustUser(t, s, "sso-a", 0)
	v := mustUser(t, s, "sso-b", 0)
	const iss = "https://idp.example"
	if _, err := s.SSOLinkByUser(ctx, u.ID); !isNotFound(err) {
		t.Fatal(err)
	}
	if err := s.LinkSSO(ctx, &store.SSOLink{UserID: u.ID, Issuer: iss, Subject: "sub-a"}); err != nil {
		t.Fatal(err)
	}
	if err := s.LinkSSO(ctx, &store.SSOLink{UserID: v.ID, Issuer: iss, Subject: "sub-a"}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("one subject for two users: %v, want ErrConflict", err)
	}
	if err := s.LinkSSO(ctx, &store.SSOLink{UserID: v.ID, Issuer: "https://other.example", Subject: "sub-a"}); err != nil {
		t.Fatalf("the same subject at another issuer: %v", err)
	}
	l, err := s.SSOLinkBySubject(ctx, iss, "sub-a")
	if err != nil || l.UserID != u.ID || l.CreatedAt.IsZero() {
		t.Fatalf("by subject %+v, %v", l, err)
	}
	// relinking v by email replaces its link
	if err := s.LinkSSO(ctx, &store.SSOLink{UserID: v.ID, Issuer: iss, Email: "b@corp.example"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SSOLinkBySubject(ctx, "https://other.example", "sub-a"); !isNotFound(err) {
		t.Fatalf("replaced link: %v", err)
	}
	if err := s.LinkSSO(ctx, &store.SSOLink{UserID: u.ID, Issuer: iss, Email: "b@corp.example"}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("one pending email for two users: %v, want ErrConflict", err)
	}
	if _, err := s.SSOLinkByUser(ctx, u.ID); err != nil {
		t.Fatalf("a refused relink lost the old link: %v", err)
	}
	if _, err := s.ClaimSSOLink(ctx, iss, "nobody@corp.example", "sub-x"); !isNotFound(err) {
		t.Fatalf("claim without a link: %v", err)
	}
	c, err := s.ClaimSSOLink(ctx, iss, "b@corp.example", "sub-b")
	if err != nil || c.UserID != v.ID || c.Subject != "sub-b" {
		t.Fatalf("claim %+v, %v", c, err)
	}
	if _, err := s.ClaimSSOLink(ctx, iss, "b@corp.example", "sub-c"); !isNotFound(err) {
		t.Fatalf("claimed twice: %v", err)
	}
	if l, err := s.SSOLinkBySubject(ctx, iss, "sub-b"); err != nil || l.UserID != v.ID || l.Email != "b@corp.example" {
		t.Fatalf("after claim %+v, %v", l, err)
	}
	if err := s.UnlinkSSO(ctx, v.ID); err != nil {
		t.Fatal(err)
	}
	if err := s.UnlinkSSO(ctx, v.ID); !isNotFound(err) {
		t.Fatalf("unlinked twice: %v", err)
	}
	if _, err := s.SSOLinkBySubject(ctx, iss, "sub-b"); !isNotFound(err) {
		t.Fatalf("unlinked: %v", err)
	}
}
