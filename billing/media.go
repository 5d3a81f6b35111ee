package billing

import (
	"math"
	"math/bits"
)

// ImagePrice is the price of one generated image, in quota units, for a
// size ("1024x1024") and a quality ("hd", "high"); an empty Size or
// Quality matches any.
type ImagePrice struct {
	Size    string `json:"size,omitempty"`
	Quality string `json:"quality,omitempty"`
	Price   int64  `json:"price"`
}

// undecided reports whether a size or quality is left to the model, so
// that any priced one may be produced.
func undecided(s string) bool { return s == "" || s == "auto" }

// ImagePriceFor is the price of one image of the size and quality: the
// entry naming both, else the one naming the size, else the one naming the
// quality, else the default (neither). A size or quality left to the model
// ("auto" or "") matches every entry, and the dearest of them is taken: the
// most the image can cost. ok is false when nothing matches.
func (p *Price) ImagePriceFor(size, quality string) (price int64, ok bool) {
	if p == nil || p.Free {
		return 0, true
	}
	best, rank := int64(-1), -1
	for _, e := range p.Images {
		sizeHit := e.Size == "" || undecided(size) || e.Size == size
		qualityHit := e.Quality == "" || undecided(quality) || e.Quality == quality
		if !sizeHit || !qualityHit {
			continue
		}
		// how specific the entry is for what was asked: an undecided
		// request ranks every entry alike, so the dearest wins
		r := 0
		if e.Size != "" && !undecided(size) {
			r += 2
		}
		if e.Quality != "" && !undecided(quality) {
			r++
		}
		if r > rank || (r == rank && e.Price > best) {
			best, rank = e.Price, r
		}
	}
	return best, best >= 0
}

// ImageCost is n images at each, plus the flat per-request charge.
func (p *Price) ImageCost(n, each int64) int64 {
	if p == nil || p.Free {
		return 0
	}
	return AddSat(MulSat(n, each), max(p.Request, 0))
}

// ImageTokenCost is an image model billed by tokens (gpt-image-1): text
// input tokens at the input price, image input tokens at the image input
// price, output tokens at the output price, exactly, rounded up once.
func (p *Price) ImageTokenCost(textIn, imageIn, out int64) int64 {
	if p == nil || p.Free {
		return 0
	}
	imagePrice := p.Input
	if p.ImageInput != nil {
		imagePrice = *p.ImageInput
	}
	return AddSat(perMillion([][2]int64{{textIn, p.Input}, {imageIn, imagePrice}, {out, p.Output}}), max(p.Request, 0))
}

// AudioCost is millis milliseconds of input audio at the per-second
// price, rounded up to a whole unit, plus the flat per-request charge.
func (p *Price) AudioCost(millis int64) int64 {
	if p == nil || p.Free {
		return 0
	}
	return AddSat(ceilDiv(millis, p.AudioSecond, 1000), max(p.Request, 0))
}

// CharacterCost is chars characters of input text at the per-million
// price, rounded up, plus the flat per-request charge.
func (p *Price) CharacterCost(chars int64) int64 {
	if p == nil || p.Free {
		return 0
	}
	return AddSat(ceilDiv(chars, p.Characters, 1_000_000), max(p.Request, 0))
}

// HasImagePrice reports whether the model can be billed for images: by
// the image table or by tokens.
func (p *Price) HasImagePrice() bool {
	return p.Free || len(p.Images) > 0 || p.Output > 0
}

// perMillion is ceil(sum(count*price) / 1e6) in 128 bits; a quotient
// beyond int64 saturates.
func perMillion(terms [][2]int64) int64 {
	var hi, lo uint64
	for _, t := range terms {
		if t[0] <= 0 || t[1] <= 0 {
			continue
		}
		h, l := bits.Mul64(uint64(t[0]), uint64(t[1]))
		var carry uint64
		lo, carry = bits.Add64(lo, l, 0)
		hi += h + carry
	}
	if hi >= 1_000_000 {
		return math.MaxInt64
	}
	q, r := bits.Div64(hi, lo, 1_000_000)
	if r > 0 {
		q++
	}
	if q > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(q)
}

// ceilDiv is ceil(a*b/d) for non-negative a, b and a positive d.
func ceilDiv(a, b, d int64) int64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	h, l := bits.Mul64(uint64(a), uint64(b))
	if h >= uint64(d) {
		return math.MaxInt64
	}
	q, r := bits.Div64(h, l, uint64(d))
	if r > 0 {
		q++
	}
	if q > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(q)
}

// MulSat is a x b for non-negative amounts (0 when either is not
// positive), saturating rather than overflowing.
func MulSat(a, b int64) int64 {
	if a <= 0 || b <= 0 {
		return 0
	}
	if a > math.MaxInt64/b {
		return math.MaxInt64
	}
	return a * b
}
