package store

import (
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

// Migration is one step of a driver's schema history: a file named
// NNNN_what.sql, applied once, in version order.
type Migration struct {
	Version int64
	Name    string
	SQL     string
}

// MigrationsIn is dir of a driver's embedded files, the root its
// LoadMigrations reads.
func MigrationsIn(embedded fs.FS, dir string) fs.FS {
	sub, err := fs.Sub(embedded, dir)
	if err != nil {
		panic(err)
	}
	return sub
}

// LoadMigrations reads every *.sql file in fsys's root, ordered by version.
func LoadMigrations(fsys fs.FS) ([]Migration, error) {
	names, err := fs.Glob(fsys, "*.sql")
	if err != nil {
		return nil, err
	}
	var ms []Migration
	seen := map[int64]string{}
	for _, name := range names {
		num, _, ok := strings.Cut(name, "_")
		v, err := strconv.ParseInt(num, 10, 64)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s: name must be NNNN_description.sql", name)
		}
		if other, dup := seen[v]; dup {
			return nil, fmt.Errorf("migrations %s and %s share version %d", other, name, v)
		}
		seen[v] = name
		body, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, fmt.Errorf("migration %s: %w", name, err)
		}
		ms = append(ms, Migration{Version: v, Name: path.Base(name), SQL: string(body)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	return ms, nil
}
