package gatewaycmd

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/caddy-model-gateway/gateway/account"
	"github.com/caddy-model-gateway/gateway/internal/sealed"
	"github.com/caddy-model-gateway/gateway/store"
)

// AuditSecretsRotate is the audit action of a secrets_key rotation.
const AuditSecretsRotate = "secrets.rotate"

func (e Env) secretsRotateCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "rotate --old <secrets_key> --new <secrets_key>",
		Short: "Re-seals the vendor keys of channels made at runtime and the two-factor secrets under a new secrets_key, all in one transaction",
		Long: `Re-seals, in one transaction, every vendor key the database keeps (those
of channels made in the console or the admin API) and every two-factor
(TOTP) secret from the old secrets_key to the new one: a key the old one
does not open changes nothing at all. Two-factor secrets kept before
secrets_key was set are sealed with the new key (give the same key as
--old and --new to seal them without rotating).
Each value is the key itself or, better (the command line is visible to
other users of the machine), a placeholder: {file./path} or {env.NAME}.
Then point the gateway's secrets_key at the new key and reload every
instance: until an instance does, it keeps serving the channels it has.`,
		RunE: e.withStore(func(ctx context.Context, cmd *cobra.Command, st store.Store) error {
			oldKey, err := e.sealKey(cmd, "old")
			if err != nil {
				return err
			}
			newKey, err := e.sealKey(cmd, "new")
			if err != nil {
				return err
			}
			n, err := st.ResealSecrets(ctx, store.Resealers{
				Runtime: func(it *store.RuntimeItem) ([]byte, error) {
					plain, err := oldKey.Open(it.Secret, it.Binding())
					if errors.Is(err, sealed.ErrWrongKey) {
						return nil, fmt.Errorf("the --old key does not open the keys of %s %q: nothing was changed (is it the secrets_key the gateway runs with?)", it.Kind, it.Name)
					}
					if err != nil {
						return nil, fmt.Errorf("%s %q: %w", it.Kind, it.Name, err)
					}
					return newKey.Seal(plain, it.Binding())
				},
				// a secret kept before secrets_key was set is sealed now
				TOTP: func(userID int64, secret string) (string, error) {
					out, err := account.ResealTOTP(oldKey, newKey, userID, secret)
					if errors.Is(err, sealed.ErrWrongKey) {
						return "", fmt.Errorf("the --old key does not open the two-factor secret of user %d: nothing was changed (is it the secrets_key the gateway runs with?)", userID)
					}
					return out, err
				},
			})
			if err != nil {
				return err
			}
			audit(ctx, cmd, st, AuditSecretsRotate, "secrets_key", nil, account.Fields{"resealed": n.Runtime, "totp_resealed": n.TOTP})
			return printJSON(cmd, n)
		}),
	}
	c.Flags().String("old", "", "the secrets_key the keys are sealed with now (or {file./path}, {env.NAME})")
	c.Flags().String("new", "", "the secrets_key to seal them with (or {file./path}, {env.NAME})")
	required(c, "old")
	required(c, "new")
	return c
}

// sealKey reads the key of flag name, its placeholder expanded.
func (e Env) sealKey(cmd *cobra.Command, name string) (*sealed.Key, error) {
	v, _ := cmd.Flags().GetString(name)
	if e.Expand != nil && strings.Contains(v, "{") {
		v = e.Expand(v)
	}
	if strings.TrimSpace(v) == "" {
		return nil, fmt.Errorf("--%s is empty (the file or variable it names is missing or empty)", name)
	}
	k, err := sealed.NewKey(v)
	if err != nil {
		return nil, fmt.Errorf("--%s: %w", name, err)
	}
	return k, nil
}
