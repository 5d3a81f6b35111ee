package payments

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/caddy-model-gateway/gateway/store"
)

func TestParseAmount(t *testing.T) {
	for _, tt := range []struct {
		in, currency string
		want         int64
		shown        string
	}{
		{"10", "usd", 1000, "10.00"},
		{"10.5", "usd", 1050, "10.50"},
		{"10.05", "usd", 1005, "10.05"},
		{"0.01", "usd", 1, "0.01"},
		{"1000", "jpy", 1000, "1000"},
		{"1.234", "kwd", 1234, "1.234"},
		{"92233720368547.75", "usd", 9223372036854775, "92233720368547.75"},
	} {
		got, err := ParseAmount(tt.in, tt.currency)
		if err != nil || got != tt.want {
			t.Errorf("ParseAmount(%q, %s) = %d, %v; want %d", tt.in, tt.currency, got, err, tt.want)
		}
		if back := FormatAmount(got, tt.currency); back != tt.shown {
			t.Errorf("FormatAmount(%d, %s) = %q, want %q", got, tt.currency, back, tt.shown)
		}
	}
	// what a currency cannot charge is refused, never rounded
	for _, bad := range [][2]string{{"10.001", "usd"}, {"10.5", "jpy"}, {"-1", "usd"}, {"0", "usd"}, {"0.00", "usd"},
		{"", "usd"}, {"1.", "usd"}, {".5", "usd"}, {"1e3", "usd"}, {"ten", "usd"}, {"1,000", "usd"}, {"99999999999999999", "usd"}} {
		if got, err := ParseAmount(bad[0], bad[1]); err == nil {
			t.Errorf("ParseAmount(%q, %s) = %d, want an error", bad[0], bad[1], got)
		}
	}
	if got := FormatAmount(5, "usd"); got != "0.05" {
		t.Errorf("FormatAmount(5, usd) = %q", got)
	}
}

type nopProvider struct{}

func (nopProvider) CreateCheckout(context.Context, CheckoutRequest) (*Checkout, error) {
	return nil, nil
}
func (nopProvider) ParseWebhook(http.Header, []byte) (*store.PaymentEvent, error) { return nil, nil }

// A price list that cannot be sold from is refused when the service is made.
func TestNewChecksThePriceList(t *testing.T) {
	good := Item{ID: "usd10", Amount: 1000, Currency: "usd", Units: 10_000_000}
	base := Config{Name: "stripe", Provider: nopProvider{}, Store: store.Store(nil), SuccessURL: "https://a", CancelURL: "https://b"}
	for name, items := range map[string][]Item{
		"empty":            nil,
		"no id":            {{Amount: 1, Currency: "usd", Units: 1}},
		"no amount":        {{ID: "a", Currency: "usd", Units: 1}},
		"upper case":       {{ID: "a", Amount: 1, Currency: "USD", Units: 1}},
		"not a currency":   {{ID: "a", Amount: 1, Currency: "dollars", Units: 1}},
		"no credit":        {{ID: "a", Amount: 1, Currency: "usd"}},
		"listed twice":     {good, good},
		"negative credit":  {{ID: "a", Amount: 1, Currency: "usd", Units: -5}},
		"negative payment": {{ID: "a", Amount: -1, Currency: "usd", Units: 5}},
	} {
		cfg := base
		cfg.Items = items
		cfg.Store = fakeStore{}
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: made a service", name)
		}
	}
	cfg := base
	cfg.Items, cfg.Store = []Item{good}, fakeStore{}
	cfg.CancelURL = ""
	if _, err := New(cfg); err == nil {
		t.Error("made a service with nowhere to come back to")
	}
	cfg.CancelURL = "https://b"
	s, err := New(cfg)
	if err != nil || s.Items()[0].Price() != "10.00" {
		t.Fatalf("%v, %v", s, err)
	}
	if _, err := s.Checkout(context.Background(), &store.User{ID: 1}, "usd1000"); err == nil || !strings.Contains(err.Error(), ErrUnknownItem.Error()) {
		t.Fatalf("an item not listed: %v", err)
	}
}

// fakeStore is a store whose every method panics: the checks above come
// before any use of it.
type fakeStore struct{ store.Store }
