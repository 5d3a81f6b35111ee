package cache

import (
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
)

// Scope says whose requests share entries.
type Scope string

// Scopes: a user's keys share their entries by default; key keeps each
// key's apart; shared lets every user of the gateway hit another's answer,
// which only an operator who knows the prompts hold nothing private sets.
const (
	ScopeUser   Scope = "user"
	ScopeKey    Scope = "key"
	ScopeShared Scope = "shared"
)

// Replay says how a stream's recorded events are written on a hit.
type Replay string

// Replays: at_once writes every event at once (the fastest answer);
// pace keeps the gaps the upstream left between them.
const (
	ReplayAtOnce Replay = "at_once"
	ReplayPace   Replay = "pace"
)

// Where entries are kept.
const (
	StoreMemory   = "memory"
	StoreDatabase = "database"
)

// Mode says which requests of an enabled cache use it.
type Mode string

// Modes: auto uses it for every deterministic request of the keys and
// plans it is on for (a request may refuse); request only for those that
// ask for it with the request header.
const (
	ModeAuto    Mode = "auto"
	ModeRequest Mode = "request"
)

// Defaults of Config.
const (
	DefaultTTL      = 10 * time.Minute
	DefaultMaxBytes = 64 << 20
	DefaultMaxEntry = 1 << 20
)

// Config is the cache block of the gateway's Caddyfile. The zero value
// (and nil) is off.
type Config struct {
	Enable bool `json:"enable,omitempty"`
	Mode   Mode `json:"mode,omitempty"`
	// TTL is how long an entry is served; default 10m
	TTL time.Duration `json:"ttl,omitempty"`
	// MaxBytes bounds every entry held together, MaxEntry one answer: a
	// larger one is not kept; defaults 64 MiB and 1 MiB
	MaxBytes int64 `json:"max_bytes,omitempty"`
	MaxEntry int64 `json:"max_entry_bytes,omitempty"`
	Scope    Scope `json:"scope,omitempty"`
	// Bill is the share of the answer's price a hit is charged, in
	// hundredths of a percent (10000: the full price); default 0
	Bill int64 `json:"bill_basis_points,omitempty"`
	// Replay: at_once (default) or pace
	Replay Replay `json:"replay,omitempty"`
	// Force caches requests that are not deterministic too
	Force bool `json:"force,omitempty"`
	// Keys and Plans limit the cache to these keys (by name or id) and to
	// requests paid by these plans; neither: every key
	Keys  []string `json:"keys,omitempty"`
	Plans []string `json:"plans,omitempty"`
	// Store is where entries are kept: memory (default: each instance
	// its own) or database (shared by the instances on one database)
	Store string `json:"store,omitempty"`
}

// Set sets one option of the Caddyfile's cache block from its arguments.
func (c *Config) Set(opt string, args []string) error {
	one := func() (string, error) {
		if len(args) != 1 {
			return "", fmt.Errorf("cache: %s takes one value", opt)
		}
		return args[0], nil
	}
	switch opt {
	case "enable", "force":
		if len(args) != 0 {
			return fmt.Errorf("cache: %s takes no value", opt)
		}
		if opt == "enable" {
			c.Enable = true
		} else {
			c.Force = true
		}
		return nil
	case "keys", "plans":
		if len(args) == 0 {
			return fmt.Errorf("cache: %s takes one or more names", opt)
		}
		if opt == "keys" {
			c.Keys = append(c.Keys, args...)
		} else {
			c.Plans = append(c.Plans, args...)
		}
		return nil
	}
	v, err := one()
	if err != nil {
		return err
	}
	switch opt {
	case "mode":
		if m := Mode(v); m == ModeAuto || m == ModeRequest {
			c.Mode = m
			return nil
		}
		return fmt.Errorf("cache: mode %q: want auto or request", v)
	case "ttl":
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return fmt.Errorf("cache: ttl %q: want a positive duration such as 10m", v)
		}
		c.TTL = d
	case "max_bytes", "max_entry_bytes":
		n, err := humanize.ParseBytes(v)
		if err != nil || n == 0 || n > math.MaxInt64 {
			return fmt.Errorf("cache: %s %q: want a positive size such as 64MiB", opt, v)
		}
		if opt == "max_bytes" {
			c.MaxBytes = int64(n)
		} else {
			c.MaxEntry = int64(n)
		}
	case "scope":
		if s := Scope(v); s == ScopeUser || s == ScopeKey || s == ScopeShared {
			c.Scope = s
			return nil
		}
		return fmt.Errorf("cache: scope %q: want user, key or shared", v)
	case "bill":
		bp, err := ParseShare(v)
		if err != nil {
			return err
		}
		c.Bill = bp
	case "store":
		if v == StoreMemory || v == StoreDatabase {
			c.Store = v
			return nil
		}
		return fmt.Errorf("cache: store %q: want memory or database", v)
	case "replay":
		if r := Replay(v); r == ReplayAtOnce || r == ReplayPace {
			c.Replay = r
			return nil
		}
		return fmt.Errorf("cache: replay %q: want at_once or pace", v)
	default:
		return fmt.Errorf("cache: unknown option %q: want enable, mode, ttl, max_bytes, max_entry_bytes, scope, bill, replay, force, keys, plans or store", opt)
	}
	return nil
}

// ParseShare reads a percentage from 0% to 100% with up to two decimals
// ("0%", "25%", "12.5%") as hundredths of a percent.
func ParseShare(v string) (int64, error) {
	bad := fmt.Errorf("cache: bill %q: want a share of the price from 0%% to 100%%, such as 0%% or 25%%", v)
	s, ok := strings.CutSuffix(v, "%")
	if !ok {
		return 0, bad
	}
	whole, frac, _ := strings.Cut(s, ".")
	if len(frac) > 2 || whole == "" {
		return 0, bad
	}
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || w < 0 || w > 100 {
		return 0, bad
	}
	f := int64(0)
	if frac != "" {
		if f, err = strconv.ParseInt((frac + "0")[:2], 10, 64); err != nil || f < 0 {
			return 0, bad
		}
	}
	bp := w*100 + f
	if bp > 10000 {
		return 0, bad
	}
	return bp, nil
}

// withDefaults fills the unset options.
func (c Config) withDefaults() Config {
	if c.Mode == "" {
		c.Mode = ModeAuto
	}
	if c.TTL <= 0 {
		c.TTL = DefaultTTL
	}
	if c.MaxBytes <= 0 {
		c.MaxBytes = DefaultMaxBytes
	}
	if c.MaxEntry <= 0 {
		c.MaxEntry = DefaultMaxEntry
	}
	c.MaxEntry = min(c.MaxEntry, c.MaxBytes)
	if c.Scope == "" {
		c.Scope = ScopeUser
	}
	if c.Replay == "" {
		c.Replay = ReplayAtOnce
	}
	if c.Store == "" {
		c.Store = StoreMemory
	}
	return c
}

// Charge is the share of full a hit is charged, rounded up to a whole
// unit as every charge is; exact for any full (128-bit product).
func (c *Config) Charge(full int64) int64 {
	if full <= 0 || c.Bill <= 0 {
		return 0
	}
	if c.Bill >= 10000 {
		return full
	}
	hi, lo := bits.Mul64(uint64(full), uint64(c.Bill))
	q, r := bits.Div64(hi, lo, 10000)
	if r != 0 {
		q++
	}
	return int64(q) // at most full
}

// covers reports whether the cache is on for a key (its id and name) and
// the plan that pays the request ("" for the balance).
func (c *Config) covers(tokenID int64, tokenName, plan string) bool {
	if len(c.Keys) == 0 && len(c.Plans) == 0 {
		return true
	}
	if plan != "" && slices.Contains(c.Plans, plan) {
		return true
	}
	id := strconv.FormatInt(tokenID, 10)
	return slices.ContainsFunc(c.Keys, func(k string) bool { return k == id || (tokenName != "" && k == tokenName) })
}
