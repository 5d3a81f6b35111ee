package engine

import "testing"

// A part reserves the operator's part_tokens when set, else the most the
// model's channels' vendors document, else 1600.
func TestImageTokensByModel(t *testing.T) {
	p := &ImageParts{}
	p.Note("m", 1120)
	p.Note("m", 1445)
	p.Note("m", 1200)
	if got := p.Tokens("m"); got != 1445 {
		t.Fatalf("the most over the model's channels: %d", got)
	}
	if got := p.Tokens("unknown"); got != DefaultPartTokens {
		t.Fatalf("no vendor figure: %d", got)
	}
	p.Fixed = 5000
	if got := p.Tokens("m"); got != 5000 {
		t.Fatalf("part_tokens set: %d", got)
	}
}
