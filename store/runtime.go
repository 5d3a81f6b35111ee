package store

import (
	"context"
	"errors"
	"time"
)

// Kinds of runtime configuration: what an administrator makes in the
// console or the admin API rather than in the Caddyfile. Every instance on
// the database applies them at its next request.
const (
	RuntimeChannel = "channel"
	RuntimePrice   = "price"
	RuntimePlan    = "plan"
)

// RuntimeItem is one channel, price or plan made at runtime. Config is its
// JSON as the gateway's own configuration spells it (for a price, the JSON
// of billing's price type, so fields added to it later need no new
// column). Secret is the channel's vendor keys sealed with the gateway's
// secrets_key (never clear text); KeyPrefix what the console may show of
// them.
type RuntimeItem struct {
	Kind      string `json:"kind"`
	Name      string `json:"name"`
	Config    string `json:"config"`
	Secret    []byte `json:"-"`
	KeyPrefix string `json:"key_prefix"`
	Disabled  bool   `json:"disabled"`
	// Test is the JSON of the channel's last test, "" before any; writing
	// it is no configuration change (SetRuntimeTest)
	Test      string    `json:"test"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Binding names the row a sealed secret belongs to: a secret sealed for
// one row does not open as another's.
func (it *RuntimeItem) Binding() string { return it.Kind + "/" + it.Name }

// RuntimeStore keeps runtime configuration. Every write that changes what
// the gateway serves (not SetRuntimeTest) is announced to the other
// instances (PostgreSQL: migration 0018's trigger; a SQLite file has one
// gateway, which applies its own changes as it makes them).
type RuntimeStore interface {
	// ListRuntime returns the items of kind ("" every kind), by kind and name.
	ListRuntime(ctx context.Context, kind string) ([]*RuntimeItem, error)
	// PutRuntime creates it (ErrConflict when its kind and name are taken)
	// or, with replace, replaces it (ErrNotFound when there is none;
	// CreatedAt and Test are kept). It sets CreatedAt and UpdatedAt.
	PutRuntime(ctx context.Context, it *RuntimeItem, replace bool) error
	// DeleteRuntime removes an item; ErrNotFound when there is none.
	DeleteRuntime(ctx context.Context, kind, name string) error
	// SetRuntimeTest keeps a channel's last test; ErrNotFound when there
	// is no such item.
	SetRuntimeTest(ctx context.Context, kind, name, test string) error
	// ResealSecrets passes every secret the database keeps sealed with
	// the gateway's secrets_key through r's functions and writes what
	// they return, all in one transaction: an error from either changes
	// nothing. It says how many of each it rewrote.
	ResealSecrets(ctx context.Context, r Resealers) (ResealCounts, error)
}

// Resealers re-seal the database's secrets (ResealSecrets); a nil one
// leaves its secrets alone.
type Resealers struct {
	// Runtime gets every runtime item that has a Secret.
	Runtime func(it *RuntimeItem) ([]byte, error)
	// TOTP gets every user's TOTP secret as stored (sealed, or plain when
	// kept before secrets_key was set); one given back unchanged is not
	// written or counted.
	TOTP func(userID int64, secret string) (string, error)
}

// ResealCounts are the secrets ResealSecrets rewrote.
type ResealCounts struct {
	Runtime int `json:"resealed"`
	TOTP    int `json:"totp_resealed"`
}

// PrepareRuntime checks an item before it is written and sets its times.
func PrepareRuntime(it *RuntimeItem, now time.Time) error {
	switch {
	case it == nil || it.Name == "":
		return errors.New("put runtime item: a name is required")
	case it.Kind != RuntimeChannel && it.Kind != RuntimePrice && it.Kind != RuntimePlan:
		return errors.New("put runtime item: kind must be channel, price or plan")
	case it.Config == "":
		return errors.New("put runtime item: its configuration is required")
	}
	if it.CreatedAt.IsZero() {
		it.CreatedAt = now
	}
	it.UpdatedAt = now
	return nil
}

// RuntimeColumns are the runtime_config columns ScanRuntime reads, in its order.
const RuntimeColumns = `kind, name, config, secret, key_prefix, disabled, test, created_at, updated_at`

// ScanRuntime reads a row of RuntimeColumns.
func ScanRuntime(sc RowScanner) (*RuntimeItem, error) {
	var (
		it               RuntimeItem
		disabled         int64
		created, updated int64
	)
	if err := sc.Scan(&it.Kind, &it.Name, &it.Config, &it.Secret, &it.KeyPrefix, &disabled, &it.Test, &created, &updated); err != nil {
		return nil, err
	}
	it.Disabled = disabled != 0
	it.CreatedAt, it.UpdatedAt = time.UnixMilli(created).UTC(), time.UnixMilli(updated).UTC()
	return &it, nil
}
