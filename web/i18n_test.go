package web

import (
	"html/template"
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
		"price.input", "price.audio_second", "keys.enableNamed", "keys.disableNamed",
		"log.f.Time", "log.f.Request_id", "log.f.Upstream_request_id", "log.f.Counted_by"} {
		if entries[key] == "" {
			t.Errorf("the dictionary lacks %q", key)
		}
	}
}

// TestEnglishDefaultsMatchTheDictionary: a script's tr('key', 'English')
// shows the English when the dictionary is not loaded; it must be the
// dictionary's English, or a page reads differently with and without it.
func TestEnglishDefaultsMatchTheDictionary(t *testing.T) {
	dict, err := fs.ReadFile(Files, "i18n.js")
	if err != nil {
		t.Fatal(err)
	}
	english := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^\s*"([^"]+)": \{ en: "((?:[^"\\]|\\.)*)"`).FindAllStringSubmatch(string(dict), -1) {
		english[m[1]] = unescapeJS(m[2])
	}
	call := regexp.MustCompile(`\btr\('([^']+)', (?:'((?:[^'\\]|\\.)*)'|"((?:[^"\\]|\\.)*)")`)
	files, _ := fs.Glob(Files, "*.js")
	checked := 0
	for _, name := range files {
		src, err := fs.ReadFile(Files, name)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range call.FindAllStringSubmatch(string(src), -1) {
			key, def := m[1], unescapeJS(m[2]+m[3])
			if strings.HasSuffix(key, ".") {
				continue // composed at run time
			}
			checked++
			if want, ok := english[key]; ok && want != def {
				t.Errorf("%s: tr(%q) defaults to %q, the dictionary says %q", name, key, def, want)
			}
		}
	}
	if checked < 50 {
		t.Fatalf("checked only %d tr() calls: has the scripts' layout changed?", checked)
	}
}

// TestOperatorPagesLoadTheDictionary: every page marked for translation
// loads i18n.js before the scripts that ask it.
func TestOperatorPagesLoadTheDictionary(t *testing.T) {
	// the pages as served: templates, with the partials they include
	tmpl, err := template.ParseFS(Files, "*.html")
	if err != nil {
		t.Fatal(err)
	}
	pages, _ := fs.Glob(Files, "*.html")
	for _, name := range pages {
		if name == "partials.html" {
			continue
		}
		var b strings.Builder
		if err := tmpl.ExecuteTemplate(&b, name, struct {
			BaseURL, Origin string
			Registration    bool
		}{}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		page := b.String()
		if !strings.HasPrefix(page, "<!doctype html>") {
			t.Errorf("%s does not begin with its doctype", name)
		}
		if !strings.Contains(page, "data-i18n") {
			t.Errorf("%s has no text marked for translation", name)
			continue
		}
		dict, common := strings.Index(page, "/console/assets/i18n.js"), strings.Index(page, "/console/assets/common.js")
		if dict < 0 || common >= 0 && common < dict {
			t.Errorf("%s does not load i18n.js before common.js", name)
		}
	}
}

func unescapeJS(s string) string {
	return strings.NewReplacer(`\'`, `'`, `\"`, `"`, `\\`, `\`).Replace(s)
}
