package web

import (
	"io/fs"
	"regexp"
	"strings"
	"testing"
)

// TestEveryTextHasBothLanguages: each key a page marks (data-i18n...) or
// a script asks for (t('key'), tr('key', ...)) is in i18n.js's
// dictionary, in English and in Chinese, so no page shows a bare key.
func TestEveryTextHasBothLanguages(t *testing.T) {
	dict, err := fs.ReadFile(Files, "i18n.js")
	if err != nil {
		t.Fatal(err)
	}
	entries := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^\s*"([^"]+)": \{ (en: .*) \},$`).FindAllStringSubmatch(string(dict), -1) {
		entries[m[1]] = m[2]
	}
	if len(entries) < 100 {
		t.Fatalf("read only %d dictionary entries: has i18n.js's layout changed?", len(entries))
	}
	for key, both := range entries {
		if !strings.Contains(both, `en: "`) || !strings.Contains(both, `, zh: "`) || strings.Contains(both, `zh: ""`) {
			t.Errorf("%s is not in both languages: %s", key, both)
		}
	}
	marked := regexp.MustCompile(`data-i18n(?:-[a-z-]+)?="([^"]+)"`)
	asked := regexp.MustCompile(`\b(?:t|tr)\('([^']+)'`)
	files, _ := fs.Glob(Files, "*")
	for _, name := range files {
		if name == "i18n.js" || !strings.HasSuffix(name, ".html") && !strings.HasSuffix(name, ".js") {
			continue
		}
		src, err := fs.ReadFile(Files, name)
		if err != nil {
			t.Fatal(err)
		}
		for _, re := range []*regexp.Regexp{marked, asked} {
			for _, m := range re.FindAllStringSubmatch(string(src), -1) {
				// keys built at run time ('sso.error.' + reason) end in a dot
				if key := m[1]; !strings.HasSuffix(key, ".") && entries[key] == "" {
					t.Errorf("%s uses %q, which the dictionary lacks", name, key)
				}
			}
		}
	}
	// the keys composed at run time
	for _, key := range []string{"sso.error.domain_not_allowed", "sso.error.other", "status.enabled", "status.disabled",
		"price.input", "price.audio_second", "keys.enableNamed", "keys.disableNamed"} {
		if entries[key] == "" {
			t.Errorf("the dictionary lacks %q", key)
		}
	}
}
