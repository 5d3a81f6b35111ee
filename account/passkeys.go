package account

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-webauthn/webauthn/protocol"
	"github.com/go-webauthn/webauthn/webauthn"

	"github.com/caddy-model-gateway/gateway/keys"
	"github.com/caddy-model-gateway/gateway/store"
)

// Passkeys (WebAuthn): a user registers an authenticator; a password
// login of a user with one may finish with it instead of a code, and a
// passkey alone signs its user in. Each ceremony's state (its challenge)
// is a store challenge, so any instance on the database can finish what
// another began; the credential's public key and sign count are kept.

// passkeyCeremonyLifetime bounds the time between a ceremony's options
// and its answer: the browser's own timeout is a few minutes.
const passkeyCeremonyLifetime = 5 * time.Minute

// maxPasskeys a user may register: each one is read at every login.
const maxPasskeys = 20

// RelyingParty is the gateway as the browser reached it: the passkey's
// scope is ID (the host, without a port), its answers come from Origin.
type RelyingParty struct {
	ID     string
	Origin string
	Name   string
}

func (rp RelyingParty) webauthn() (*webauthn.WebAuthn, error) {
	w, err := webauthn.New(&webauthn.Config{RPID: rp.ID, RPDisplayName: rp.Name, RPOrigins: []string{rp.Origin}})
	if err != nil {
		return nil, fmt.Errorf("passkeys for %s: %w", rp.Origin, err)
	}
	return w, nil
}

// passkeyUser is a user as the WebAuthn library sees them.
type passkeyUser struct {
	u     *store.User
	keys  []store.Passkey
	creds []webauthn.Credential
}

func (p *passkeyUser) WebAuthnID() []byte                         { return userHandle(p.u.ID) }
func (p *passkeyUser) WebAuthnName() string                       { return p.u.Username }
func (p *passkeyUser) WebAuthnDisplayName() string                { return p.u.Username }
func (p *passkeyUser) WebAuthnCredentials() []webauthn.Credential { return p.creds }

// userHandle is the user's id in the authenticator: the account's number,
// which names nobody.
func userHandle(id int64) []byte { return binary.BigEndian.AppendUint64([]byte("gw"), uint64(id)) }

func loadPasskeyUser(ctx context.Context, st store.Store, u *store.User) (*passkeyUser, error) {
	pks, err := st.ListPasskeys(ctx, u.ID)
	if err != nil {
		return nil, err
	}
	pu := &passkeyUser{u: u, keys: pks}
	for _, p := range pks {
		var c webauthn.Credential
		if err := json.Unmarshal([]byte(p.Data), &c); err != nil {
			return nil, fmt.Errorf("reading passkey %d of user %d: %w", p.ID, u.ID, err)
		}
		pu.creds = append(pu.creds, c)
	}
	return pu, nil
}

func credentialID(id []byte) string { return base64.RawURLEncoding.EncodeToString(id) }

// PasskeyOptions are a ceremony's options for the browser
// (navigator.credentials.create or get) and the token to send back with
// its answer.
type PasskeyOptions struct {
	Token   string `json:"token"`
	Options any    `json:"options"`
}

// saveCeremony keeps a ceremony's state under a new token.
func saveCeremony(ctx context.Context, st store.Store, kind string, userID int64, session *webauthn.SessionData) (string, error) {
	data, err := json.Marshal(session)
	if err != nil {
		return "", err
	}
	token, err := keys.Random("", sessionIDLength)
	if err != nil {
		return "", err
	}
	err = st.CreateChallenge(ctx, &store.Challenge{IDHash: keys.Hash(token), Kind: kind, UserID: userID, Data: string(data),
		ExpiresAt: time.Now().Add(passkeyCeremonyLifetime)}, userID != 0)
	return token, err
}

// takeCeremony takes a ceremony's state back, once.
func takeCeremony(ctx context.Context, st store.Store, kind, token string) (*store.Challenge, *webauthn.SessionData, error) {
	if token == "" {
		return nil, nil, errPasskeyExpired
	}
	c, err := st.TakeChallenge(ctx, kind, keys.Hash(token))
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil, errPasskeyExpired
	}
	if err != nil {
		return nil, nil, err
	}
	var s webauthn.SessionData
	if err := json.Unmarshal([]byte(c.Data), &s); err != nil {
		return nil, nil, fmt.Errorf("reading a passkey ceremony: %w", err)
	}
	return c, &s, nil
}

var errPasskeyExpired = &InputError{Code: "passkey_expired", Msg: "the passkey request took too long or was answered already: try again"}

// ErrPasskeyRefused is one answer for an assertion that does not verify.
var ErrPasskeyRefused = errors.New("the passkey was not accepted: use a passkey registered to this account on this site")

// BeginPasskeyRegistration starts registering a passkey for u.
func BeginPasskeyRegistration(ctx context.Context, st store.Store, rp RelyingParty, u *store.User) (*PasskeyOptions, error) {
	w, err := rp.webauthn()
	if err != nil {
		return nil, err
	}
	pu, err := loadPasskeyUser(ctx, st, u)
	if err != nil {
		return nil, err
	}
	if len(pu.keys) >= maxPasskeys {
		return nil, invalidf("too_many_passkeys", "an account has at most %d passkeys: delete one first", maxPasskeys)
	}
	exclude := make([]protocol.CredentialDescriptor, len(pu.creds))
	for i := range pu.creds {
		exclude[i] = pu.creds[i].Descriptor()
	}
	creation, session, err := w.BeginRegistration(pu, webauthn.WithExclusions(exclude),
		webauthn.WithResidentKeyRequirement(protocol.ResidentKeyRequirementPreferred))
	if err != nil {
		return nil, fmt.Errorf("starting a passkey registration: %w", err)
	}
	token, err := saveCeremony(ctx, st, store.ChallengePasskeyRegister, u.ID, session)
	if err != nil {
		return nil, err
	}
	return &PasskeyOptions{Token: token, Options: creation}, nil
}

// FinishPasskeyRegistration checks the browser's answer to token's
// ceremony and stores the passkey as name.
func FinishPasskeyRegistration(ctx context.Context, st store.Store, rp RelyingParty, u *store.User, token, name string, answer []byte) (*store.Passkey, error) {
	name = strings.TrimSpace(name)
	if name == "" {
		name = "passkey"
	}
	if utf8.RuneCountInString(name) > maxTokenName {
		return nil, inputErrorf("a passkey's name must be at most %d characters", maxTokenName)
	}
	c, session, err := takeCeremony(ctx, st, store.ChallengePasskeyRegister, token)
	if err != nil {
		return nil, err
	}
	if c.UserID != u.ID {
		return nil, errPasskeyExpired
	}
	w, err := rp.webauthn()
	if err != nil {
		return nil, err
	}
	parsed, err := protocol.ParseCredentialCreationResponseBody(bytes.NewReader(answer))
	if err != nil {
		return nil, invalidf("invalid_passkey", "the browser's passkey answer could not be read: %v", err)
	}
	pu, err := loadPasskeyUser(ctx, st, u)
	if err != nil {
		return nil, err
	}
	cred, err := w.CreateCredential(pu, *session, parsed)
	if err != nil {
		return nil, invalidf("invalid_passkey", "the passkey was not accepted: %v", err)
	}
	data, err := json.Marshal(cred)
	if err != nil {
		return nil, err
	}
	p := &store.Passkey{UserID: u.ID, Name: name, CredentialID: credentialID(cred.ID), Data: string(data)}
	if err := st.AddPasskey(ctx, p); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return nil, invalidf("passkey_registered", "this passkey is registered already")
		}
		return nil, err
	}
	if err := Audit(ctx, st, u, AuditPasskeyAdd, UserTarget(u.ID), nil, Fields{"passkey": p.Name, "passkey_id": p.ID}); err != nil {
		return nil, err
	}
	return p, nil
}

// DeletePasskey deletes u's passkey id, audited.
func DeletePasskey(ctx context.Context, st store.Store, u *store.User, id int64) error {
	if err := st.DeletePasskey(ctx, u.ID, id); err != nil {
		return err
	}
	return Audit(ctx, st, u, AuditPasskeyDelete, UserTarget(u.ID), Fields{"passkey_id": id}, nil)
}

// PasskeySecondStepOptions starts the passkey check of a pending login.
func (g *Gate) PasskeySecondStepOptions(ctx context.Context, rp RelyingParty, loginToken string) (*PasskeyOptions, error) {
	u, _, err := g.PendingUser(ctx, loginToken)
	if err != nil {
		return nil, err
	}
	pu, err := loadPasskeyUser(ctx, g.store, u)
	if err != nil {
		return nil, err
	}
	if len(pu.creds) == 0 {
		return nil, invalidf("no_passkeys", "this account has no passkey: enter a code instead")
	}
	w, err := rp.webauthn()
	if err != nil {
		return nil, err
	}
	assertion, session, err := w.BeginLogin(pu)
	if err != nil {
		return nil, fmt.Errorf("starting a passkey check: %w", err)
	}
	token, err := saveCeremony(ctx, g.store, store.ChallengePasskeyLogin, u.ID, session)
	if err != nil {
		return nil, err
	}
	return &PasskeyOptions{Token: token, Options: assertion}, nil
}

// PasskeySecondStep finishes a pending login with a passkey's answer to
// the ceremony token began; attempts count as a code's do.
func (g *Gate) PasskeySecondStep(ctx context.Context, network string, rp RelyingParty, loginToken, token string, answer []byte) (*store.User, error) {
	u, _, err := g.PendingUser(ctx, loginToken)
	if err != nil {
		return nil, err
	}
	if err := g.Limit(network, "second factor", u.ID); err != nil {
		return nil, err
	}
	c, session, err := takeCeremony(ctx, g.store, store.ChallengePasskeyLogin, token)
	if err != nil {
		return nil, err
	}
	if c.UserID != u.ID {
		return nil, errPasskeyExpired
	}
	pu, err := loadPasskeyUser(ctx, g.store, u)
	if err != nil {
		return nil, err
	}
	w, err := rp.webauthn()
	if err != nil {
		return nil, err
	}
	parsed, err := protocol.ParseCredentialRequestResponseBody(bytes.NewReader(answer))
	if err != nil {
		return nil, ErrPasskeyRefused
	}
	cred, err := w.ValidateLogin(pu, *session, parsed)
	if err != nil {
		return nil, ErrPasskeyRefused
	}
	if err := g.usePasskey(ctx, cred); err != nil {
		return nil, err
	}
	return u, g.FinishPending(ctx, loginToken)
}

// PasskeySignInOptions starts a sign-in with a passkey alone.
func (g *Gate) PasskeySignInOptions(ctx context.Context, network string, rp RelyingParty) (*PasskeyOptions, error) {
	if err := g.Limit(network, "passkey", 0); err != nil {
		return nil, err
	}
	w, err := rp.webauthn()
	if err != nil {
		return nil, err
	}
	assertion, session, err := w.BeginDiscoverableLogin()
	if err != nil {
		return nil, fmt.Errorf("starting a passkey sign-in: %w", err)
	}
	token, err := saveCeremony(ctx, g.store, store.ChallengePasskeyLogin, 0, session)
	if err != nil {
		return nil, err
	}
	return &PasskeyOptions{Token: token, Options: assertion}, nil
}

// PasskeySignIn signs in the user whose passkey answered token's
// ceremony.
func (g *Gate) PasskeySignIn(ctx context.Context, network string, rp RelyingParty, token string, answer []byte) (*store.User, error) {
	if err := g.Limit(network, "passkey", 0); err != nil {
		return nil, err
	}
	c, session, err := takeCeremony(ctx, g.store, store.ChallengePasskeyLogin, token)
	if err != nil {
		return nil, err
	}
	if c.UserID != 0 {
		return nil, errPasskeyExpired
	}
	w, err := rp.webauthn()
	if err != nil {
		return nil, err
	}
	parsed, err := protocol.ParseCredentialRequestResponseBody(bytes.NewReader(answer))
	if err != nil {
		return nil, ErrPasskeyRefused
	}
	var owner *store.User
	user, cred, err := w.ValidatePasskeyLogin(func(rawID, handle []byte) (webauthn.User, error) {
		p, err := g.store.PasskeyByCredential(ctx, credentialID(rawID))
		if err != nil {
			return nil, err
		}
		if !bytes.Equal(handle, userHandle(p.UserID)) {
			return nil, errors.New("the user handle is not the passkey's owner")
		}
		if owner, err = g.store.UserByID(ctx, p.UserID); err != nil {
			return nil, err
		}
		return loadPasskeyUser(ctx, g.store, owner)
	}, *session, parsed)
	if err != nil || user == nil || owner == nil || owner.Status != store.UserEnabled {
		return nil, ErrPasskeyRefused
	}
	if err := g.usePasskey(ctx, cred); err != nil {
		return nil, err
	}
	return owner, nil
}

// usePasskey keeps the credential's new sign count, so a cloned
// authenticator shows.
func (g *Gate) usePasskey(ctx context.Context, cred *webauthn.Credential) error {
	p, err := g.store.PasskeyByCredential(ctx, credentialID(cred.ID))
	if err != nil {
		return err
	}
	data, err := json.Marshal(cred)
	if err != nil {
		return err
	}
	return g.store.UsePasskey(ctx, p.ID, string(data))
}
