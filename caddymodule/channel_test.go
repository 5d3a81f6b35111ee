package caddymodule

import (
	"encoding/json"
	"strings"
	"testing"
)

// The JSON forms of a channel's adapter: the object, the short "type" of an
// adapter without options, and the older flat "version", refused with what
// to write instead.
func TestChannelAdapterForms(t *testing.T) {
	tests := []struct {
		name     string
		channel  string
		wantType string
		wantRaw  string
		wantErr  string
	}{
		{name: "object", channel: `{"name":"c","adapter":{"type":"anthropic","version":"2024-01-01"}}`,
			wantType: "anthropic", wantRaw: `{"type":"anthropic","version":"2024-01-01"}`},
		{name: "short form", channel: `{"name":"c","type":"openai"}`, wantType: "openai", wantRaw: `{"type":"openai"}`},
		{name: "flat version", channel: `{"name":"c","type":"anthropic","version":"2023-06-01"}`,
			wantErr: `write "adapter": {"type": "anthropic", "version": "2023-06-01"}`},
		{name: "both forms", channel: `{"name":"c","type":"openai","adapter":{"type":"openai"}}`, wantErr: "give its type once"},
		{name: "no type", channel: `{"name":"c"}`, wantErr: "its adapter is required"},
		{name: "adapter without type", channel: `{"name":"c","adapter":{"version":"x"}}`, wantErr: `needs a "type"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var cc ChannelConfig
			if err := json.Unmarshal([]byte(tt.channel), &cc); err != nil {
				t.Fatal(err)
			}
			typ, err := cc.adapterType()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if typ != tt.wantType || string(cc.AdapterRaw) != tt.wantRaw {
				t.Errorf("type %q raw %s, want %q %s", typ, cc.AdapterRaw, tt.wantType, tt.wantRaw)
			}
		})
	}
}
