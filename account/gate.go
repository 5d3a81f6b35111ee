package account

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/caddy-model-gateway/gateway/internal/usernames"
	"github.com/caddy-model-gateway/gateway/store"
)

// GateConfig is how the Gate limits attempts, and the registration rules.
type GateConfig struct {
	// Attempts per Window at logins, passwords and redemption codes,
	// per client network and per user (default 10 a minute).
	Attempts int
	Window   time.Duration
	// Signups per SignupWindow per client network (default 10 an hour).
	Signups      int
	SignupWindow time.Duration
	// Registration lets people create their own accounts.
	Registration bool
	// InvitationReward is what an inviter earns when an invitee first
	// pays at least InvitationMinPayment (0: the reward itself), or
	// redeems a plan code when InvitationPlanCodes is set.
	InvitationReward     int64
	InvitationMinPayment int64
	InvitationPlanCodes  bool
	// SSODomains are the email domains single sign-on signs in (allowed_domains,
	// "*" for any): a password signup may not take a name in them, which
	// would block that person's first sign-in.
	SSODomains []string
	// SecretsKey seals the TOTP secrets the store keeps (the gateway's
	// secrets_key); nil keeps them as they are.
	SecretsKey SecretSealer
}

// Gate admits the attempts someone could repeat to guess: logins,
// password changes, redemption codes and signups. Its memory is bounded
// however many addresses and names unauthenticated callers try.
type Gate struct {
	store    store.Store
	attempts *attemptLimiter
	// signups counts registrations per network apart from attempts:
	// signing up is rare, so its limit is much lower.
	signups          *attemptLimiter
	registration     bool
	invitationReward store.InvitationReward
	ssoDomains       []string
	secrets          SecretSealer // nil: TOTP secrets kept plain
}

// NewGate returns a Gate over st.
func NewGate(st store.Store, c GateConfig) *Gate {
	attempts, window := positiveOr(c.Attempts, 10), positiveOr(c.Window, time.Minute)
	signups, signupWindow := positiveOr(c.Signups, 10), positiveOr(c.SignupWindow, time.Hour)
	return &Gate{store: st,
		attempts:     newAttemptLimiter(attempts, window, maxAttemptKeys),
		signups:      newAttemptLimiter(signups, signupWindow, maxAttemptKeys),
		registration: c.Registration,
		invitationReward: store.InvitationReward{Amount: c.InvitationReward, MinPayment: c.InvitationMinPayment,
			PlanCodes: c.InvitationPlanCodes},
		ssoDomains: c.SSODomains, secrets: c.SecretsKey}
}

// positiveOr is v, or def when v is unset (not positive).
func positiveOr[T int | time.Duration](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}

// ClientNetwork is what limits count a client by: its IPv4 address, or
// the /64 of its IPv6 address, since one subscriber is commonly given a
// whole /64 and so could otherwise speak from unlimited addresses. addr
// that is no IP address is taken as it is.
func ClientNetwork(addr string) string {
	ip, err := netip.ParseAddr(addr)
	if err != nil {
		return addr
	}
	ip = ip.Unmap().WithZone("")
	if ip.Is4() {
		return ip.String()
	}
	return netip.PrefixFrom(ip, 64).Masked().String()
}

func tooMany(msg string, wait time.Duration) error {
	return &Refusal{Reason: TooManyAttempts, Code: "rate_limited", RetryAfter: wait, Msg: msg}
}

func tooManyAttempts(action string, wait time.Duration) error {
	return tooMany(fmt.Sprintf("too many %s attempts: wait %s and try again", action, wait.Round(time.Second)), wait)
}

// Limit counts an attempt at action from network, and by userID when not
// zero; a TooManyAttempts Refusal when either is over the limit.
func (g *Gate) Limit(network, action string, userID int64) error {
	ks := []string{action + " ip " + network}
	if userID != 0 {
		ks = append(ks, action+" user "+strconv.FormatInt(userID, 10))
	}
	if ok, wait := g.attempts.allow(time.Now(), ks...); !ok {
		return tooManyAttempts(action, wait)
	}
	return nil
}

// attackedPairFailures is how many failures at a username an address may
// make while the username's failures from everywhere are over the limit:
// a person's one typo is not a lockout however hard someone else guesses
// at their name, and a spread-out guesser gets this many guesses an
// address and window.
const attackedPairFailures = 2

// LogIn checks a login from network. An address is limited on its own
// failures, so nobody can lock a user out from elsewhere: failures at a
// username from many addresses refuse further attempts only from
// addresses that have themselves failed at it attackedPairFailures
// times, which slows a spread-out guesser to that many guesses per
// address and window and never refuses the right password after a single
// failure from an address. The decision comes before the password is
// checked, so a refusal says nothing about whether the guess was right.
func (g *Gate) LogIn(ctx context.Context, network, username, password string) (*store.User, error) {
	// before the name is kept anywhere: a name no user can have is refused
	// as it is, however long
	if err := CheckUsername(username); err != nil {
		return nil, err
	}
	now := time.Now()
	addr, pair, user := "login ip "+network, "login ip "+network+" user "+username, "login user "+username
	// the address first, so a refused address keeps no username
	if ok, wait := g.attempts.allow(now, addr); !ok {
		return nil, tooManyAttempts("login", wait)
	}
	pairFailures, pairWait := g.attempts.count(now, pair)
	if pairFailures >= g.attempts.limit {
		g.attempts.undo(now, addr)
		return nil, tooManyAttempts("login", pairWait)
	}
	if pairFailures >= min(attackedPairFailures, g.attempts.limit) {
		if userFailures, _ := g.attempts.count(now, user); userFailures >= g.attempts.limit {
			g.attempts.undo(now, addr)
			return nil, tooManyAttempts("login", pairWait)
		}
	}
	u, err := checkCredentials(ctx, g.store, username, password)
	now = time.Now()
	switch {
	case errors.Is(err, ErrBadCredentials):
		// a failure counts at the username, here and from anywhere
		g.attempts.add(now, pair)
		g.attempts.add(now, user)
	case err == nil:
		// the right password gives the address its attempt back, so many
		// people behind one address are not refused for each other's
		// successes
		g.attempts.undo(now, addr)
	}
	return u, err
}

// RegistrationOpen refuses when people may not sign up on their own.
func (g *Gate) RegistrationOpen() error {
	if !g.registration {
		return forbidden("registration_closed", "registration is closed on this gateway: ask its administrator for an account")
	}
	return nil
}

// Register creates the account of someone signing up from network, with
// another user's invitation code or none.
func (g *Gate) Register(ctx context.Context, network, username, password, inviteCode string) (*store.User, error) {
	if err := g.RegistrationOpen(); err != nil {
		return nil, err
	}
	if err := CheckNewUsername(username); err != nil {
		return nil, err
	}
	if err := g.checkSSOName(username); err != nil {
		return nil, err
	}
	if err := g.Limit(network, "register", 0); err != nil {
		return nil, err
	}
	// a signup is counted before it is made, so concurrent ones cannot
	// all pass, and given back when it is refused
	now, key := time.Now(), "signup "+network
	if ok, wait := g.signups.allow(now, key); !ok {
		return nil, tooMany(fmt.Sprintf("too many accounts were registered from your address: wait %s and try again", wait.Round(time.Second)), wait)
	}
	u, err := register(ctx, g.store, username, password, strings.TrimSpace(inviteCode), g.invitationReward)
	if err != nil {
		g.signups.undo(now, key)
		return nil, err
	}
	return u, nil
}

// ChangePassword is ChangePassword counted as an attempt: a guess at the
// current password is a login attempt.
func (g *Gate) ChangePassword(ctx context.Context, network string, u *store.User, current, password, keepSession string) error {
	if err := g.Limit(network, "password", u.ID); err != nil {
		return err
	}
	return ChangePassword(ctx, g.store, u, current, password, keepSession)
}

// Redeem is Redeem counted as an attempt, so codes cannot be guessed fast.
func (g *Gate) Redeem(ctx context.Context, network string, userID int64, code string) (int64, error) {
	if err := g.Limit(network, "topup", userID); err != nil {
		return 0, err
	}
	return Redeem(ctx, g.store, userID, code)
}

// checkSSOName refuses a signup under an email address single sign-on
// would give someone: whoever registered it first would block that
// person's first sign-in (an account of that name that signs in with a
// password is never taken over). The domain is compared as names are
// (usernames.Key), so neither case nor look-alike letters get past.
func (g *Gate) checkSSOName(username string) error {
	at := strings.LastIndexByte(username, '@')
	if len(g.ssoDomains) == 0 || at < 0 {
		return nil
	}
	domain := usernames.Key(username[at+1:])
	for _, d := range g.ssoDomains {
		if d == "*" || usernames.Key(strings.TrimPrefix(d, "@")) == domain {
			return invalidf("sso_username", "usernames at %s are for single sign-on: sign in with it instead of registering, or choose a name that is no such address", username[at+1:])
		}
	}
	return nil
}
