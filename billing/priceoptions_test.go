package billing

import (
	"strings"
	"testing"
)

// A price block's options set their fields, checked as they are set: a
// value no price can be is refused with the model and the option named.
func TestPriceConfigSet(t *testing.T) {
	pc := &PriceConfig{}
	for opt, v := range map[string]string{"input": "0.15", "output": "0.6", "task": "0.5", "max_output": "16384",
		"max_seconds": "12", "batch_input": "0.075", "batch_discount": "50%"} {
		if err := pc.Set("m", opt, v); err != nil {
			t.Fatalf("%s %s: %v", opt, v, err)
		}
	}
	if pc.Input != "0.15" || pc.Output != "0.6" || pc.Task != "0.5" || pc.MaxOutput != 16384 || pc.MaxSeconds != 12 ||
		pc.BatchInput != "0.075" || pc.BatchDiscount != "50%" {
		t.Fatalf("set: %+v", pc)
	}
	for _, c := range []struct{ opt, v, want string }{
		{"input", "0.0000001", "price m: input: "},
		{"max_output", "0", "price m: max_output must be a positive number of tokens"},
		{"batch_discount", "150%", "price m: batch_discount must be a whole percentage"},
		{"batch_output", "cheap", "price m: batch_output: "},
		{"colour", "blue", `price m: unrecognized option "colour"`},
	} {
		if err := pc.Set("m", c.opt, c.v); err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%s %s: %v, want %q", c.opt, c.v, err, c.want)
		}
	}
	tc := &TierConfig{}
	if err := tc.Set("cache_write_1h", "6"); err != nil || tc.CacheWrite1h != "6" {
		t.Fatalf("tier: %v %+v", err, tc)
	}
	if err := tc.Set("request", "1"); err == nil || !strings.Contains(err.Error(), `unrecognized option "request"`) {
		t.Errorf("tier request: %v", err)
	}
	for _, c := range []struct {
		args []string
		want ImagePriceConfig
	}{
		{[]string{"0.04"}, ImagePriceConfig{Price: "0.04"}},
		{[]string{"*", "hd", "0.08"}, ImagePriceConfig{Quality: "hd", Price: "0.08"}},
		{[]string{"1024x1024", "0.02"}, ImagePriceConfig{Size: "1024x1024", Price: "0.02"}},
	} {
		if got, err := ParseImagePrice(c.args); err != nil || got != c.want {
			t.Errorf("image %v: %+v %v", c.args, got, err)
		}
	}
	if _, err := ParseImagePrice([]string{"1024x1024", "hd", "x", "0.04"}); err == nil {
		t.Error("image with four values accepted")
	}
}
