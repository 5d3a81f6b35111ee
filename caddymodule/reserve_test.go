package caddymodule

import "testing"

// A part reserves the operator's part_tokens when set, else the most the
// model's channels' vendors document, else 1600.
func TestImageTokensByModel(t *testing.T) {
	a := &App{partTokens: map[string]int64{}}
	a.notePartTokens("m", 1120)
	a.notePartTokens("m", 1445)
	a.notePartTokens("m", 1200)
	if got := a.imageTokens("m"); got != 1445 {
		t.Fatalf("the most over the model's channels: %d", got)
	}
	if got := a.imageTokens("unknown"); got != defaultPartTokens {
		t.Fatalf("no vendor figure: %d", got)
	}
	a.PartTokens = 5000
	if got := a.imageTokens("m"); got != 5000 {
		t.Fatalf("part_tokens set: %d", got)
	}
}
