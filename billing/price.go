// Package billing turns usage into money and keeps quota exact: the price
// table, the in-memory ledger that reserves quota before a request is relayed
// and settles it after, and the writer that commits settlements and usage rows
// to the store in batches. Quota is an integer: 1,000,000 units = 1 USD.
// It must not import caddymodule or any vendor adapter.
package billing

import (
	"fmt"
	"math"
	"math/big"
	"math/bits"
	"strings"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// UnitsPerUSD is the quota unit: one micro-dollar.
const UnitsPerUSD = 1_000_000

// Price is what one model costs. Token prices are in quota units per
// million tokens, so USD 0.15 per million is 150000; with that scale every
// configured price with up to six decimals is an exact integer.
type Price struct {
	Free bool `json:"free,omitempty"`
	// Input, Output: per million prompt and completion tokens.
	Input  int64 `json:"input,omitempty"`
	Output int64 `json:"output,omitempty"`
	// CachedInput and CacheWrite price prompt tokens read from and written
	// to the vendor's cache; nil means the Input price.
	CachedInput *int64 `json:"cached_input,omitempty"`
	CacheWrite  *int64 `json:"cache_write,omitempty"`
	// CacheWrite1h prices prompt tokens written to a cache that lives an
	// hour (Anthropic's ephemeral_1h); nil means the CacheWrite price.
	CacheWrite1h *int64 `json:"cache_write_1h,omitempty"`
	// Tiers are the token prices of long prompts (see PriceTier), by
	// ascending Above; a request is billed wholly at the tier its prompt
	// reached, as the vendors charge.
	Tiers []PriceTier `json:"tiers,omitempty"`
	// Request is a flat charge per request, in quota units.
	Request int64 `json:"request,omitempty"`
	// AudioInput and AudioOutput price audio prompt and completion tokens
	// per million (Realtime models); nil means the Input and Output price.
	AudioInput  *int64 `json:"audio_input,omitempty"`
	AudioOutput *int64 `json:"audio_output,omitempty"`
	// SearchUnit is a charge per search unit a rerank upstream reports,
	// in quota units.
	SearchUnit int64 `json:"search_unit,omitempty"`
	// MaxOutput is the most tokens the model writes in one answer: what a
	// request without a limit of its own reserves (and is limited to).
	MaxOutput int64 `json:"max_output,omitempty"`

	// Media prices: images and audio (see media.go).
	//
	// Images are per generated image by size and quality, in quota units;
	// an entry with an empty Size or Quality matches any.
	Images []ImagePrice `json:"images,omitempty"`
	// ImageInput is per million image input tokens (image models billed
	// by tokens); nil means the Input price.
	ImageInput *int64 `json:"image_input,omitempty"`
	// AudioSecond is per second of input audio (transcriptions), in
	// quota units.
	AudioSecond int64 `json:"audio_second,omitempty"`
	// Characters is per million characters of input text (speech).
	Characters int64 `json:"characters,omitempty"`
	// Task-style generation (POST /api/generate/submit), in quota units.
	// Task is a flat charge per finished task; VideoSecond is charged per
	// second of video produced. MaxSeconds is the longest video the vendor
	// makes: a task that names no duration reserves it.
	Task        int64 `json:"task,omitempty"`
	VideoSecond int64 `json:"video_second,omitempty"`
	MaxSeconds  int64 `json:"max_seconds,omitempty"`

	// Batch prices (see batch.go): what a line of a batch costs.
	// BatchInput and BatchOutput are per million prompt and completion
	// tokens; BatchDiscount is a percentage off every token price the two
	// do not set. All unset: a batch line costs what a request does.
	BatchInput    *int64 `json:"batch_input,omitempty"`
	BatchOutput   *int64 `json:"batch_output,omitempty"`
	BatchDiscount int64  `json:"batch_discount,omitempty"`
}

// TaskOnly reports whether the model is priced for tasks alone: relayed
// as a token request it would cost nothing, so the relay refuses it.
func (p *Price) TaskOnly() bool {
	return p != nil && !p.Free && (p.Task > 0 || p.VideoSecond > 0) &&
		p.Input == 0 && p.Output == 0 && p.Request == 0 &&
		p.AudioInput == nil && p.AudioOutput == nil && p.SearchUnit == 0 &&
		len(p.Images) == 0 && p.ImageInput == nil && p.AudioSecond == 0 && p.Characters == 0
}

// Chat reports whether the model is priced as a chat model: free, or by
// output tokens or per request, with no price of another operation
// (images, audio, Realtime, rerank, tasks). An embedding model, priced by
// input alone, is not one.
func (p *Price) Chat() bool {
	if p == nil {
		return false
	}
	other := len(p.Images) > 0 || p.ImageInput != nil || p.AudioInput != nil || p.AudioOutput != nil ||
		p.AudioSecond > 0 || p.Characters > 0 || p.SearchUnit > 0 || p.Task > 0 || p.VideoSecond > 0
	return !other && (p.Free || p.Output > 0 || p.Request > 0)
}

// TaskReservation is what a task holds from submit to its end: the flat
// task price plus every second it may produce, the requested duration or,
// when it names none, the vendor's longest.
func (p *Price) TaskReservation(duration int64) int64 {
	if p == nil || p.Free {
		return 0
	}
	if duration <= 0 {
		duration = p.MaxSeconds
	}
	return TaskCost(p.Task, p.VideoSecond, float64(duration))
}

// TaskCost is a finished task's charge: task + videoSecond x seconds,
// rounded up to a whole unit (fractional seconds count by the
// millisecond), saturating rather than overflowing.
func TaskCost(task, videoSecond int64, seconds float64) int64 {
	cost := max(task, 0)
	if videoSecond <= 0 || !(seconds > 0) {
		return cost
	}
	ms := uint64(math.MaxInt64)
	if seconds < float64(math.MaxInt64)/1000 {
		ms = uint64(math.Ceil(seconds * 1000))
	}
	hi, lo := bits.Mul64(ms, uint64(videoSecond))
	if hi >= 1000 {
		return math.MaxInt64
	}
	q, r := bits.Div64(hi, lo, 1000)
	if r > 0 {
		q++
	}
	if q > uint64(math.MaxInt64-cost) {
		return math.MaxInt64
	}
	return cost + int64(q)
}

// ParseUSD reads a decimal USD amount ("0.15", "2", "0.000001") into quota
// units exactly; more than six decimals cannot be represented and is an error.
func ParseUSD(s string) (int64, error) {
	r, ok := new(big.Rat).SetString(strings.TrimSpace(s))
	if !ok || r.Sign() < 0 {
		return 0, fmt.Errorf("price %q is not a non-negative decimal number of USD", s)
	}
	r.Mul(r, big.NewRat(UnitsPerUSD, 1))
	if !r.IsInt() {
		return 0, fmt.Errorf("price %q has more than six decimals: the quota unit is one micro-dollar", s)
	}
	if !r.Num().IsInt64() {
		return 0, fmt.Errorf("price %q is too large", s)
	}
	return r.Num().Int64(), nil
}

// Cost is the exact charge for usage, in quota units, rounded up to a whole
// unit: sum(tokens * price per million) / 1,000,000, plus the flat charge.
// The token prices are those of the tier the prompt reached (At).
func (p *Price) Cost(u adapters.Usage) int64 {
	if p == nil || p.Free {
		return 0
	}
	if len(p.Tiers) > 0 {
		t := p.At(u.PromptTokens)
		return t.Cost(u)
	}
	cachedPrice, writePrice := p.Input, p.Input
	if p.CachedInput != nil {
		cachedPrice = *p.CachedInput
	}
	if p.CacheWrite != nil {
		writePrice = *p.CacheWrite
	}
	write1hPrice := writePrice
	if p.CacheWrite1h != nil {
		write1hPrice = *p.CacheWrite1h
	}
	write1h := min(max(u.CacheWrite1hTokens, 0), max(u.CacheWriteTokens, 0))
	uncached := u.PromptTokens - u.CachedTokens - u.CacheWriteTokens - u.AudioPromptTokens
	if uncached < 0 {
		uncached = 0
	}
	completion := u.CompletionTokens - u.AudioCompletionTokens
	if completion < 0 {
		completion = 0
	}
	// a 128-bit sum of tokens x price, so no realistic count overflows and
	// nothing is allocated on the request path
	var hi, lo uint64
	add := func(tokens, price int64) {
		if tokens <= 0 || price <= 0 {
			return
		}
		h, l := bits.Mul64(uint64(tokens), uint64(price))
		var carry uint64
		lo, carry = bits.Add64(lo, l, 0)
		hi += h + carry
	}
	add(uncached, p.Input)
	add(u.CachedTokens, cachedPrice)
	add(u.CacheWriteTokens-write1h, writePrice)
	add(write1h, write1hPrice)
	add(completion, p.Output)
	if u.AudioPromptTokens > 0 || u.AudioCompletionTokens > 0 {
		audioIn, audioOut := p.Input, p.Output
		if p.AudioInput != nil {
			audioIn = *p.AudioInput
		}
		if p.AudioOutput != nil {
			audioOut = *p.AudioOutput
		}
		add(u.AudioPromptTokens, audioIn)
		add(u.AudioCompletionTokens, audioOut)
	}
	// ceil(sum / 1e6); a quotient beyond int64 saturates
	if hi >= 1_000_000 {
		return math.MaxInt64
	}
	q, r := bits.Div64(hi, lo, 1_000_000)
	if r > 0 {
		q++
	}
	flat := max(p.Request, 0)
	if u.SearchUnits > 0 && p.SearchUnit > 0 {
		sh, sl := bits.Mul64(uint64(u.SearchUnits), uint64(p.SearchUnit))
		if sh != 0 || sl > math.MaxInt64-uint64(flat) {
			return math.MaxInt64
		}
		flat += int64(sl)
	}
	if q > math.MaxInt64-uint64(flat) {
		return math.MaxInt64
	}
	return int64(q) + flat
}

// MaxTokens is the most tokens one count of one request may claim. An
// upstream reporting more is wrong (no model's context comes near it), and
// its counts are clamped here rather than trusted into the balance.
const MaxTokens = 100_000_000

// Clamp bounds every count of u to [0, MaxTokens].
func Clamp(u adapters.Usage) adapters.Usage {
	c := func(n *int64) { *n = min(max(*n, 0), MaxTokens) }
	c(&u.PromptTokens)
	c(&u.CompletionTokens)
	c(&u.CachedTokens)
	c(&u.CacheWriteTokens)
	c(&u.CacheWrite1hTokens)
	u.CacheWrite1hTokens = min(u.CacheWrite1hTokens, u.CacheWriteTokens)
	c(&u.ReasoningTokens)
	c(&u.AudioPromptTokens)
	c(&u.AudioCompletionTokens)
	c(&u.SearchUnits)
	return u
}

// Affordable is the largest completion allowance, at most want tokens for
// each of choices answers, whose reservation with the prompt estimate fits
// in available:
//
//	max c <= want with Reservation(prompt, c*choices) <= available
//
// 0 when not even the prompt fits. A free model affords want.
func (p *Price) Affordable(prompt, want, choices, available int64) int64 {
	if p == nil || p.Free {
		return want
	}
	if len(p.Tiers) > 0 {
		t := p.At(prompt)
		return t.Affordable(prompt, want, choices, available)
	}
	if p.Output <= 0 {
		return want
	}
	if choices < 1 {
		choices = 1
	}
	budget := available - max(p.Request, 0)
	if budget <= 0 || prompt < 0 {
		return 0
	}
	// (budget*1e6 - prompt*input) / (output*choices), in 128 bits
	bh, bl := bits.Mul64(uint64(budget), 1_000_000)
	if prompt > 0 && p.Input > 0 {
		ph, pl := bits.Mul64(uint64(prompt), uint64(p.Input))
		var borrow uint64
		bl, borrow = bits.Sub64(bl, pl, 0)
		bh, borrow = bits.Sub64(bh, ph, borrow)
		if borrow != 0 {
			return 0
		}
	}
	dh, dl := bits.Mul64(uint64(p.Output), uint64(choices))
	if dh != 0 {
		return 0 // a divisor beyond 64 bits: nothing affordable
	}
	if bh >= dl {
		return want // the quotient exceeds 64 bits
	}
	q, _ := bits.Div64(bh, bl, dl)
	if q > uint64(want) {
		return want
	}
	return int64(q)
}

// Reservation is what a request holds before it runs: its prompt estimate
// at the input price plus its completion allowance at the output price,
// at the tier of the estimate. A caller that knows the prompt may be
// longer than its estimate reserves at p.At(reach) instead.
func (p *Price) Reservation(promptTokens, completionTokens int64) int64 {
	return p.Cost(adapters.Usage{PromptTokens: promptTokens, CompletionTokens: completionTokens})
}
