package billing

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPriceConfigTaskPrices(t *testing.T) {
	p, err := (&PriceConfig{Task: "0.05", VideoSecond: "0.10", MaxSeconds: 12}).Price()
	if err != nil || p.Task != 50_000 || p.VideoSecond != 100_000 || p.MaxSeconds != 12 {
		t.Fatalf("price %+v, %v", p, err)
	}
	if _, err := (&PriceConfig{VideoSecond: "0.10"}).Price(); err == nil || !strings.Contains(err.Error(), "needs max_seconds") {
		t.Fatalf("video_second without max_seconds: %v", err)
	}
	if _, err := (&PriceConfig{Task: "-1"}).Price(); err == nil {
		t.Fatal("a negative task price was accepted")
	}
}

// A configuration's every price kind converts exactly, tiers sorted by
// threshold, the batch and media terms included.
func TestPriceConfigPrice(t *testing.T) {
	p, err := (&PriceConfig{
		Input: "2.5", Output: "10", CachedInput: "1.25", CacheWrite: "3", CacheWrite1h: "5",
		Tiers: []TierConfig{
			{Above: 400_000, Input: "6", Output: "20"},
			{Above: 200_000, Input: "5", Output: "15", CacheWrite1h: "7"},
		},
		AudioInput: "40", Request: "0.01", SearchUnit: "0.002", MaxOutput: 8192,
		Images:     []ImagePriceConfig{{Size: "1024x1024", Quality: "hd", Price: "0.08"}, {Price: "0.04"}},
		ImageInput: "8", AudioSecond: "0.0001", Characters: "15",
		BatchInput: "1.25", BatchDiscount: "50%",
	}).Price()
	if err != nil {
		t.Fatal(err)
	}
	if p.Input != 2_500_000 || p.Output != 10_000_000 || *p.CachedInput != 1_250_000 || *p.CacheWrite != 3_000_000 || *p.CacheWrite1h != 5_000_000 ||
		*p.AudioInput != 40_000_000 || p.AudioOutput != nil || p.Request != 10_000 || p.SearchUnit != 2_000 || p.MaxOutput != 8192 {
		t.Fatalf("token prices: %+v", p)
	}
	if len(p.Tiers) != 2 || p.Tiers[0].Above != 200_000 || p.Tiers[0].Output != 15_000_000 || *p.Tiers[0].CacheWrite1h != 7_000_000 ||
		p.Tiers[0].CachedInput != nil || p.Tiers[1].Input != 6_000_000 {
		t.Fatalf("tiers: %+v", p.Tiers)
	}
	if len(p.Images) != 2 || p.Images[0] != (ImagePrice{Size: "1024x1024", Quality: "hd", Price: 80_000}) || p.Images[1].Price != 40_000 ||
		*p.ImageInput != 8_000_000 || p.AudioSecond != 100 || p.Characters != 15_000_000 {
		t.Fatalf("media prices: %+v", p)
	}
	if *p.BatchInput != 1_250_000 || p.BatchOutput != nil || p.BatchDiscount != 50 {
		t.Fatalf("batch terms: %+v", p)
	}
	for _, tc := range []struct {
		pc   PriceConfig
		want string
	}{
		{PriceConfig{Output: "0.0000001"}, "output: "},
		{PriceConfig{MaxOutput: -1}, "max_output must not be negative"},
		{PriceConfig{Tiers: []TierConfig{{Above: 100, Input: "1"}}}, "above 100: a tier needs both"},
		{PriceConfig{Tiers: []TierConfig{{Above: 100, Input: "1", Output: "2", CachedInput: "x"}}}, "above 100: cached_input"},
		{PriceConfig{Images: []ImagePriceConfig{{Price: "-1"}}}, "image: "},
		{PriceConfig{BatchDiscount: "150%"}, "batch_discount must be a whole percentage"},
		{PriceConfig{BatchOutput: "cheap"}, "batch_output: "},
		{PriceConfig{MaxSeconds: -1}, "max_seconds must not be negative"},
	} {
		if _, err := tc.pc.Price(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: err = %v, want %q", tc.pc, err, tc.want)
		}
	}
	if _, err := ConfigPrices(map[string]*PriceConfig{"ok": {Input: "1"}, "bad": {Input: "one"}}); err == nil || !strings.HasPrefix(err.Error(), "price bad: input: ") {
		t.Fatalf("a bad price's error does not name its model: %v", err)
	}
}

func TestParseDiscount(t *testing.T) {
	for v, want := range map[string]int64{"50%": 50, "0": 0, " 100% ": 100} {
		if n, err := ParseDiscount(v); err != nil || n != want {
			t.Errorf("%q: %d, %v", v, n, err)
		}
	}
	for _, v := range []string{"101%", "-1", "half", "12.5%"} {
		if _, err := ParseDiscount(v); err == nil {
			t.Errorf("%q was accepted", v)
		}
	}
}

// A price file adds the models its globs keep that nothing priced before
// it; a bad entry fails it only when the file is kept to that model.
func TestPriceFileAddTo(t *testing.T) {
	file := filepath.Join(t.TempDir(), "prices.json")
	if err := os.WriteFile(file, []byte(`{
		"gpt-4o": {"input": "2.5", "output": "10"},
		"gpt-4o-mini": {"input": "0.15", "output": "0.6"},
		"claude-x": {"input": "3", "output": "15"},
		"broken": {"input": "lots"}
	}`), 0o600); err != nil {
		t.Fatal(err)
	}
	own := &Price{Input: 1}
	prices := map[string]*Price{"gpt-4o": own}
	n, err := (&PriceFile{Path: file, Models: []string{"gpt-*"}}).AddTo(prices)
	if err != nil || n != 1 {
		t.Fatalf("added %d, %v", n, err)
	}
	if prices["gpt-4o"] != own || prices["gpt-4o-mini"] == nil || prices["gpt-4o-mini"].Output != 600_000 || prices["claude-x"] != nil {
		t.Fatalf("prices: %v", prices)
	}
	if _, err := (&PriceFile{Path: file, Models: []string{"b*"}}).AddTo(prices); err == nil || !strings.Contains(err.Error(), "model broken") {
		t.Fatalf("a kept bad entry: %v", err)
	}
	if _, err := (&PriceFile{Path: file}).AddTo(map[string]*Price{}); err == nil || !strings.Contains(err.Error(), "prices_file "+file) {
		t.Fatalf("a bad entry with no globs: %v", err)
	}
	if _, err := (&PriceFile{Path: file + ".missing"}).AddTo(prices); err == nil || !strings.HasPrefix(err.Error(), "prices_file: ") {
		t.Fatalf("a missing file: %v", err)
	}
}
