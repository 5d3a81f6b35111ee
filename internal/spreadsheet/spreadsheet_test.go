package spreadsheet

import "testing"

func TestCell(t *testing.T) {
	for in, want := range map[string]string{
		"":                         "",
		"gpt-4o":                   "gpt-4o",
		`=HYPERLINK("http://x")`:   `'=HYPERLINK("http://x")`,
		"+1+cmd|' /C calc'!A0":     "'+1+cmd|' /C calc'!A0",
		"-2+3":                     "'-2+3",
		"@SUM(A1)":                 "'@SUM(A1)",
		"\t=1":                     "'\t=1",
		"\r=1":                     "'\r=1",
		"upstream said: =1":        "upstream said: =1",
		"req-2026-11-28T09:00:00Z": "req-2026-11-28T09:00:00Z",
	} {
		if got := Cell(in); got != want {
			t.Errorf("Cell(%q) = %q, want %q", in, got, want)
		}
	}
}
