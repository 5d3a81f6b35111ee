package engine

import (
	"sync/atomic"

	"github.com/caddy-model-gateway/gateway/billing"
)

// UpstreamTable is the channels' upstream records by name, read by every
// request without locks and replaced whole when channels made at runtime
// change. A request keeps the record it attempted a channel with, so a
// replacement under it changes nothing of that request.
type UpstreamTable struct {
	m atomic.Pointer[map[string]*Upstream]
}

// NewUpstreamTable makes a table of m, which it keeps: m is not changed after.
func NewUpstreamTable(m map[string]*Upstream) *UpstreamTable {
	t := &UpstreamTable{}
	t.Replace(m)
	return t
}

// Get is the channel's record, nil when there is none (the channel was
// removed while a request held it).
func (t *UpstreamTable) Get(name string) *Upstream {
	if t == nil {
		return nil
	}
	if m := t.m.Load(); m != nil {
		return (*m)[name]
	}
	return nil
}

// Replace makes m the table.
func (t *UpstreamTable) Replace(m map[string]*Upstream) { t.m.Store(&m) }

// PriceTable is the models' prices, read by every request without locks
// and replaced whole when prices made at runtime change.
type PriceTable struct {
	m atomic.Pointer[map[string]*billing.Price]
}

// NewPriceTable makes a table of m, which it keeps: m is not changed after.
func NewPriceTable(m map[string]*billing.Price) *PriceTable {
	t := &PriceTable{}
	t.Replace(m)
	return t
}

// Get is the model's price and whether it has one.
func (t *PriceTable) Get(model string) (*billing.Price, bool) {
	if t == nil {
		return nil, false
	}
	if m := t.m.Load(); m != nil {
		p, ok := (*m)[model]
		return p, ok
	}
	return nil, false
}

// All is the table as it is now: read it, do not change it.
func (t *PriceTable) All() map[string]*billing.Price {
	if t == nil {
		return nil
	}
	if m := t.m.Load(); m != nil {
		return *m
	}
	return nil
}

// Replace makes m the table.
func (t *PriceTable) Replace(m map[string]*billing.Price) { t.m.Store(&m) }
