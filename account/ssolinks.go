package account

import (
	"context"
	"errors"
	"strings"

	"github.com/caddy-model-gateway/gateway/store"
)

// A team moving to single sign-on keeps its accounts: an administrator
// links an account to the provider's identity (its subject, or the email
// the provider vouches for, which the first sign-in turns into the
// subject), and the next sign-in lands in that account instead of
// making one named by the email.

// LinkSSO links user id to an identity at issuer, as actor: by subject,
// or by email until the first sign-in. It replaces the user's link and
// is audited.
func LinkSSO(ctx context.Context, st store.Store, actor *store.User, id int64, issuer, subject, email string) (*store.SSOLink, error) {
	subject, email = strings.TrimSpace(subject), strings.ToLower(strings.TrimSpace(email))
	switch {
	case issuer == "":
		return nil, invalidf("sso_not_configured", "single sign-on is not configured on this gateway: configure 'sso oidc' first")
	case subject == "" && email == "":
		return nil, invalidf("invalid_request", "give the provider's subject (the sub claim) or the email it vouches for")
	case subject != "" && email != "":
		return nil, invalidf("invalid_request", "give the subject or the email, not both: an email link becomes the subject at its first sign-in")
	case email != "" && (strings.Count(email, "@") != 1 || strings.HasPrefix(email, "@") || strings.HasSuffix(email, "@")):
		return nil, invalidf("invalid_email", "%q is not an email address", email)
	case len(subject) > 255 || len(email) > 255:
		return nil, invalidf("invalid_request", "the subject or email is longer than 255 characters")
	}
	target, err := st.UserByID(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := mayResetSignIn(actor, target); err != nil {
		return nil, err
	}
	before := Fields{}
	if old, err := st.SSOLinkByUser(ctx, id); err == nil {
		before = ssoFields(old)
	} else if !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	l := &store.SSOLink{UserID: id, Issuer: issuer, Subject: subject, Email: email}
	if err := st.LinkSSO(ctx, l); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return nil, invalidf("sso_identity_linked", "that identity is linked to another account already: unlink it there first")
		}
		return nil, err
	}
	if err := Audit(ctx, st, actor, AuditSSOLink, UserTarget(id), before, ssoFields(l)); err != nil {
		return nil, err
	}
	return l, nil
}

// UnlinkSSO removes user id's link, as actor, audited.
func UnlinkSSO(ctx context.Context, st store.Store, actor *store.User, id int64) error {
	target, err := st.UserByID(ctx, id)
	if err != nil {
		return err
	}
	if err := mayResetSignIn(actor, target); err != nil {
		return err
	}
	old, err := st.SSOLinkByUser(ctx, id)
	if err != nil {
		return err
	}
	if err := st.UnlinkSSO(ctx, id); err != nil {
		return err
	}
	return Audit(ctx, st, actor, AuditSSOUnlink, UserTarget(id), ssoFields(old), nil)
}

func ssoFields(l *store.SSOLink) Fields {
	return Fields{"issuer": l.Issuer, "subject": l.Subject, "email": l.Email}
}

// LinkedUser returns the account linked to the identity signing in, or
// ErrNotFound: by subject, else the link waiting for email's first
// sign-in, which takes the subject from now on.
func LinkedUser(ctx context.Context, st store.Store, issuer, subject, email string) (*store.User, error) {
	l, err := st.SSOLinkBySubject(ctx, issuer, subject)
	if errors.Is(err, store.ErrNotFound) && email != "" {
		l, err = st.ClaimSSOLink(ctx, issuer, strings.ToLower(email), subject)
	}
	if err != nil {
		return nil, err
	}
	return st.UserByID(ctx, l.UserID)
}
