package payments

import (
	"strings"
	"testing"
)

// A price list line is read as written, its currency in lower case, and
// refused when the currency cannot charge its amount or its credit is no
// positive whole number; the items sold carry the amount in cents.
func TestPriceList(t *testing.T) {
	p, err := ParsePrice([]string{"usd10", "10.00", "USD", "10000000"})
	if err != nil || p != (PriceConfig{ID: "usd10", Amount: "10.00", Currency: "usd", Units: 10_000_000}) {
		t.Fatalf("%+v %v", p, err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"usd10", "10.00", "usd"}, "'<id> <amount> <currency> <credit units>'"},
		{[]string{"usd10", "10.001", "usd", "10000000"}, "at most 2 decimals"},
		{[]string{"usd10", "10.00", "usd", "0"}, "positive whole number of units"},
	} {
		if _, err := ParsePrice(c.args); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
	items, err := Items([]PriceConfig{p, {ID: "eur5", Amount: "5", Currency: "EUR", Units: 5_000_000}})
	if err != nil || len(items) != 2 || items[0] != (Item{ID: "usd10", Amount: 1000, Currency: "usd", Units: 10_000_000}) || items[1].Amount != 500 || items[1].Currency != "eur" {
		t.Fatalf("items %+v %v", items, err)
	}
	if _, err := Items([]PriceConfig{{ID: "x", Amount: "1.001", Currency: "usd", Units: 1}}); err == nil || !strings.HasPrefix(err.Error(), "payments: ") {
		t.Errorf("a bad amount: %v", err)
	}
}
