package gatewaycmd

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/caddy-model-gateway/gateway/billing"
)

// Money on the command line: a flag in units (micro-dollars, the quota's
// own unit) and, beside it, --usd in dollars, since "--quota 5" meaning
// $0.000005 surprises whoever meant five dollars. An amount in units
// under one cent is accepted with a warning naming what it is in USD.

// centUnits is one cent in units: a smaller amount is most likely dollars
// typed as units.
const centUnits = billing.UnitsPerUSD / 100

// usdFlag adds --usd beside units, the flag of the same amount in units.
func usdFlag(c *cobra.Command, units, what string) {
	c.Flags().String("usd", "", what+" in USD, e.g. 5 or 0.25 (instead of --"+units+")")
	c.MarkFlagsMutuallyExclusive(units, "usd")
}

// money is the amount given with the units flag or with --usd, in units
// (0 when neither was given).
func money(cmd *cobra.Command, units string) (int64, error) {
	if cmd.Flags().Changed("usd") {
		return usdAmount(cmd, "usd")
	}
	n, err := cmd.Flags().GetInt64(units)
	if err != nil {
		return 0, err
	}
	warnUnderCent(cmd, units, n)
	return n, nil
}

// usdAmount reads the USD flag, a decimal with at most six places and an
// optional minus sign, in units.
func usdAmount(cmd *cobra.Command, flag string) (int64, error) {
	s, _ := cmd.Flags().GetString(flag)
	digits, negative := strings.CutPrefix(strings.TrimSpace(s), "-")
	units, err := billing.ParseUSD(digits)
	if err != nil || digits == "" {
		return 0, fmt.Errorf("--%s must be an amount of USD with at most six decimals, such as 5 or 0.25, not %q", flag, s)
	}
	if negative {
		units = -units
	}
	return units, nil
}

// warnUnderCent says on stderr what an amount in units under one cent is
// in USD, and how to give dollars.
func warnUnderCent(cmd *cobra.Command, flag string, units int64) {
	if units == 0 || units >= centUnits || units <= -centUnits {
		return
	}
	usdFlag := "--usd"
	if flag == "add" || flag == "set" { // user quota's
		usdFlag = "--" + flag + "-usd"
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "warning: --%s %d is %d units, %s USD (1,000,000 units = 1 USD), under one cent; for %d USD pass %s %d\n",
		flag, units, units, formatUSD(units), units, usdFlag, units)
}

// formatUSD writes units as USD with the decimals it needs.
func formatUSD(units int64) string {
	sign := ""
	if units < 0 {
		sign, units = "-", -units
	}
	s := fmt.Sprintf("%s%d.%06d", sign, units/billing.UnitsPerUSD, units%billing.UnitsPerUSD)
	return strings.TrimSuffix(strings.TrimRight(s, "0"), ".")
}
