package payments

import (
	"fmt"
	"strconv"
	"strings"
)

// PriceConfig is one item of the configuration's price list: the
// customer pays Amount (a decimal in the currency's major unit, "10.00")
// of Currency (ISO 4217) and is credited Units (1,000,000 = 1 USD).
type PriceConfig struct {
	ID       string `json:"id"`
	Amount   string `json:"amount"`
	Currency string `json:"currency"`
	Units    int64  `json:"units"`
}

// ParsePrice reads one line of the price list, `<id> <amount>
// <currency> <credit units>`, checking that the currency can charge the
// amount and that the credit is a positive whole number of units.
func ParsePrice(args []string) (PriceConfig, error) {
	if len(args) != 4 {
		return PriceConfig{}, fmt.Errorf("payments: a price is '<id> <amount> <currency> <credit units>', e.g. 'usd10 10.00 usd 10000000', not %q", strings.Join(args, " "))
	}
	units, err := strconv.ParseInt(args[3], 10, 64)
	if err != nil || units <= 0 {
		return PriceConfig{}, fmt.Errorf("payments: price %s: the credit must be a positive whole number of units (1000000 = 1 USD), not %q", args[0], args[3])
	}
	p := PriceConfig{ID: args[0], Amount: args[1], Currency: strings.ToLower(args[2]), Units: units}
	if _, err := ParseAmount(p.Amount, p.Currency); err != nil {
		return PriceConfig{}, err
	}
	return p, nil
}

// Items are the items the price list sells, each amount in its
// currency's smallest unit.
func Items(prices []PriceConfig) ([]Item, error) {
	items := make([]Item, 0, len(prices))
	for _, p := range prices {
		cur := strings.ToLower(p.Currency)
		amount, err := ParseAmount(p.Amount, cur)
		if err != nil {
			return nil, fmt.Errorf("payments: %w", err)
		}
		items = append(items, Item{ID: p.ID, Amount: amount, Currency: cur, Units: p.Units})
	}
	return items, nil
}
