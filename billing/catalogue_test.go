package billing

import (
	"os"
	"strings"
	"testing"

	"github.com/caddy-model-gateway/gateway/adapters"
)

// The public catalogue's shape: per-token numbers converted exactly, its
// tiers and 1-hour writes read (the two crossed too), service-tier
// variants (_priority, _flex) and models priced otherwise left out.
func TestReadLiteLLMCatalogue(t *testing.T) {
	data, err := os.ReadFile("testdata/litellm_catalogue.json")
	if err != nil {
		t.Fatal(err)
	}
	entries, err := ReadCatalogue(data, "")
	if err != nil {
		t.Fatal(err)
	}
	byModel := map[string]*CatalogueEntry{}
	var names []string
	for _, e := range entries {
		byModel[e.Model] = e
		names = append(names, e.Model)
	}
	if strings.Join(names, ",") != "claude-sonnet-4-5,gemini-2.5-pro,gpt-4o-mini,text-embedding-3-small" {
		t.Fatalf("models %v", names)
	}
	mini := byModel["gpt-4o-mini"]
	if mini.Input != "0.15" || mini.Output != "0.6" || mini.CachedInput != "0.075" || mini.MaxOutput != 16384 {
		t.Errorf("gpt-4o-mini %+v", mini)
	}
	want := `price claude-sonnet-4-5 {
	input 3
	output 15
	cached_input 0.3
	cache_write 3.75
	cache_write_1h 6
	max_output 64000
	above 200000 {
		input 6
		output 22.5
		cached_input 0.6
		cache_write 7.5
		cache_write_1h 12
	}
}
`
	if got := byModel["claude-sonnet-4-5"].Caddyfile(); got != want {
		t.Errorf("Caddyfile:\n%s\nwant:\n%s", got, want)
	}
	p, err := byModel["gemini-2.5-pro"].Price()
	if err != nil {
		t.Fatal(err)
	}
	// 250k prompt tokens and 1000 out at the tier: 250000*2.5 + 1000*15
	if got := p.Cost(adapters.Usage{PromptTokens: 250_000, CompletionTokens: 1000}); got != 640_000 {
		t.Errorf("imported tier's cost %d", got)
	}
	if e := byModel["text-embedding-3-small"]; e.Input != "0.02" || e.Output != "0" {
		t.Errorf("embedding %+v", e)
	}
}

// Malformed entries are named, each with what is wrong; the rest are
// read.
func TestCatalogueErrors(t *testing.T) {
	for _, c := range []struct {
		name, format, in, want string
	}{
		{"not json", "", `[1,2]`, "not a JSON object of models"},
		{"string cost", CatalogueLiteLLM, `{"m": {"input_cost_per_token": "cheap"}}`, `model m: input_cost_per_token: "cheap" is not a number`},
		{"negative", CatalogueLiteLLM, `{"m": {"input_cost_per_token": -1e-6}}`, "model m: input_cost_per_token: -1e-6 is not a non-negative"},
		{"too precise", CatalogueLiteLLM, `{"m": {"input_cost_per_token": 1.0000001e-06}}`, "not a whole number of micro-dollars"},
		{"bad max output", CatalogueLiteLLM, `{"m": {"input_cost_per_token": 1e-6, "max_output_tokens": 1.5}}`, "max_output_tokens: 1.5 is not a whole number"},
		{"unknown option", CatalogueGateway, `{"m": {"input": "1", "inptu": "2"}}`, `model m: json: unknown field "inptu"`},
		{"number price", CatalogueGateway, `{"m": {"input": 1}}`, "model m: json: cannot unmarshal number"},
		{"no price", CatalogueGateway, `{"m": {"max_output": 5}}`, "model m: no price"},
		{"tier without output", CatalogueGateway, `{"m": {"input": "1", "output": "2", "tiers": [{"above": 10, "input": "2"}]}}`, "tier above 10: a tier needs both"},
		{"tier twice", CatalogueGateway, `{"m": {"input": "1", "output": "2", "tiers": [{"above": 10, "input": "2", "output": "3"}, {"above": 10, "input": "2", "output": "3"}]}}`, "each threshold once"},
		{"bad name", CatalogueGateway, `{"a b": {"input": "1"}}`, `model "a b": not a name`},
		{"format", "csv", `{}`, `unknown catalogue format "csv"`},
	} {
		_, err := ReadCatalogue([]byte(c.in), c.format)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	// a bad entry leaves the good ones
	entries, err := ReadCatalogue([]byte(`{"good": {"input": "1", "output": "2", "tiers": [{"above": 5, "input": "2", "output": "4"}]}, "bad": {"input": "x"}}`), "")
	if err == nil || len(entries) != 1 || entries[0].Model != "good" || len(entries[0].Tiers) != 1 {
		t.Errorf("%v %+v", err, entries)
	}
}
