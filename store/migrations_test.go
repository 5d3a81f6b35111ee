package store

import (
	"testing"
	"testing/fstest"
)

func TestLoadMigrationsRejectsBadNames(t *testing.T) {
	tests := map[string]fstest.MapFS{
		"no number":       {"init.sql": {}},
		"zero":            {"0000_init.sql": {}},
		"shared version":  {"0001_a.sql": {}, "1_b.sql": {}},
		"not a number":    {"v1_init.sql": {}},
		"missing divider": {"0001.sql": {}},
	}
	for name, fsys := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := LoadMigrations(fsys); err == nil {
				t.Fatal("accepted")
			}
		})
	}
}
