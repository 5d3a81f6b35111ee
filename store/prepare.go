package store

import (
	"errors"
	"fmt"
	"time"
)

// This file is what both drivers check and fill in before they write a new
// row: the same refusals with the same words, and the same defaults, on
// SQLite and PostgreSQL. now is the driver's clock at the precision it
// keeps, so that a time filled in equals what a later read returns.

// taskNotStarted is the status PrepareTask gives a task that has none.
const taskNotStarted = "not_started"

// PrepareTask checks a task CreateTask is given and fills in its
// defaults: zero CreatedAt and UpdatedAt become now, an empty Status
// not_started.
func PrepareTask(t *Task, now time.Time) error {
	if t.ID == "" {
		return errors.New("create task: empty id")
	}
	if t.Reserved < 0 {
		return fmt.Errorf("create task %q: negative reservation", t.ID)
	}
	if t.CreatedAt.IsZero() {
		t.CreatedAt = now
	}
	if t.UpdatedAt.IsZero() {
		t.UpdatedAt = t.CreatedAt
	}
	if t.Status == "" {
		t.Status = taskNotStarted
	}
	return nil
}

// PrepareToken checks a token CreateToken is given, fills in its defaults
// (an enabled status, CreatedAt now) and returns its models column.
func PrepareToken(t *Token, now time.Time) (models string, err error) {
	if t.KeyHash == "" {
		return "", errors.New("create token: empty key hash")
	}
	if t.Status == "" {
		t.Status = TokenEnabled
	}
	if t.CreatedAt.IsZero() {
		t.CreatedAt = now
	}
	if models, err = EncodeModels(t.Models); err != nil {
		return "", fmt.Errorf("create token: %w", err)
	}
	return models, nil
}

// PrepareUser checks a user about to be inserted and fills in its
// defaults: the user role, an enabled status, CreatedAt now.
func PrepareUser(u *User, now time.Time) error {
	if u.Username == "" {
		return errors.New("empty username")
	}
	if u.Role == "" {
		u.Role = RoleUser
	}
	if u.Status == "" {
		u.Status = UserEnabled
	}
	if u.CreatedAt.IsZero() {
		u.CreatedAt = now
	}
	return nil
}

// PrepareAudit checks an audit entry AddAudit is given; a zero CreatedAt
// becomes now.
func PrepareAudit(e *AuditEntry, now time.Time) error {
	if e == nil || e.Actor == "" || e.Action == "" {
		return errors.New("add audit entry: actor and action are required")
	}
	if e.CreatedAt.IsZero() {
		e.CreatedAt = now
	}
	return nil
}

// CheckCodes checks a batch CreateRedemptionCodes is given, before any is
// written: a quota code grants a positive quota, a plan code no quota and
// some days.
func CheckCodes(codes []*RedemptionCode) error {
	for i, c := range codes {
		switch {
		case c == nil:
			return fmt.Errorf("create redemption codes: code %d is nil", i)
		case c.Code == "":
			return fmt.Errorf("create redemption codes: code %d is empty", i)
		case c.Plan != "" && (c.Quota != 0 || c.PlanDays <= 0):
			return fmt.Errorf("create redemption codes: code %d: a plan code grants no quota and some days, got %d and %d", i, c.Quota, c.PlanDays)
		case c.Plan == "" && c.Quota <= 0:
			return fmt.Errorf("create redemption codes: code %d: quota must be positive, got %d", i, c.Quota)
		}
	}
	return nil
}

// CheckRedeem checks Redeem's arguments: an empty code is ErrNotFound
// like any other code that cannot be redeemed.
func CheckRedeem(code string, userID int64) error {
	if code == "" {
		return fmt.Errorf("redeem: empty code: %w", ErrNotFound)
	}
	if userID <= 0 {
		// used_by = 0 means unused, so user 0 could redeem a code forever.
		return fmt.Errorf("redeem: invalid user id %d", userID)
	}
	return nil
}

// PrepareSession checks a session CreateSession is given (a session that
// never ends is a bug, not a choice); a zero CreatedAt becomes now.
func PrepareSession(sess *Session, now time.Time) error {
	switch {
	case sess.IDHash == "":
		return errors.New("create session: empty id hash")
	case sess.ExpiresAt.IsZero():
		return errors.New("create session: no expiry")
	}
	if sess.CreatedAt.IsZero() {
		sess.CreatedAt = now
	}
	return nil
}

// CreatedCodes gives each code of a committed batch its id and, when it
// had none, the batch's time ts.
func CreatedCodes(codes []*RedemptionCode, ids []int64, ts time.Time) {
	for i, c := range codes {
		c.ID, c.CreatedAt = ids[i], orTime(c.CreatedAt, ts)
	}
}

// KnownStatus refuses a user status other than enabled and disabled.
func KnownStatus(status string) error {
	if status != UserEnabled && status != UserDisabled {
		return fmt.Errorf("unknown status %q", status)
	}
	return nil
}

// KnownRole refuses a role that is not one of the three.
func KnownRole(role string) error {
	switch role {
	case RoleUser, RoleAdmin, RoleRoot:
		return nil
	}
	return fmt.Errorf("unknown role %q", role)
}

// CheckUserChange refuses an administrator's change naming an unknown
// status or role, before anything is written.
func CheckUserChange(userID int64, c UserChange) error {
	if c.Status != nil {
		if err := KnownStatus(*c.Status); err != nil {
			return fmt.Errorf("update user %d: %w", userID, err)
		}
	}
	if c.Role != nil {
		if err := KnownRole(*c.Role); err != nil {
			return fmt.Errorf("update user %d: %w", userID, err)
		}
	}
	return nil
}

// RewardMinimum is the least payment that pays r: its MinPayment, or the
// reward itself when that is 0, so a code worth a unit cannot turn into
// half a dollar for the inviter.
func RewardMinimum(r InvitationReward) (int64, error) {
	if r.Amount < 0 || r.MinPayment < 0 {
		return 0, fmt.Errorf("invitation reward %d with minimum payment %d: neither may be negative", r.Amount, r.MinPayment)
	}
	if r.MinPayment == 0 {
		return r.Amount, nil
	}
	return r.MinPayment, nil
}
