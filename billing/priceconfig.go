package billing

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
)

// PriceConfig is a model's price in USD as the configuration gives it
// (a Caddyfile `price` block, the JSON config's "prices"), as decimal
// strings so that no float rounding touches money. Price converts it.
type PriceConfig struct {
	Free bool `json:"free,omitempty"`
	// Input and Output are USD per million tokens.
	Input       string `json:"input,omitempty"`
	Output      string `json:"output,omitempty"`
	CachedInput string `json:"cached_input,omitempty"`
	CacheWrite  string `json:"cache_write,omitempty"`
	// CacheWrite1h is USD per million tokens written to a 1-hour cache;
	// unset, they cost what cache_write says.
	CacheWrite1h string `json:"cache_write_1h,omitempty"`
	// Tiers are the token prices of prompts longer than a threshold
	// (tiers.go).
	Tiers []TierConfig `json:"tiers,omitempty"`
	// Request is USD per request.
	Request string `json:"request,omitempty"`
	// AudioInput and AudioOutput are USD per million audio tokens
	// (Realtime models); unset, audio costs what text does.
	AudioInput  string `json:"audio_input,omitempty"`
	AudioOutput string `json:"audio_output,omitempty"`
	// SearchUnit is USD per search unit a rerank upstream reports.
	SearchUnit string `json:"search_unit,omitempty"`
	// MaxOutput is the model's maximum output in tokens (the vendor's
	// documented limit): a request without max_tokens reserves it.
	MaxOutput int64 `json:"max_output,omitempty"`

	// Media prices (images and audio; see media.go).
	//
	// Images are USD per generated image by size and quality; an entry
	// without a size or quality matches any.
	Images []ImagePriceConfig `json:"images,omitempty"`
	// ImageInput is USD per million image input tokens (image models
	// billed by tokens); default the input price.
	ImageInput string `json:"image_input,omitempty"`
	// AudioSecond is USD per second of input audio (transcriptions).
	AudioSecond string `json:"audio_second,omitempty"`
	// Characters is USD per million characters of input text (speech).
	Characters string `json:"characters,omitempty"`
	// Task-style generation: Task is USD per finished task, VideoSecond
	// USD per second of video; MaxSeconds is the vendor's longest video,
	// reserved by a task that names no duration (required with
	// VideoSecond).
	Task        string `json:"task,omitempty"`
	VideoSecond string `json:"video_second,omitempty"`
	MaxSeconds  int64  `json:"max_seconds,omitempty"`

	// Batch prices (docs/batches.md): BatchInput and BatchOutput are USD
	// per million tokens of a batch line; BatchDiscount is a percentage
	// ("50%") off every other price of a batch line.
	BatchInput    string `json:"batch_input,omitempty"`
	BatchOutput   string `json:"batch_output,omitempty"`
	BatchDiscount string `json:"batch_discount,omitempty"`
}

// ImagePriceConfig is one `image [<size> [<quality>]] <usd>` line.
type ImagePriceConfig struct {
	Size    string `json:"size,omitempty"`
	Quality string `json:"quality,omitempty"`
	Price   string `json:"price"`
}

// ConfigPrices converts a configuration's prices by model; an error
// names the model.
func ConfigPrices(prices map[string]*PriceConfig) (map[string]*Price, error) {
	out := make(map[string]*Price, len(prices))
	for model, pc := range prices {
		p, err := pc.Price()
		if err != nil {
			return nil, fmt.Errorf("price %s: %w", model, err)
		}
		out[model] = p
	}
	return out, nil
}

// Price converts the configuration to quota units, checking what no
// price can be (a negative amount, tiers that cannot be billed by, a
// per-second video price with no longest video).
func (pc *PriceConfig) Price() (*Price, error) {
	if pc.MaxOutput < 0 {
		return nil, fmt.Errorf("max_output must not be negative")
	}
	p := &Price{Free: pc.Free, MaxOutput: pc.MaxOutput}
	parse := func(name, s string) (int64, error) {
		if s == "" {
			return 0, nil
		}
		v, err := ParseUSD(s)
		if err != nil {
			return 0, fmt.Errorf("%s: %w", name, err)
		}
		return v, nil
	}
	var err error
	if p.Input, err = parse("input", pc.Input); err != nil {
		return nil, err
	}
	if p.Output, err = parse("output", pc.Output); err != nil {
		return nil, err
	}
	if pc.CachedInput != "" {
		v, err := parse("cached_input", pc.CachedInput)
		if err != nil {
			return nil, err
		}
		p.CachedInput = &v
	}
	if pc.CacheWrite != "" {
		v, err := parse("cache_write", pc.CacheWrite)
		if err != nil {
			return nil, err
		}
		p.CacheWrite = &v
	}
	if err := pc.tierPrices(p, parse); err != nil {
		return nil, err
	}
	for name, field := range map[string]struct {
		s   string
		dst **int64
	}{"audio_input": {pc.AudioInput, &p.AudioInput}, "audio_output": {pc.AudioOutput, &p.AudioOutput}} {
		if field.s != "" {
			v, err := parse(name, field.s)
			if err != nil {
				return nil, err
			}
			*field.dst = &v
		}
	}
	// per-request and per-search-unit prices are USD, the others USD per
	// million tokens
	if p.Request, err = parse("request", pc.Request); err != nil {
		return nil, err
	}
	if p.SearchUnit, err = parse("search_unit", pc.SearchUnit); err != nil {
		return nil, err
	}
	if err := pc.mediaPrice(p, parse); err != nil {
		return nil, err
	}
	if p.Task, err = parse("task", pc.Task); err != nil {
		return nil, err
	}
	if p.VideoSecond, err = parse("video_second", pc.VideoSecond); err != nil {
		return nil, err
	}
	if pc.MaxSeconds < 0 {
		return nil, fmt.Errorf("max_seconds must not be negative")
	}
	p.MaxSeconds = pc.MaxSeconds
	if err := pc.batchPrice(p, parse); err != nil {
		return nil, err
	}
	if p.VideoSecond > 0 && p.MaxSeconds == 0 {
		return nil, fmt.Errorf("video_second needs max_seconds, the longest video the vendor makes: a task that names no duration reserves it")
	}
	return p, nil
}

// tierPrices fills p's 1-hour cache write price and its tiers.
func (pc *PriceConfig) tierPrices(p *Price, parse func(name, s string) (int64, error)) error {
	optional := func(name, s string) (*int64, error) {
		if s == "" {
			return nil, nil
		}
		v, err := parse(name, s)
		return &v, err
	}
	var err error
	if p.CacheWrite1h, err = optional("cache_write_1h", pc.CacheWrite1h); err != nil {
		return err
	}
	for _, tc := range pc.Tiers {
		if tc.Input == "" || tc.Output == "" {
			return fmt.Errorf("above %d: a tier needs both its input and output prices", tc.Above)
		}
		t := PriceTier{Above: tc.Above}
		for _, f := range []struct {
			name, s string
			dst     *int64
		}{{"input", tc.Input, &t.Input}, {"output", tc.Output, &t.Output}} {
			if *f.dst, err = parse(f.name, f.s); err != nil {
				return fmt.Errorf("above %d: %w", tc.Above, err)
			}
		}
		for _, f := range []struct {
			name, s string
			dst     **int64
		}{{"cached_input", tc.CachedInput, &t.CachedInput}, {"cache_write", tc.CacheWrite, &t.CacheWrite}, {"cache_write_1h", tc.CacheWrite1h, &t.CacheWrite1h}} {
			if *f.dst, err = optional(f.name, f.s); err != nil {
				return fmt.Errorf("above %d: %w", tc.Above, err)
			}
		}
		p.Tiers = append(p.Tiers, t)
	}
	slices.SortFunc(p.Tiers, func(a, b PriceTier) int { return cmp.Compare(a.Above, b.Above) })
	return p.CheckTiers()
}

// mediaPrice fills the media prices of p.
func (pc *PriceConfig) mediaPrice(p *Price, parse func(name, s string) (int64, error)) error {
	for _, ic := range pc.Images {
		v, err := parse("image", ic.Price)
		if err != nil {
			return err
		}
		p.Images = append(p.Images, ImagePrice{Size: ic.Size, Quality: ic.Quality, Price: v})
	}
	var err error
	if pc.ImageInput != "" {
		v, err := parse("image_input", pc.ImageInput)
		if err != nil {
			return err
		}
		p.ImageInput = &v
	}
	if p.AudioSecond, err = parse("audio_second", pc.AudioSecond); err != nil {
		return err
	}
	if p.Characters, err = parse("characters", pc.Characters); err != nil {
		return err
	}
	return nil
}

// batchPrice sets p's batch terms from the configuration.
func (pc *PriceConfig) batchPrice(p *Price, parse func(name, s string) (int64, error)) error {
	for name, field := range map[string]struct {
		s   string
		dst **int64
	}{"batch_input": {pc.BatchInput, &p.BatchInput}, "batch_output": {pc.BatchOutput, &p.BatchOutput}} {
		if field.s != "" {
			v, err := parse(name, field.s)
			if err != nil {
				return err
			}
			*field.dst = &v
		}
	}
	if pc.BatchDiscount != "" {
		n, err := ParseDiscount(pc.BatchDiscount)
		if err != nil {
			return err
		}
		p.BatchDiscount = n
	}
	return nil
}

// ParseDiscount reads a batch discount, a whole percentage from 0 to 100,
// "50%" or "50".
func ParseDiscount(v string) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), "%"), 10, 64)
	if err != nil || n < 0 || n > 100 {
		return 0, fmt.Errorf("batch_discount must be a whole percentage from 0 to 100 such as 50%%, not %q", v)
	}
	return n, nil
}

// PriceFile is a price catalogue on disk (ReadCatalogue's formats):
// `prices_file <path> [<model glob>...]`. It is read at every load, so a
// reload takes its changes; it is never fetched.
type PriceFile struct {
	Path string `json:"path"`
	// Format is gateway or litellm; empty detects it
	Format string `json:"format,omitempty"`
	// Models keeps the catalogue's models matching one of these globs
	// (path.Match's); empty keeps every model
	Models []string `json:"models,omitempty"`
}

// AddTo reads the file and prices, from it, the kept models prices does
// not price yet (the configuration's own price blocks and earlier files
// win), returning how many it added. A bad entry of a model the file is
// kept to is an error; other models' are not looked at.
func (pf *PriceFile) AddTo(prices map[string]*Price) (int, error) {
	data, err := os.ReadFile(pf.Path)
	if err != nil {
		return 0, fmt.Errorf("prices_file: %w", err)
	}
	if len(data) > MaxCatalogueSize {
		return 0, fmt.Errorf("prices_file %s: %d bytes, more than the %d a catalogue may be", pf.Path, len(data), MaxCatalogueSize)
	}
	entries, bad := ReadCatalogue(data, pf.Format)
	if bad != nil && !errors.As(bad, new(*CatalogueError)) {
		return 0, fmt.Errorf("prices_file %s: %w", pf.Path, bad)
	}
	for _, err := range unjoined(bad) {
		var ce *CatalogueError
		if errors.As(err, &ce) && pf.keeps(ce.Model) {
			return 0, fmt.Errorf("prices_file %s: %w", pf.Path, err)
		}
	}
	n := 0
	for _, e := range entries {
		if !pf.keeps(e.Model) {
			continue
		}
		if _, own := prices[e.Model]; own {
			continue
		}
		p, err := e.Price()
		if err != nil {
			return n, fmt.Errorf("prices_file %s: model %s: %w", pf.Path, e.Model, err)
		}
		prices[e.Model] = p
		n++
	}
	return n, nil
}

// keeps reports whether model matches one of the file's globs (none: all).
func (pf *PriceFile) keeps(model string) bool {
	if len(pf.Models) == 0 {
		return true
	}
	for _, g := range pf.Models {
		if ok, _ := path.Match(g, model); ok {
			return true
		}
	}
	return false
}

func unjoined(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	if err != nil {
		return []error{err}
	}
	return nil
}
