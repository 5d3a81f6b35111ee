// Package gatewaycmd is the operator's commands, "caddy gateway user|token|
// redeem|usage|audit ...": users, API keys, redemption codes, the usage
// export and the audit log, run against the database directly, safe while the gateway serves.
//
// It must not import Caddy. The Caddy layer registers the command with
// caddycmd and gives, in an Env, what needs Caddy: opening the database its
// configuration names (read through Caddy's config adapters) and reading
// a duration as the Caddyfile does.
//
// Every command prints JSON (times in RFC 3339, UTC; null for never; []
// for nothing), except those that print a secret, which print it alone,
// and 'prices import', which prints Caddyfile price blocks to paste. A
// mistake on the command line is one line on stderr and a non-zero exit.
package gatewaycmd

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/caddy-model-gateway/gateway/billing"
	"github.com/caddy-model-gateway/gateway/store"
)

// Env is what the commands get from the server they are built into.
type Env struct {
	// OpenStore opens the database of the configuration the command's
	// flags name; the caller closes it.
	OpenStore func(cmd *cobra.Command) (store.Store, error)
	// ParseDuration reads a duration flag as the Caddyfile reads
	// durations (30d included).
	ParseDuration func(string) (time.Duration, error)
	// Known says whether the configuration defines a plan or a budget
	// group (kind "plan" or "group") of that name, for the commands that
	// assign them; a nil func (no configuration read) checks nothing
	Known func(cmd *cobra.Command) (func(kind, name string) bool, error)
	// Expand replaces {file./path} and {env.NAME} placeholders as the
	// Caddyfile does; nil leaves them as they are
	Expand func(string) string
	// Prices are the prices of the configuration the command's flags
	// name, for 'prices import --diff'
	Prices func(cmd *cobra.Command) (map[string]*billing.Price, error)
}

// known is e.Known's check for cmd, nil for none.
func (e Env) known(cmd *cobra.Command) (func(kind, name string) bool, error) {
	if e.Known == nil {
		return nil, nil
	}
	return e.Known(cmd)
}

// AddCommands adds the user, token, redeem and usage commands to cmd, the
// "gateway" command, which like each group answers a missing or unknown
// subcommand with an error rather than help and success.
func AddCommands(cmd *cobra.Command, e Env) {
	user := &cobra.Command{Use: "user", Short: "Manages users"}
	user.AddCommand(e.userAddCommand(), e.userListCommand(), e.userShowCommand(), e.userPasswdCommand(), e.userSetCommand(),
		e.userStatusCommand("disable", store.UserDisabled), e.userStatusCommand("enable", store.UserEnabled),
		e.userQuotaCommand(), e.userRoleCommand(), e.userBudgetCommand(), e.userPlanCommand())
	user.AddCommand(e.signInCommands()...)
	token := &cobra.Command{Use: "token", Short: "Manages API keys"}
	token.AddCommand(e.tokenAddCommand(), e.tokenListCommand(), e.tokenSetCommand(), e.tokenRenameCommand(), e.tokenDeleteCommand(),
		e.tokenStatusCommand("disable", store.TokenDisabled), e.tokenStatusCommand("enable", store.TokenEnabled), e.tokenBudgetCommand())
	redeem := &cobra.Command{Use: "redeem", Short: "Manages redemption codes"}
	redeem.AddCommand(e.redeemAddCommand(), e.redeemListCommand(),
		e.redeemStatusCommand("disable", store.CodeDisabled), e.redeemStatusCommand("enable", store.CodeEnabled))
	usage := &cobra.Command{Use: "usage", Short: "Exports usage rows"}
	usage.AddCommand(e.usageExportCommand())
	auditLog := &cobra.Command{Use: "audit", Short: "Shows the audit log of administrators' actions"}
	auditLog.AddCommand(e.auditListCommand())
	secrets := &cobra.Command{Use: "secrets", Short: "Manages the secrets_key that seals vendor keys in the database"}
	secrets.AddCommand(e.secretsRotateCommand())
	prices := &cobra.Command{Use: "prices", Short: "Reads price catalogues"}
	pricesImport := e.pricesImportCommand()
	prices.AddCommand(pricesImport)
	cmd.AddCommand(user, token, redeem, usage, auditLog, secrets, prices)
	for _, group := range []*cobra.Command{cmd, user, token, redeem, usage, auditLog, secrets, prices} {
		strictGroup(group)
	}
	pricesImport.Args = cobra.ExactArgs(1) // the file, as cp names one
}

// strictGroup makes a group of commands refuse what is not one of its
// subcommands. Left alone, cobra prints a group's help and exits 0 for
// "caddy gateway user lst", so a typo in a script passes unnoticed.
func strictGroup(group *cobra.Command) {
	group.Args = cobra.ArbitraryArgs
	group.SuggestionsMinimumDistance = 2
	group.RunE = func(c *cobra.Command, args []string) error {
		var names []string
		for _, sub := range c.Commands() {
			if sub.IsAvailableCommand() {
				names = append(names, sub.Name())
			}
		}
		choices := strings.Join(names, ", ")
		if len(args) == 0 {
			return fmt.Errorf("%s needs a command: one of %s", c.CommandPath(), choices)
		}
		hint := ""
		if s := c.SuggestionsFor(args[0]); len(s) > 0 {
			hint = fmt.Sprintf(" (did you mean %q?)", s[0])
		}
		return fmt.Errorf("%s has no command %q%s: type one of %s", c.CommandPath(), args[0], hint, choices)
	}
	for _, sub := range group.Commands() {
		sub.SetFlagErrorFunc(flagError)
		if !sub.HasSubCommands() {
			sub.Args = flagsOnly
		}
	}
}

// flagsOnly refuses words after a command that takes flags only: a value
// typed without its flag would otherwise be lost.
func flagsOnly(c *cobra.Command, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("%s takes flags, not %q: %s", c.CommandPath(), args[0], usageLine(c))
	}
	return nil
}

// flagError keeps pflag's one-line complaint and says where the flags
// are listed.
func flagError(c *cobra.Command, err error) error {
	return fmt.Errorf("%w (see '%s --help')", err, c.CommandPath())
}

// requiredAnnotation marks a flag a command cannot run without. cobra's
// own MarkFlagRequired is not used: it accepts an empty value and words
// its error for cobra, not for the person at the terminal.
const requiredAnnotation = "gateway_required"

// required marks flags of c as required.
func required(c *cobra.Command, names ...string) {
	for _, n := range names {
		_ = c.Flags().SetAnnotation(n, requiredAnnotation, []string{"true"})
	}
}

// checkRequired says which required flag is missing or empty, and how the
// command is typed.
func checkRequired(c *cobra.Command) error {
	var missing string
	c.Flags().VisitAll(func(f *pflag.Flag) {
		if missing != "" || f.Annotations[requiredAnnotation] == nil {
			return
		}
		if !f.Changed || f.Value.String() == "" {
			missing = f.Name
		}
	})
	if missing == "" {
		return nil
	}
	return fmt.Errorf("--%s is required: %s", missing, usageLine(c))
}

// usageLine is how c is typed: its path and its Use without the name.
func usageLine(c *cobra.Command) string {
	line := c.CommandPath()
	if _, rest, ok := strings.Cut(c.Use, " "); ok {
		line += " " + rest
	}
	return line
}

// withStore checks c's required flags, opens the store and runs run with
// a deadline.
func (e Env) withStore(run func(ctx context.Context, cmd *cobra.Command, st store.Store) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		if err := checkRequired(cmd); err != nil {
			return err
		}
		st, err := e.OpenStore(cmd)
		if err != nil {
			return err
		}
		defer st.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		return run(ctx, cmd, st)
	}
}

// printJSON prints v indented, as every command that shows a record does.
func printJSON(cmd *cobra.Command, v any) error {
	enc := json.NewEncoder(cmd.OutOrStdout())
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
