package billing

import (
	"fmt"
	"strconv"

	"go.uber.org/zap"
)

// The options of a Caddyfile price block, as the configuration's price
// structs take them: caddymodule reads the block's lines, these say what
// each option sets and which values it takes.

// Set sets the option opt of model's price block, one that takes a
// single value (`input 0.15`, `max_output 16384`, `batch_discount 50%`),
// checking the value; an error names the model.
func (pc *PriceConfig) Set(model, opt, v string) error {
	switch opt {
	case "input":
		pc.Input = v
	case "output":
		pc.Output = v
	case "cached_input":
		pc.CachedInput = v
	case "cache_write":
		pc.CacheWrite = v
	case "cache_write_1h":
		pc.CacheWrite1h = v
	case "request":
		pc.Request = v
	case "audio_input":
		pc.AudioInput = v
	case "audio_output":
		pc.AudioOutput = v
	case "search_unit":
		pc.SearchUnit = v
	case "image_input":
		pc.ImageInput = v
	case "audio_second":
		pc.AudioSecond = v
	case "characters":
		pc.Characters = v
	case "task":
		pc.Task = v
	case "video_second":
		pc.VideoSecond = v
	case "max_seconds":
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return fmt.Errorf("price %s: max_seconds must be a positive number of seconds, not %q", model, v)
		}
		pc.MaxSeconds = n
		return nil
	case "batch_input", "batch_output", "batch_discount":
		if err := pc.setBatch(opt, v); err != nil {
			return fmt.Errorf("price %s: %v", model, err)
		}
		return nil
	case "max_output":
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return fmt.Errorf("price %s: max_output must be a positive number of tokens, not %q", model, v)
		}
		pc.MaxOutput = n
		return nil
	default:
		return fmt.Errorf("price %s: unrecognized option %q", model, opt)
	}
	if _, err := (&PriceConfig{Input: v}).Price(); err != nil {
		return fmt.Errorf("price %s: %s: %v", model, opt, err)
	}
	return nil
}

// setBatch sets a price's batch terms: `batch_input <usd>`,
// `batch_output <usd>` (per million tokens) and `batch_discount <n>%`.
func (pc *PriceConfig) setBatch(opt, v string) error {
	switch opt {
	case "batch_input":
		pc.BatchInput = v
	case "batch_output":
		pc.BatchOutput = v
	case "batch_discount":
		if _, err := ParseDiscount(v); err != nil {
			return err
		}
		pc.BatchDiscount = v
		return nil
	}
	if _, err := ParseUSD(v); err != nil {
		return fmt.Errorf("%s: %w", opt, err)
	}
	return nil
}

// Set sets one price of a tier (`above <tokens> { input <usd> ... }`):
// input, output, cached_input, cache_write or cache_write_1h, in USD per
// million tokens.
func (tc *TierConfig) Set(opt, v string) error {
	dst := map[string]*string{"input": &tc.Input, "output": &tc.Output, "cached_input": &tc.CachedInput,
		"cache_write": &tc.CacheWrite, "cache_write_1h": &tc.CacheWrite1h}[opt]
	if dst == nil {
		return fmt.Errorf("unrecognized option %q (a tier has input, output, cached_input, cache_write, cache_write_1h)", opt)
	}
	if _, err := ParseUSD(v); err != nil {
		return fmt.Errorf("%s: %v", opt, err)
	}
	*dst = v
	return nil
}

// ParseImagePrice reads the values of an `image [<size> [<quality>]]
// <usd>` line; "*" stands for any size or quality.
func ParseImagePrice(args []string) (ImagePriceConfig, error) {
	if len(args) < 1 || len(args) > 3 {
		return ImagePriceConfig{}, fmt.Errorf("image takes [<size> [<quality>]] <usd per image>, e.g. 'image 1024x1024 hd 0.08'")
	}
	ic := ImagePriceConfig{Price: args[len(args)-1]}
	if len(args) > 1 && args[0] != "*" {
		ic.Size = args[0]
	}
	if len(args) > 2 && args[1] != "*" {
		ic.Quality = args[1]
	}
	if _, err := ParseUSD(ic.Price); err != nil {
		return ImagePriceConfig{}, fmt.Errorf("image: %v", err)
	}
	return ic, nil
}

// BuildPrices converts the configuration's prices, then prices from the
// catalogues files the models those do not price, logging what each
// catalogue added.
func BuildPrices(configs map[string]*PriceConfig, files []PriceFile, log *zap.Logger) (map[string]*Price, error) {
	prices, err := ConfigPrices(configs)
	if err != nil {
		return nil, err
	}
	for _, pf := range files {
		n, err := pf.AddTo(prices)
		if err != nil {
			return nil, err
		}
		log.Info("prices read from a catalogue", zap.String("file", pf.Path), zap.Int("models", n))
	}
	return prices, nil
}
