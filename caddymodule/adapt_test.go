package caddymodule

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	_ "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/caddy-model-gateway/gateway/adapters/all"
)

var update = flag.Bool("update", false, "rewrite the golden JSON files")

// TestAdaptGolden adapts each testdata/adapt/*.caddyfile and compares the
// JSON with the .json beside it (go test -update rewrites them).
func TestAdaptGolden(t *testing.T) {
	files, _ := filepath.Glob("testdata/adapt/*.caddyfile")
	if len(files) == 0 {
		t.Fatal("no golden inputs")
	}
	for _, in := range files {
		t.Run(filepath.Base(in), func(t *testing.T) {
			src, err := os.ReadFile(in)
			if err != nil {
				t.Fatal(err)
			}
			out, warnings, err := caddyconfig.GetAdapter("caddyfile").Adapt(src, map[string]any{"filename": in})
			if err != nil {
				t.Fatal(err)
			}
			if len(warnings) > 0 {
				t.Fatalf("warnings: %v", warnings)
			}
			var pretty bytes.Buffer
			if err := json.Indent(&pretty, out, "", "\t"); err != nil {
				t.Fatal(err)
			}
			pretty.WriteByte('\n')
			golden := strings.TrimSuffix(in, ".caddyfile") + ".json"
			if *update {
				if err := os.WriteFile(golden, pretty.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if !bytes.Equal(pretty.Bytes(), want) {
				t.Fatalf("adapted JSON differs from %s:\n%s", golden, pretty.String())
			}
		})
	}
}

func TestAdaptErrors(t *testing.T) {
	// the families registered, so adding one changes nothing here
	var known []string
	for _, m := range caddy.GetModules("gateway.adapters") {
		known = append(known, m.ID.Name())
	}
	tests := []struct{ name, body, want string }{
		{"channel without type", "channel x {\n models a\n}", "'type' is required"},
		{"bad weight", "channel x {\n type openai\n weight 0\n}", "weight must be an integer above zero"},
		{"unknown option", "colour blue", "unrecognized gateway option"},
		{"price with seven decimals", "price m {\n input 0.0000001\n}", "more than six decimals"},
		{"bad database", "database sqlite", "database takes a driver"},
		{"bad model_map", "channel x {\n type openai\n model_map a\n}", "model_map takes"},
		{"unknown type", "channel x {\n type nosuch\n}", `unknown type "nosuch" (known: ` + strings.Join(known, ", ") + ")"},
		{"flat version", "channel x {\n type anthropic\n version 2023-06-01\n}", "write 'type anthropic { version 2023-06-01 }'"},
		{"options for an adapter without any", "channel x {\n type openai {\n version 1\n }\n}", "the openai adapter takes no options"},
		{"unknown adapter option", "channel x {\n type anthropic {\n colour blue\n }\n}", `unrecognized anthropic adapter option "colour"`},
		{"bad adapter option", "channel x {\n type demo {\n word_delay soon\n }\n}", "word_delay must be a positive duration"},
		{"bad registration", "registration yes", "registration takes 'on' or 'off'"},
		{"negative reward", "invitation_reward -1", "invitation_reward must be a whole number"},
		{"bad session lifetime", "session_lifetime forever", "session_lifetime must be a positive duration"},
		{"bad session maximum", "session_max_lifetime 0s", "session_max_lifetime must be a positive duration"},
		{"negative minimum payment", "invitation_min_payment -5", "invitation_min_payment must be a whole number"},
		{"bad plan codes", "invitation_plan_codes yes", "invitation_plan_codes takes 'on' or 'off'"},
		{"rate limit without window", "account_rate_limit 5", "account_rate_limit takes attempts and a window"},
		{"zero attempts", "account_rate_limit 0 1m", "attempts must be a positive integer"},
		{"registration rate limit without window", "registration_rate_limit 5", "registration_rate_limit takes signups and a window"},
		{"zero signups", "registration_rate_limit 0 1h", "signups must be a positive integer"},
		{"second factor for everyone", "require_second_factor everyone", "require_second_factor takes 'admins'"},
		{"reset link lasting a month", "reset_link_lifetime 30d", "reset_link_lifetime must be a duration from 1m to 7d"},
		{"bad retention", "usage_retention soon", "not a duration such as 90d"},
		{"bad retention batch", "usage_retention 90d {\n batch_size 0\n}", "batch_size must be a positive integer"},
		{"bad health", "health {\n base_ejection never\n}", "base_ejection must be a duration above zero"},
		{"health option without value", "health {\n max_ejection\n}", "wrong argument count"},
		{"bad limit", "limits {\n rpm -1\n}", "rpm must be a whole number"},
		{"unknown limit", "limits {\n rph 5\n}", `unrecognized option "rph"`},
		{"adapter option with two values", "channel x {\n type azure {\n api_version a b\n }\n}", "wrong argument count"},
		{"bad usage queue", "usage {\n queue_size 0\n}", "queue_size must be a positive integer"},
		{"usage option with two values", "usage {\n linger 1s 2s\n}", "wrong argument count"},
		{"unknown metrics option", "metrics {\n per_key\n}", `unrecognized option "per_key"`},
		{"image price without a price", "price m {\n image\n}", "image takes [<size> [<quality>]] <usd per image>"},
		{"image price with too many values", "price m {\n image 1024x1024 hd x 0.04\n}", "image takes"},
		{"image price not a number", "price m {\n image 1024x1024 hd cheap\n}", "not a non-negative decimal"},
		{"bad upload size", "max_upload_size lots", "max_upload_size"},
		{"unknown tasks option", "tasks {\n poll 5s\n}", `tasks: unrecognized option "poll"`},
		{"tasks duration", "tasks {\n max_age soon\n}", "tasks: max_age must be a duration"},
		{"tasks concurrency", "tasks {\n concurrency 0\n}", "tasks: concurrency must be a positive integer"},
		{"max_seconds", "price sora-2 {\n max_seconds many\n}", "max_seconds must be a positive number"},
		{"task price", "price sora-2 {\n task lots\n}", "price sora-2: task"},
		{"cache option", "cache {\n size 1\n}", `cache: unknown option "size"`},
		{"cache bill", "cache {\n bill 50\n}", "cache: bill \"50\": want a share of the price from 0% to 100%"},
		{"cache scope", "cache {\n scope team\n}", "want user, key or shared"},
		{"cache with an argument", "cache on", "wrong argument count"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := "{\n\tgateway {\n" + tt.body + "\n\t}\n}\n:8080 {\n\trespond ok\n}\n"
			_, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(src), nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want %q", err, tt.want)
			}
		})
	}
}

// TestReadmeCaddyfile adapts the Caddyfile shown in the README, so the
// documentation cannot drift from what the parser accepts.
func TestReadmeCaddyfile(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "```caddyfile\n")
	block, _, closed := strings.Cut(rest, "```")
	if !ok || !closed {
		t.Fatal("README has no caddyfile block")
	}
	t.Setenv("OPENAI_API_KEY_2", "sk-second") // {$X} is read when adapting
	out, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(block), nil)
	if err != nil {
		t.Fatalf("the README's Caddyfile does not adapt: %v", err)
	}
	var cfg struct {
		Apps struct {
			Gateway App `json:"gateway"`
		} `json:"apps"`
	}
	if err := json.Unmarshal(out, &cfg); err != nil {
		t.Fatal(err)
	}
	g := cfg.Apps.Gateway
	if len(g.Channels) != 1 || len(g.Channels[0].Keys) != 2 || g.Prices["gpt-4o-mini"].Request == "" || !g.Prices["demo"].Free {
		t.Fatalf("README config adapted to %s", out)
	}
}
