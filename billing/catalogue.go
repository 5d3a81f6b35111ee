package billing

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// A price catalogue is a JSON file of models' prices that an operator
// imports (`caddy gateway prices import`, or `prices_file` in the gateway
// block) instead of copying prices by hand. It is read from disk, never
// fetched. Two shapes are read:
//
//   - CatalogueGateway, the operator's own: an object of models, each the
//     token prices a `price` block takes, USD per million tokens as
//     decimal strings, the same object as the gateway's JSON config holds
//     under "prices":
//     {"gemini-2.5-pro": {"input": "1.25", "output": "10",
//     "tiers": [{"above": 200000, "input": "2.50", "output": "15"}]}}
//   - CatalogueLiteLLM, the public models catalogue's shape
//     (model_prices_and_context_window.json): USD per token as JSON
//     numbers, input_cost_per_token, output_cost_per_token,
//     cache_read_input_token_cost, cache_creation_input_token_cost,
//     cache_creation_input_token_cost_above_1hr, the same names with
//     _above_<n>k_tokens for tiers, and max_output_tokens.
//
// Every amount is converted exactly, as decimal text: a price that needs
// more than six decimals of USD per million tokens is an error, as in a
// Caddyfile.
const (
	CatalogueGateway = "gateway"
	CatalogueLiteLLM = "litellm"
)

// MaxCatalogueSize bounds a catalogue file (the public one is about 1 MB).
const MaxCatalogueSize = 64 << 20

// CatalogueEntry is one model's token prices from a catalogue, USD as
// exact decimal strings, named as the Caddyfile's price options are.
type CatalogueEntry struct {
	Model        string       `json:"-"`
	Free         bool         `json:"free,omitempty"`
	Input        string       `json:"input,omitempty"`
	Output       string       `json:"output,omitempty"`
	CachedInput  string       `json:"cached_input,omitempty"`
	CacheWrite   string       `json:"cache_write,omitempty"`
	CacheWrite1h string       `json:"cache_write_1h,omitempty"`
	Request      string       `json:"request,omitempty"`
	MaxOutput    int64        `json:"max_output,omitempty"`
	Tiers        []TierConfig `json:"tiers,omitempty"`
}

// ReadCatalogue reads a catalogue of format ("" detects it). It returns
// the entries it could read, by model name, and an error naming each
// entry it could not (an entry with no token price, such as an image
// model's in the public catalogue, is left out without one).
func ReadCatalogue(data []byte, format string) ([]*CatalogueEntry, error) {
	if len(data) > MaxCatalogueSize {
		return nil, fmt.Errorf("the catalogue is %d bytes, more than the %d a catalogue may be", len(data), MaxCatalogueSize)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, fmt.Errorf("the catalogue is not a JSON object of models: %w", err)
	}
	if format == "" {
		format = detectCatalogue(raw)
	}
	var read func(model string, v json.RawMessage) (*CatalogueEntry, error)
	switch format {
	case CatalogueGateway:
		read = readGatewayEntry
	case CatalogueLiteLLM:
		read = readLiteLLMEntry
	default:
		return nil, fmt.Errorf("unknown catalogue format %q: use %s or %s", format, CatalogueGateway, CatalogueLiteLLM)
	}
	models := make([]string, 0, len(raw))
	for m := range raw {
		models = append(models, m)
	}
	sort.Strings(models)
	var out []*CatalogueEntry
	var errs []error
	for _, m := range models {
		if strings.TrimSpace(m) == "" || strings.ContainsAny(m, " \t\r\n{}\"") {
			errs = append(errs, &CatalogueError{Model: m, Err: errors.New("not a name a price can have (no spaces, quotes or braces)")})
			continue
		}
		e, err := read(m, raw[m])
		if err != nil {
			errs = append(errs, &CatalogueError{Model: m, Err: err})
			continue
		}
		if e != nil {
			e.Model = m
			out = append(out, e)
		}
	}
	return out, errors.Join(errs...)
}

// CatalogueError is an entry of a catalogue that could not be read.
type CatalogueError struct {
	Model string
	Err   error
}

func (e *CatalogueError) Error() string {
	if strings.ContainsAny(e.Model, " \t\r\n{}\"") || e.Model == "" {
		return fmt.Sprintf("model %q: %v", e.Model, e.Err)
	}
	return fmt.Sprintf("model %s: %v", e.Model, e.Err)
}

func (e *CatalogueError) Unwrap() error { return e.Err }

// detectCatalogue tells the public catalogue (costs per token, its
// sample_spec) from the operator's own.
func detectCatalogue(raw map[string]json.RawMessage) string {
	if _, ok := raw["sample_spec"]; ok {
		return CatalogueLiteLLM
	}
	for _, v := range raw {
		if bytes.Contains(v, []byte(`_cost_per_token"`)) {
			return CatalogueLiteLLM
		}
	}
	return CatalogueGateway
}

func readGatewayEntry(_ string, v json.RawMessage) (*CatalogueEntry, error) {
	e := &CatalogueEntry{}
	dec := json.NewDecoder(bytes.NewReader(v))
	dec.DisallowUnknownFields()
	if err := dec.Decode(e); err != nil {
		return nil, fmt.Errorf("%w (an entry has free, input, output, cached_input, cache_write, cache_write_1h, request, max_output and tiers; prices are USD strings)", err)
	}
	return e, e.Check()
}

// Check reports an entry that a price could not be made of.
func (e *CatalogueEntry) Check() error {
	p, err := e.Price()
	if err != nil {
		return err
	}
	if !p.Free && p.Input == 0 && p.Output == 0 && p.Request == 0 {
		return errors.New("no price: give input, output or request, or mark it free")
	}
	return nil
}

// Price converts the entry to quota units.
func (e *CatalogueEntry) Price() (*Price, error) {
	if e.MaxOutput < 0 {
		return nil, errors.New("max_output must not be negative")
	}
	p := &Price{Free: e.Free, MaxOutput: e.MaxOutput}
	var err error
	usd := func(name, s string, dst *int64) {
		if err == nil && s != "" {
			if *dst, err = ParseUSD(s); err != nil {
				err = fmt.Errorf("%s: %w", name, err)
			}
		}
	}
	opt := func(name, s string, dst **int64) {
		if s != "" {
			var v int64
			usd(name, s, &v)
			*dst = &v
		}
	}
	usd("input", e.Input, &p.Input)
	usd("output", e.Output, &p.Output)
	usd("request", e.Request, &p.Request)
	opt("cached_input", e.CachedInput, &p.CachedInput)
	opt("cache_write", e.CacheWrite, &p.CacheWrite)
	opt("cache_write_1h", e.CacheWrite1h, &p.CacheWrite1h)
	if err != nil {
		return nil, err
	}
	for _, tc := range e.Tiers {
		if tc.Input == "" || tc.Output == "" {
			return nil, fmt.Errorf("tier above %d: a tier needs both its input and output prices", tc.Above)
		}
		t := PriceTier{Above: tc.Above}
		usd("input", tc.Input, &t.Input)
		usd("output", tc.Output, &t.Output)
		opt("cached_input", tc.CachedInput, &t.CachedInput)
		opt("cache_write", tc.CacheWrite, &t.CacheWrite)
		opt("cache_write_1h", tc.CacheWrite1h, &t.CacheWrite1h)
		if err != nil {
			return nil, fmt.Errorf("tier above %d: %w", tc.Above, err)
		}
		p.Tiers = append(p.Tiers, t)
	}
	sort.Slice(p.Tiers, func(i, j int) bool { return p.Tiers[i].Above < p.Tiers[j].Above })
	return p, p.CheckTiers()
}

// tierKey is a public catalogue's tiered price name:
// input_cost_per_token_above_200k_tokens.
var tierKey = regexp.MustCompile(`^(.+)_above_(\d+)k_tokens$`)

// readLiteLLMEntry reads one model of the public catalogue. Only the
// fields that price tokens are read; the rest (context window,
// capabilities, per-image or per-second prices) are not the gateway's.
func readLiteLLMEntry(model string, v json.RawMessage) (*CatalogueEntry, error) {
	if model == "sample_spec" {
		return nil, nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(v, &fields); err != nil {
		return nil, errors.New("not a JSON object")
	}
	e := &CatalogueEntry{}
	tiers := map[int64]*TierConfig{}
	names := map[string]string{
		"input_cost_per_token":                      "input",
		"output_cost_per_token":                     "output",
		"cache_read_input_token_cost":               "cached_input",
		"cache_creation_input_token_cost":           "cache_write",
		"cache_creation_input_token_cost_above_1hr": "cache_write_1h",
	}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		base, above := k, int64(0)
		if m := tierKey.FindStringSubmatch(k); m != nil {
			n, err := strconv.ParseInt(m[2], 10, 64)
			if err != nil || n <= 0 || n > MaxTokens/1000 {
				return nil, fmt.Errorf("%s: not a tier threshold", k)
			}
			base, above = m[1], n*1000
		}
		opt, ok := names[base]
		if !ok {
			continue
		}
		usd, err := usdPerMillion(fields[k])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", k, err)
		}
		if usd == "" {
			continue // null: not priced
		}
		if above == 0 {
			*map[string]*string{"input": &e.Input, "output": &e.Output, "cached_input": &e.CachedInput,
				"cache_write": &e.CacheWrite, "cache_write_1h": &e.CacheWrite1h}[opt] = usd
			continue
		}
		t := tiers[above]
		if t == nil {
			t = &TierConfig{Above: above}
			tiers[above] = t
		}
		*map[string]*string{"input": &t.Input, "output": &t.Output, "cached_input": &t.CachedInput,
			"cache_write": &t.CacheWrite, "cache_write_1h": &t.CacheWrite1h}[opt] = usd
	}
	if unpriced(e.Input) && unpriced(e.Output) {
		return nil, nil // not priced by tokens (or a local model listed at 0)
	}
	if raw, ok := fields["max_output_tokens"]; ok && string(raw) != "null" {
		var n json.Number
		if err := json.Unmarshal(raw, &n); err != nil {
			return nil, fmt.Errorf("max_output_tokens: %s is not a number", raw)
		}
		m, err := n.Int64()
		if err != nil || m < 0 {
			return nil, fmt.Errorf("max_output_tokens: %s is not a whole number of tokens", raw)
		}
		e.MaxOutput = m
	}
	for _, t := range tiers {
		// a tier the catalogue gives one price of keeps the base's other
		t.Input, t.Output = cmp.Or(t.Input, e.Input), cmp.Or(t.Output, e.Output)
		e.Tiers = append(e.Tiers, *t)
	}
	sort.Slice(e.Tiers, func(i, j int) bool { return e.Tiers[i].Above < e.Tiers[j].Above })
	if e.Input == "" {
		e.Input = "0"
	}
	if e.Output == "" {
		e.Output = "0"
	}
	return e, e.Check()
}

// unpriced is a price the public catalogue leaves out or lists as 0.
func unpriced(usd string) bool { return usd == "" || usd == "0" }

// usdPerMillion converts a JSON number of USD per token to an exact decimal
// string of USD per million tokens ("" for null).
func usdPerMillion(raw json.RawMessage) (string, error) {
	s := strings.TrimSpace(string(raw))
	if s == "null" {
		return "", nil
	}
	var n json.Number
	if err := json.Unmarshal(raw, &n); err != nil {
		return "", fmt.Errorf("%s is not a number of USD per token", s)
	}
	r, ok := new(big.Rat).SetString(n.String())
	if !ok || r.Sign() < 0 {
		return "", fmt.Errorf("%s is not a non-negative number of USD per token", s)
	}
	r.Mul(r, big.NewRat(1_000_000, 1))
	out := r.FloatString(6)
	if back, _ := new(big.Rat).SetString(out); back.Cmp(r) != 0 {
		return "", fmt.Errorf("%s USD per token is not a whole number of micro-dollars per million tokens", s)
	}
	out = strings.TrimRight(out, "0")
	return strings.TrimSuffix(out, "."), nil
}

// Caddyfile is the entry as a Caddyfile price block.
func (e *CatalogueEntry) Caddyfile() string {
	var b strings.Builder
	if e.Free {
		fmt.Fprintf(&b, "price %s free\n", e.Model)
		return b.String()
	}
	fmt.Fprintf(&b, "price %s {\n", e.Model)
	line := func(indent, name, v string) {
		if v != "" {
			fmt.Fprintf(&b, "%s%s %s\n", indent, name, v)
		}
	}
	line("\t", "input", e.Input)
	line("\t", "output", e.Output)
	line("\t", "cached_input", e.CachedInput)
	line("\t", "cache_write", e.CacheWrite)
	line("\t", "cache_write_1h", e.CacheWrite1h)
	line("\t", "request", e.Request)
	if e.MaxOutput > 0 {
		line("\t", "max_output", strconv.FormatInt(e.MaxOutput, 10))
	}
	for _, t := range e.Tiers {
		fmt.Fprintf(&b, "\tabove %d {\n", t.Above)
		line("\t\t", "input", t.Input)
		line("\t\t", "output", t.Output)
		line("\t\t", "cached_input", t.CachedInput)
		line("\t\t", "cache_write", t.CacheWrite)
		line("\t\t", "cache_write_1h", t.CacheWrite1h)
		b.WriteString("\t}\n")
	}
	b.WriteString("}\n")
	return b.String()
}
