package gatewaycmd

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/caddy-model-gateway/gateway/account"
	"github.com/caddy-model-gateway/gateway/store"
)

// limitFlags adds --rpm, --tpm and --max-parallel to a command.
func limitFlags(c *cobra.Command) {
	c.Flags().Int64("rpm", 0, "requests a minute (0: the gateway's default)")
	c.Flags().Int64("tpm", 0, "tokens a minute, prompt and completion (0: the gateway's default)")
	c.Flags().Int64("max-parallel", 0, "requests at once (0: the gateway's default)")
}

// limitsChange is the change the limit flags the command was given ask
// for; a negative value is refused by its flag's name.
func limitsChange(cmd *cobra.Command) (account.LimitsChange, error) {
	var c account.LimitsChange
	for _, f := range []struct {
		name string
		into **int64
	}{{"rpm", &c.RPM}, {"tpm", &c.TPM}, {"max-parallel", &c.MaxParallel}} {
		if !cmd.Flags().Changed(f.name) {
			continue
		}
		v, _ := cmd.Flags().GetInt64(f.name)
		if v < 0 {
			return c, fmt.Errorf("--%s must not be negative", f.name)
		}
		*f.into = &v
	}
	return c, nil
}

// newLimits are the limits the flags give something new.
func newLimits(cmd *cobra.Command) (store.Limits, error) {
	c, err := limitsChange(cmd)
	if err != nil {
		return store.Limits{}, err
	}
	return c.Apply(store.Limits{})
}
