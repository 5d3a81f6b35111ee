package billing

import (
	"math"
	"testing"
)

func TestImagePriceFor(t *testing.T) {
	dalle3 := &Price{Images: []ImagePrice{
		{"1024x1024", "standard", 40_000}, {"1024x1792", "standard", 80_000},
		{"1024x1024", "hd", 80_000}, {"1024x1792", "hd", 120_000},
	}}
	layered := &Price{Images: []ImagePrice{
		{"", "", 10_000}, {"512x512", "", 20_000}, {"", "high", 30_000}, {"512x512", "high", 50_000},
	}}
	tests := []struct {
		p             *Price
		size, quality string
		want          int64
		ok            bool
	}{
		{dalle3, "1024x1024", "standard", 40_000, true},
		{dalle3, "1024x1792", "hd", 120_000, true},
		{dalle3, "256x256", "standard", 0, false},
		// left to the model: the dearest it can produce
		{dalle3, "auto", "auto", 120_000, true},
		{dalle3, "1024x1024", "", 80_000, true},
		{dalle3, "", "standard", 80_000, true},
		// the most specific entry wins over a dearer general one
		{layered, "512x512", "high", 50_000, true},
		{layered, "512x512", "low", 20_000, true},
		{layered, "1024x1024", "high", 30_000, true},
		{layered, "1024x1024", "low", 10_000, true},
		{&Price{Free: true}, "x", "y", 0, true},
		{&Price{}, "1024x1024", "hd", 0, false},
	}
	for _, tt := range tests {
		got, ok := tt.p.ImagePriceFor(tt.size, tt.quality)
		if got != tt.want && tt.ok || ok != tt.ok {
			t.Errorf("%v %q %q: %d %v, want %d %v", tt.p.Images, tt.size, tt.quality, got, ok, tt.want, tt.ok)
		}
	}
}

func TestMediaCosts(t *testing.T) {
	p := &Price{Input: 5_000_000, Output: 40_000_000, AudioSecond: 100, Characters: 15_000_000, Request: 3}
	image := int64(10_000_000)
	p.ImageInput = &image
	if got := p.ImageCost(3, 40_000); got != 120_003 {
		t.Errorf("images: %d", got)
	}
	// 12 text, 323 image and 4160 output tokens: 60 + 3230 + 166400 units, exactly
	if got := p.ImageTokenCost(12, 323, 4160); got != 169_690+3 {
		t.Errorf("image tokens: %d", got)
	}
	// a fraction of a unit is rounded up, once for the whole sum
	if got := (&Price{Input: 1, Output: 1}).ImageTokenCost(1, 1, 1); got != 1 {
		t.Errorf("image tokens rounding: %d", got)
	}
	// 7.25 s at 100 units a second; 1 ms is a tenth of a unit, rounded up
	if got := p.AudioCost(7_250); got != 725+3 {
		t.Errorf("audio: %d", got)
	}
	if got := p.AudioCost(1); got != 1+3 {
		t.Errorf("audio rounding: %d", got)
	}
	// 15 USD per million characters: 15 units a character
	if got := p.CharacterCost(45); got != 675+3 {
		t.Errorf("characters: %d", got)
	}
	if got := (&Price{Characters: 600_000}).CharacterCost(3); got != 2 {
		t.Errorf("characters rounding: %d (0.6 units a character)", got)
	}
	// nothing overflows: every charge saturates
	huge := &Price{AudioSecond: math.MaxInt64, Characters: math.MaxInt64, Output: math.MaxInt64}
	if huge.AudioCost(math.MaxInt64) != math.MaxInt64 || huge.CharacterCost(math.MaxInt64) != math.MaxInt64 ||
		huge.ImageTokenCost(0, 0, math.MaxInt64) != math.MaxInt64 || huge.ImageCost(math.MaxInt64, 2) != math.MaxInt64 {
		t.Error("a huge charge does not saturate")
	}
	if (&Price{Free: true, AudioSecond: 100}).AudioCost(1000) != 0 {
		t.Error("a free model charged")
	}
}
