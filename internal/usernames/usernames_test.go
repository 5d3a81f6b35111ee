package usernames

import "testing"

func TestKey(t *testing.T) {
	same := [][2]string{
		{"root", "Root"},
		{"root", "ROOT"},
		{"root", "rооt"},     // Cyrillic о
		{"root", "ｒｏｏｔ"},     // fullwidth
		{"admin", "аdmin"},   // Cyrillic а
		{"paypal", "раураl"}, // Cyrillic р, а, у
		{"alice@corp.example", "Alice@Corp.Example"},
		{"strasse", "STRASSE"},
		{"straße", "STRASSE"}, // ß folds to ss
		{"kappa", "κappa"},    // Greek κ
		{"ﬁle", "file"},       // the ligature
	}
	for _, p := range same {
		if Key(p[0]) != Key(p[1]) {
			t.Errorf("Key(%q) = %q, Key(%q) = %q: want the same", p[0], Key(p[0]), p[1], Key(p[1]))
		}
	}
	differ := [][2]string{{"root", "r00t"}, {"alice", "alicia"}, {"张三", "李四"}, {"пётр", "петр"}}
	for _, p := range differ {
		if Key(p[0]) == Key(p[1]) {
			t.Errorf("Key(%q) = Key(%q) = %q: want them apart", p[0], p[1], Key(p[0]))
		}
	}
}

func TestCheckScripts(t *testing.T) {
	for _, name := range []string{"root", "alice@corp.example", "пётр", "ελένη", "山田太郎", "やまだ_taro", "user-42", "김철수"} {
		if a, b, ok := CheckScripts(name); !ok {
			t.Errorf("CheckScripts(%q) refused %s and %s", name, a, b)
		}
	}
	for _, name := range []string{"rооt", "аdmin", "pаypal", "κappa", "Ρoot"} {
		if _, _, ok := CheckScripts(name); ok {
			t.Errorf("CheckScripts(%q) let a mixed name through", name)
		}
	}
}
