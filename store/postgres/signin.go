package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/caddy-model-gateway/gateway/store"
)

// CreateChallenge implements store.SignInStore.
func (s *Store) CreateChallenge(ctx context.Context, c *store.Challenge, replace bool) error {
	ts := now()
	if err := store.PrepareChallenge(c, ts); err != nil {
		return err
	}
	return s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM signin_challenges WHERE expires_at <= $1`, ts.UnixMilli()); err != nil {
			return fmt.Errorf("create challenge: delete expired: %w", err)
		}
		if replace {
			if _, err := tx.Exec(ctx, `DELETE FROM signin_challenges WHERE user_id = $1 AND kind = $2`, c.UserID, c.Kind); err != nil {
				return fmt.Errorf("create challenge: replace the user's: %w", err)
			}
		}
		if _, err := tx.Exec(ctx, `INSERT INTO signin_challenges (`+store.ChallengeColumns+`) VALUES ($1, $2, $3, $4, $5, $6)`,
			c.IDHash, c.Kind, c.UserID, c.Data, store.Millis(c.ExpiresAt), store.Millis(c.CreatedAt)); err != nil {
			return fmt.Errorf("create %s challenge: %w", c.Kind, sqlErr(err))
		}
		return nil
	})
}

// Challenge implements store.SignInStore.
func (s *Store) Challenge(ctx context.Context, kind, idHash string) (*store.Challenge, error) {
	c, err := store.ScanChallenge(s.pool.QueryRow(ctx, `SELECT `+store.ChallengeColumns+`
		FROM signin_challenges WHERE id_hash = $1 AND kind = $2 AND expires_at > $3`, idHash, kind, now().UnixMilli()))
	if err != nil {
		// never the hash in the message: it names a live secret
		return nil, notFound(err, kind+" challenge")
	}
	return c, nil
}

// TakeChallenge implements store.SignInStore.
func (s *Store) TakeChallenge(ctx context.Context, kind, idHash string) (*store.Challenge, error) {
	var c *store.Challenge
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		c, err = takeChallenge(ctx, tx, kind, idHash)
		return err
	})
	return c, err
}

func takeChallenge(ctx context.Context, tx pgx.Tx, kind, idHash string) (*store.Challenge, error) {
	c, err := store.ScanChallenge(tx.QueryRow(ctx, `DELETE FROM signin_challenges
		WHERE id_hash = $1 AND kind = $2 AND expires_at > $3 RETURNING `+store.ChallengeColumns, idHash, kind, now().UnixMilli()))
	if err != nil {
		return nil, notFound(err, kind+" challenge")
	}
	return c, nil
}

// ResetPassword implements store.SignInStore.
func (s *Store) ResetPassword(ctx context.Context, idHash, passwordHash string) (int64, error) {
	var userID int64
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		c, err := takeChallenge(ctx, tx, store.ChallengeReset, idHash)
		if err != nil {
			return err
		}
		userID = c.UserID
		res, err := tx.Exec(ctx, `UPDATE users SET password_hash = $1 WHERE id = $2`, passwordHash, userID)
		if err != nil {
			return fmt.Errorf("reset the password of user %d: %w", userID, err)
		}
		if err := mustAffect(res, fmt.Sprintf("user %d", userID)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM sessions WHERE user_id = $1`, userID); err != nil {
			return fmt.Errorf("end the sessions of user %d: %w", userID, err)
		}
		return nil
	})
	return userID, err
}

// SetTOTP implements store.SignInStore.
func (s *Store) SetTOTP(ctx context.Context, t *store.TOTP) error {
	if t.CreatedAt.IsZero() {
		t.CreatedAt = now()
	}
	t.ConfirmedAt, t.LastStep = time.Time{}, 0
	return s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM totp_secrets WHERE user_id = $1 AND confirmed_at = 0`, t.UserID); err != nil {
			return fmt.Errorf("set totp of user %d: %w", t.UserID, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO totp_secrets (`+store.TOTPColumns+`) VALUES ($1, $2, 0, 0, $3)`,
			t.UserID, t.Secret, store.Millis(t.CreatedAt)); err != nil {
			return fmt.Errorf("set totp of user %d: %w", t.UserID, sqlErr(err))
		}
		return nil
	})
}

// TOTPByUser implements store.SignInStore.
func (s *Store) TOTPByUser(ctx context.Context, userID int64) (*store.TOTP, error) {
	t, err := store.ScanTOTP(s.pool.QueryRow(ctx, `SELECT `+store.TOTPColumns+` FROM totp_secrets WHERE user_id = $1`, userID))
	if err != nil {
		return nil, notFound(err, fmt.Sprintf("totp of user %d", userID))
	}
	return t, nil
}

// ConfirmTOTP implements store.SignInStore.
func (s *Store) ConfirmTOTP(ctx context.Context, userID, step int64, codeHashes []string) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		res, err := tx.Exec(ctx, `UPDATE totp_secrets SET confirmed_at = $1, last_step = $2
			WHERE user_id = $3 AND confirmed_at = 0`, now().UnixMilli(), step, userID)
		if err != nil {
			return fmt.Errorf("confirm totp of user %d: %w", userID, err)
		}
		if err := mustAffect(res, fmt.Sprintf("unconfirmed totp of user %d", userID)); err != nil {
			return err
		}
		return replaceRecoveryCodes(ctx, tx, userID, codeHashes)
	})
}

// UseTOTPStep implements store.SignInStore: one conditional update, so
// two instances given the same code at once cannot both take it.
func (s *Store) UseTOTPStep(ctx context.Context, userID, step int64) error {
	tag, err := s.pool.Exec(ctx, `UPDATE totp_secrets SET last_step = $1 WHERE user_id = $2 AND confirmed_at <> 0 AND last_step < $1`, step, userID)
	if err != nil {
		return fmt.Errorf("use totp step of user %d: %w", userID, err)
	}
	if n := tag.RowsAffected(); n > 0 {
		return nil
	}
	var confirmed int
	if err := s.pool.QueryRow(ctx, `SELECT COUNT(*) FROM totp_secrets WHERE user_id = $1 AND confirmed_at <> 0`, userID).Scan(&confirmed); err != nil {
		return fmt.Errorf("use totp step of user %d: %w", userID, err)
	}
	if confirmed == 0 {
		return fmt.Errorf("totp of user %d: %w", userID, store.ErrNotFound)
	}
	return fmt.Errorf("totp step %d of user %d: %w", step, userID, store.ErrConflict)
}

// DeleteTOTP implements store.SignInStore.
func (s *Store) DeleteTOTP(ctx context.Context, userID int64) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM totp_secrets WHERE user_id = $1`, userID); err != nil {
			return fmt.Errorf("delete totp of user %d: %w", userID, err)
		}
		return replaceRecoveryCodes(ctx, tx, userID, nil)
	})
}

// ReplaceRecoveryCodes implements store.SignInStore.
func (s *Store) ReplaceRecoveryCodes(ctx context.Context, userID int64, codeHashes []string) error {
	return s.inTx(ctx, func(tx pgx.Tx) error { return replaceRecoveryCodes(ctx, tx, userID, codeHashes) })
}

func replaceRecoveryCodes(ctx context.Context, tx pgx.Tx, userID int64, codeHashes []string) error {
	if _, err := tx.Exec(ctx, `DELETE FROM recovery_codes WHERE user_id = $1`, userID); err != nil {
		return fmt.Errorf("replace recovery codes of user %d: %w", userID, err)
	}
	for _, h := range codeHashes {
		if _, err := tx.Exec(ctx, `INSERT INTO recovery_codes (user_id, code_hash) VALUES ($1, $2)`, userID, h); err != nil {
			return fmt.Errorf("replace recovery codes of user %d: %w", userID, sqlErr(err))
		}
	}
	return nil
}

// UseRecoveryCode implements store.SignInStore.
func (s *Store) UseRecoveryCode(ctx context.Context, userID int64, codeHash string) error {
	res, err := s.pool.Exec(ctx, `DELETE FROM recovery_codes WHERE user_id = $1 AND code_hash = $2`, userID, codeHash)
	if err != nil {
		return fmt.Errorf("use a recovery code of user %d: %w", userID, err)
	}
	return mustAffect(res, "recovery code")
}

// CountRecoveryCodes implements store.SignInStore.
func (s *Store) CountRecoveryCodes(ctx context.Context, userID int64) (int, error) {
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT COUNT(*) FROM recovery_codes WHERE user_id = $1`, userID).Scan(&n); err != nil {
		return 0, fmt.Errorf("count recovery codes of user %d: %w", userID, err)
	}
	return n, nil
}

// AddPasskey implements store.SignInStore.
func (s *Store) AddPasskey(ctx context.Context, p *store.Passkey) error {
	if p.CreatedAt.IsZero() {
		p.CreatedAt = now()
	}
	if err := s.pool.QueryRow(ctx, `INSERT INTO passkeys (user_id, credential_id, name, data, created_at, last_used_at)
		VALUES ($1, $2, $3, $4, $5, $6) RETURNING id`, p.UserID, p.CredentialID, p.Name, p.Data, store.Millis(p.CreatedAt),
		store.ZeroMillis(p.LastUsedAt)).Scan(&p.ID); err != nil {
		return fmt.Errorf("add passkey of user %d: %w", p.UserID, sqlErr(err))
	}
	return nil
}

// ListPasskeys implements store.SignInStore.
func (s *Store) ListPasskeys(ctx context.Context, userID int64) ([]store.Passkey, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+store.PasskeyColumns+` FROM passkeys WHERE user_id = $1 ORDER BY id`, userID)
	if err != nil {
		return nil, fmt.Errorf("list passkeys of user %d: %w", userID, err)
	}
	defer rows.Close()
	out := []store.Passkey{}
	for rows.Next() {
		p, err := store.ScanPasskey(rows)
		if err != nil {
			return nil, fmt.Errorf("list passkeys of user %d: %w", userID, err)
		}
		out = append(out, p)
	}
	return out, rows.Err()
}

// PasskeyByCredential implements store.SignInStore.
func (s *Store) PasskeyByCredential(ctx context.Context, credentialID string) (*store.Passkey, error) {
	p, err := store.ScanPasskey(s.pool.QueryRow(ctx, `SELECT `+store.PasskeyColumns+` FROM passkeys WHERE credential_id = $1`, credentialID))
	if err != nil {
		return nil, notFound(err, "passkey")
	}
	return &p, nil
}

// UsePasskey implements store.SignInStore.
func (s *Store) UsePasskey(ctx context.Context, id int64, data string) error {
	res, err := s.pool.Exec(ctx, `UPDATE passkeys SET data = $1, last_used_at = $2 WHERE id = $3`, data, now().UnixMilli(), id)
	if err != nil {
		return fmt.Errorf("use passkey %d: %w", id, err)
	}
	return mustAffect(res, fmt.Sprintf("passkey %d", id))
}

// DeletePasskey implements store.SignInStore.
func (s *Store) DeletePasskey(ctx context.Context, userID, id int64) error {
	res, err := s.pool.Exec(ctx, `DELETE FROM passkeys WHERE id = $1 AND user_id = $2`, id, userID)
	if err != nil {
		return fmt.Errorf("delete passkey %d: %w", id, err)
	}
	return mustAffect(res, fmt.Sprintf("passkey %d", id))
}

// LinkSSO implements store.SignInStore.
func (s *Store) LinkSSO(ctx context.Context, l *store.SSOLink) error {
	if l.CreatedAt.IsZero() {
		l.CreatedAt = now()
	}
	return s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM sso_links WHERE user_id = $1`, l.UserID); err != nil {
			return fmt.Errorf("link user %d: %w", l.UserID, err)
		}
		if _, err := tx.Exec(ctx, `INSERT INTO sso_links (`+store.SSOLinkColumns+`) VALUES ($1, $2, $3, $4, $5)`,
			l.UserID, l.Issuer, l.Subject, l.Email, store.Millis(l.CreatedAt)); err != nil {
			return fmt.Errorf("link user %d: %w", l.UserID, sqlErr(err))
		}
		return nil
	})
}

// SSOLinkByUser implements store.SignInStore.
func (s *Store) SSOLinkByUser(ctx context.Context, userID int64) (*store.SSOLink, error) {
	l, err := store.ScanSSOLink(s.pool.QueryRow(ctx, `SELECT `+store.SSOLinkColumns+` FROM sso_links WHERE user_id = $1`, userID))
	if err != nil {
		return nil, notFound(err, fmt.Sprintf("sso link of user %d", userID))
	}
	return l, nil
}

// SSOLinkBySubject implements store.SignInStore.
func (s *Store) SSOLinkBySubject(ctx context.Context, issuer, subject string) (*store.SSOLink, error) {
	l, err := store.ScanSSOLink(s.pool.QueryRow(ctx, `SELECT `+store.SSOLinkColumns+`
		FROM sso_links WHERE issuer = $1 AND subject = $2 AND subject <> ''`, issuer, subject))
	if err != nil {
		return nil, notFound(err, "sso link")
	}
	return l, nil
}

// ClaimSSOLink implements store.SignInStore.
func (s *Store) ClaimSSOLink(ctx context.Context, issuer, email, subject string) (*store.SSOLink, error) {
	var l *store.SSOLink
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		l, err = store.ScanSSOLink(tx.QueryRow(ctx, `UPDATE sso_links SET subject = $1
			WHERE issuer = $2 AND email = $3 AND subject = '' RETURNING `+store.SSOLinkColumns, subject, issuer, email))
		if err != nil {
			return notFound(sqlErr(err), "sso link")
		}
		return nil
	})
	return l, err
}

// UnlinkSSO implements store.SignInStore.
func (s *Store) UnlinkSSO(ctx context.Context, userID int64) error {
	res, err := s.pool.Exec(ctx, `DELETE FROM sso_links WHERE user_id = $1`, userID)
	if err != nil {
		return fmt.Errorf("unlink user %d: %w", userID, err)
	}
	return mustAffect(res, fmt.Sprintf("sso link of user %d", userID))
}
