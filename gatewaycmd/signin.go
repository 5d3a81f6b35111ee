package gatewaycmd

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/caddy-model-gateway/gateway/account"
	"github.com/caddy-model-gateway/gateway/store"
)

// signInCommands are the operator's answers to a user who cannot sign
// in: a one-time reset link, a link to a single sign-on identity, and
// second factors cleared for a lost phone.
func (e Env) signInCommands() []*cobra.Command {
	return []*cobra.Command{e.userResetLinkCommand(), e.userSSOLinkCommand(), e.userSSOUnlinkCommand(), e.userSecondFactorResetCommand()}
}

func (e Env) userResetLinkCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "reset-link --username <name> [--ttl 1h] [--base-url https://gateway.example]",
		Short: "Issues a one-time password reset link for a user (replacing their earlier one) and prints it once",
		Long: `Issues a one-time link that sets a new password for the user and ends
every session of theirs. It lasts --ttl (default 1h, at most 7 days), works
once, and replaces the user's earlier link. The database keeps only its
hash: the link is printed once, as the console's /console/reset page with
the secret in the fragment; give --base-url (the gateway's address as
people reach it) to print the whole address.`,
		RunE: e.withStore(func(ctx context.Context, cmd *cobra.Command, st store.Store) error {
			u, err := userNamed(ctx, cmd, st)
			if err != nil {
				return err
			}
			var ttl time.Duration
			if v, _ := cmd.Flags().GetString("ttl"); v != "" {
				if ttl, err = e.ParseDuration(v); err != nil {
					return fmt.Errorf("--ttl: %w", err)
				}
			}
			link, err := account.IssueResetLink(ctx, st, account.Operator, u.ID, ttl)
			if err != nil {
				return err
			}
			base, _ := cmd.Flags().GetString("base-url")
			return printJSON(cmd, map[string]any{"username": u.Username,
				"url":        strings.TrimRight(base, "/") + "/console/reset#" + link.Token,
				"expires_at": timestamp(link.ExpiresAt)})
		}),
	}
	c.Flags().String("username", "", "user name")
	c.Flags().String("ttl", "", "how long the link lasts, such as 30m or 2d (default 1h)")
	c.Flags().String("base-url", "", "the gateway's address as people reach it, printed before the link's path")
	required(c, "username")
	return c
}

func (e Env) userSSOLinkCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "sso-link --username <name> --issuer <url> (--subject <sub> | --email <address>)",
		Short: "Links a user to a single sign-on identity, so its next SSO sign-in lands in this account",
		RunE: e.withStore(func(ctx context.Context, cmd *cobra.Command, st store.Store) error {
			u, err := userNamed(ctx, cmd, st)
			if err != nil {
				return err
			}
			issuer, _ := cmd.Flags().GetString("issuer")
			subject, _ := cmd.Flags().GetString("subject")
			email, _ := cmd.Flags().GetString("email")
			l, err := account.LinkSSO(ctx, st, account.Operator, u.ID, issuer, subject, email)
			if err != nil {
				return err
			}
			return printJSON(cmd, l)
		}),
	}
	c.Flags().String("username", "", "user name")
	c.Flags().String("issuer", "", "the provider's issuer URL, as 'sso oidc { issuer ... }' names it")
	c.Flags().String("subject", "", "the provider's subject (sub claim) of the person")
	c.Flags().String("email", "", "the email the provider vouches for; the first sign-in with it fills in the subject")
	required(c, "username", "issuer")
	return c
}

func (e Env) userSSOUnlinkCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "sso-unlink --username <name>",
		Short: "Removes a user's link to a single sign-on identity",
		RunE: e.withStore(func(ctx context.Context, cmd *cobra.Command, st store.Store) error {
			u, err := userNamed(ctx, cmd, st)
			if err != nil {
				return err
			}
			if err := account.UnlinkSSO(ctx, st, account.Operator, u.ID); err != nil {
				return fmt.Errorf("unlinking %s: %w", u.Username, err)
			}
			return nil
		}),
	}
	c.Flags().String("username", "", "user name")
	required(c, "username")
	return c
}

func (e Env) userSecondFactorResetCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "second-factor-reset --username <name>",
		Short: "Clears a user's two-factor codes, recovery codes and passkeys (a lost phone)",
		RunE: e.withStore(func(ctx context.Context, cmd *cobra.Command, st store.Store) error {
			u, err := userNamed(ctx, cmd, st)
			if err != nil {
				return err
			}
			return account.ResetSecondFactors(ctx, st, account.Operator, u.ID)
		}),
	}
	c.Flags().String("username", "", "user name")
	required(c, "username")
	return c
}
