package account

import (
	"context"
	"errors"
	"fmt"
	"io"

	"go.uber.org/zap"

	"github.com/caddy-model-gateway/gateway/keys"
	"github.com/caddy-model-gateway/gateway/store"
)

// BootstrapRoot creates the root user on an empty database and prints its
// password once to out, since there is no other way in yet. The gateway
// and the operator's commands both call it when they open a database, so
// whichever comes first on a new one makes the root user.
func BootstrapRoot(ctx context.Context, st store.Store, log *zap.Logger, out io.Writer) error {
	n, err := st.CountUsers(ctx)
	if err != nil {
		return fmt.Errorf("counting users: %w", err)
	}
	if n > 0 {
		return nil
	}
	password, err := keys.Random("", 20)
	if err != nil {
		return err
	}
	hash, err := HashPassword(password)
	if err != nil {
		return err
	}
	invite, err := keys.Random("", 10)
	if err != nil {
		return err
	}
	err = st.CreateUser(ctx, &store.User{Username: "root", PasswordHash: hash, Role: store.RoleRoot, InviteCode: invite})
	if errors.Is(err, store.ErrConflict) {
		return nil // another process bootstrapped it first
	}
	if err != nil {
		return fmt.Errorf("creating the root user: %w", err)
	}
	// the password goes to the terminal, apart from the structured log,
	// which log shippers carry to aggregators
	log.Warn("created the root user on an empty database; its password is printed once on stderr, apart from this log: change it with 'caddy gateway user passwd --username root'",
		zap.String("username", "root"))
	fmt.Fprintf(out, "\n  The gateway created its root user. Username: root  Password: %s\n  This is shown only once; change it with: caddy gateway user passwd --username root\n\n", password)
	return nil
}
