// Package usernames says when two usernames are the same name to a person:
// the comparison the store keeps unique (Key) and the names no one may
// take because they pass for another (CheckScripts). It is pure logic,
// shared by the account policy and the store, and imports neither.
package usernames

import (
	"strings"
	"unicode"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// Key is the form two names share when a person would read them as the
// same: compatibility-normalised (NFKC: "ｒｏｏｔ" is "root"), case-folded
// ("Root" is "root"), and with the Cyrillic and Greek letters that look
// like Latin ones taken as those ("rооt" with Cyrillic о is "root"). The
// store keeps it unique, so no one registers a look-alike of a name taken.
func Key(name string) string {
	folded := norm.NFKC.String(cases.Fold().String(norm.NFKC.String(name)))
	var b strings.Builder
	b.Grow(len(folded))
	for _, r := range folded {
		if l, ok := latinLookalike[r]; ok {
			r = l
		}
		b.WriteRune(r)
	}
	return b.String()
}

// latinLookalike maps the lowercase Cyrillic and Greek letters (names
// are case-folded first) whose small or capital form a reader takes for
// a Latin letter. It errs on the wide side: a false match only refuses a
// new name, never touches an existing one.
var latinLookalike = map[rune]rune{
	// Cyrillic
	'а': 'a', 'в': 'b', 'с': 'c', 'ԁ': 'd', 'е': 'e', 'һ': 'h', 'н': 'h',
	'і': 'i', 'ј': 'j', 'к': 'k', 'ӏ': 'l', 'м': 'm', 'о': 'o', 'р': 'p',
	'ԛ': 'q', 'ѕ': 's', 'т': 't', 'у': 'y', 'ү': 'y', 'х': 'x', 'ԝ': 'w', 'ь': 'b',
	'з': '3', 'г': 'r',
	// Greek
	'α': 'a', 'β': 'b', 'ε': 'e', 'ζ': 'z', 'η': 'h', 'ι': 'i', 'κ': 'k', 'μ': 'm',
	'ν': 'v', 'ο': 'o', 'ρ': 'p', 'τ': 't', 'υ': 'y', 'χ': 'x', 'ϲ': 'c', 'ϳ': 'j',
}

// alphabets are the scripts whose letters pass for each other's; a name
// may use one of them. Others (Han, Kana, Hangul, Arabic, ...) are
// neither refused nor mixed-checked: their mixtures are ordinary writing.
var alphabets = []struct {
	name  string
	table *unicode.RangeTable
}{
	{"Latin", unicode.Latin},
	{"Cyrillic", unicode.Cyrillic},
	{"Greek", unicode.Greek},
	{"Armenian", unicode.Armenian},
	{"Cherokee", unicode.Cherokee},
}

// CheckScripts returns the two alphabets a name mixes, if it does
// ("rооt": Latin and Cyrillic), so a new name cannot pass for another by
// swapping in a letter of another alphabet; ok when it mixes none.
func CheckScripts(name string) (first, second string, ok bool) {
	seen := -1
	for _, r := range norm.NFKC.String(name) {
		for i, a := range alphabets {
			if !unicode.Is(a.table, r) {
				continue
			}
			if seen >= 0 && seen != i {
				return alphabets[seen].name, a.name, false
			}
			seen = i
			break
		}
	}
	return "", "", true
}
