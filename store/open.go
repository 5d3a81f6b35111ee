package store

import (
	"fmt"
	"sort"
	"sync"
)

// Opener opens a store from a data source name (a file path for SQLite).
type Opener func(dsn string) (Store, error)

var (
	openersMu sync.RWMutex
	openers   = map[string]Opener{}
)

// Register makes a driver available to Open. Implementations call it from init.
func Register(driver string, open Opener) {
	openersMu.Lock()
	defer openersMu.Unlock()
	openers[driver] = open
}

// Open opens a store with a registered driver.
func Open(driver, dsn string) (Store, error) {
	openersMu.RLock()
	open, ok := openers[driver]
	openersMu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("unknown database driver %q (known: %v)", driver, Drivers())
	}
	return open(dsn)
}

// Drivers lists the registered driver names.
func Drivers() []string {
	openersMu.RLock()
	defer openersMu.RUnlock()
	names := make([]string, 0, len(openers))
	for n := range openers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
