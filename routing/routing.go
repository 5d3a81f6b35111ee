// Package routing picks the upstream channel for a model: channels of
// higher priority first, weighted random among equals, and a rotating key
// within a channel. It knows nothing of vendors or HTTP; it must not import
// caddymodule or any vendor adapter.
package routing

import (
	"math/rand/v2"
	"sort"
	"sync/atomic"
	"time"
)

// Channel is one configured upstream.
type Channel struct {
	Name     string
	Type     string
	BaseURL  string
	Keys     []string
	Models   []string
	ModelMap map[string]string // asked model -> upstream model
	Priority int
	Weight   int

	next   atomic.Uint64 // key rotation
	health health
}

// Key returns the channel's next key, round robin.
func (c *Channel) Key() string {
	if len(c.Keys) == 0 {
		return ""
	}
	return c.Keys[(c.next.Add(1)-1)%uint64(len(c.Keys))]
}

// UpstreamModel is the name the upstream knows the asked model by.
func (c *Channel) UpstreamModel(model string) string {
	if m, ok := c.ModelMap[model]; ok {
		return m
	}
	return model
}

// Set is the channel table, read by every request without locks. Its
// channels are replaced whole (Replace) when channels made at runtime
// change: a request reads one table, at the cost of one atomic load.
type Set struct {
	cur atomic.Pointer[table]
}

// table is one generation of the channel table, never changed once built.
type table struct {
	byModel map[string][]tier // tiers in descending priority
	all     []*Channel        // in configuration order
	models  []string
	owner   map[string]string // model -> type of its first channel
}

type tier struct {
	channels    []*Channel
	totalWeight int
}

// NewSet indexes channels by the models they serve (their models and the
// asked names of their model map).
func NewSet(channels []*Channel) *Set {
	s := &Set{}
	s.Replace(channels)
	return s
}

// Replace makes channels the set's table: requests that planned on the
// table before keep their channels, later ones plan on these. A channel
// kept from the table before (the same *Channel) keeps its health and
// key rotation.
func (s *Set) Replace(channels []*Channel) { s.cur.Store(newTable(channels)) }

func newTable(channels []*Channel) *table {
	s := &table{byModel: map[string][]tier{}, owner: map[string]string{}, all: channels}
	grouped := map[string]map[int][]*Channel{}
	for _, c := range channels {
		if c.Weight <= 0 {
			c.Weight = 1
		}
		seen := map[string]bool{}
		names := append([]string(nil), c.Models...)
		for asked := range c.ModelMap {
			names = append(names, asked)
		}
		for _, m := range names {
			if seen[m] {
				continue
			}
			seen[m] = true
			if grouped[m] == nil {
				grouped[m] = map[int][]*Channel{}
				s.models = append(s.models, m)
				s.owner[m] = c.Type
			}
			grouped[m][c.Priority] = append(grouped[m][c.Priority], c)
		}
	}
	for m, byPrio := range grouped {
		prios := make([]int, 0, len(byPrio))
		for p := range byPrio {
			prios = append(prios, p)
		}
		sort.Sort(sort.Reverse(sort.IntSlice(prios)))
		for _, p := range prios {
			t := tier{channels: byPrio[p]}
			for _, c := range t.channels {
				t.totalWeight += c.Weight
			}
			s.byModel[m] = append(s.byModel[m], t)
		}
	}
	sort.Strings(s.models)
	return s
}

// Models lists every model some channel serves, sorted.
func (s *Set) Models() []string { return s.cur.Load().models }

// Owner is the channel type of the model's first channel, for model lists.
func (s *Set) Owner(model string) string { return s.cur.Load().owner[model] }

// Has reports whether any channel serves the model.
func (s *Set) Has(model string) bool { return len(s.cur.Load().byModel[model]) > 0 }

// Plan returns the order in which to try the model's channels: by priority,
// and within a priority a weighted random order, so load spreads by weight
// and a failed channel's share falls to the others. Ejected channels are
// left out unless every one is ejected (see HealthPolicy). At most max
// channels.
func (s *Set) Plan(model string, max int) []*Channel { return s.PlanFor(model, max, nil) }

// PlanFor is Plan over the channels keep accepts (nil: all): they are
// chosen before health and the max, so a channel that cannot serve the
// request neither spends an attempt nor counts as the healthy one.
func (s *Set) PlanFor(model string, max int, keep func(*Channel) bool) []*Channel {
	tiers := s.cur.Load().byModel[model]
	var out []*Channel
	for _, t := range tiers {
		if len(t.channels) == 1 {
			out = append(out, t.channels[0])
		} else {
			out = append(out, weightedOrder(t)...)
		}
	}
	if keep != nil {
		kept := out[:0]
		for _, c := range out {
			if keep(c) {
				kept = append(kept, c)
			}
		}
		out = kept
	}
	out = healthy(out, time.Now())
	if len(out) > max {
		return out[:max]
	}
	return out
}

func weightedOrder(t tier) []*Channel {
	left := append([]*Channel(nil), t.channels...)
	total := t.totalWeight
	out := make([]*Channel, 0, len(left))
	for len(left) > 0 {
		r := rand.IntN(total)
		for i, c := range left {
			if r < c.Weight {
				out = append(out, c)
				total -= c.Weight
				left = append(left[:i], left[i+1:]...)
				break
			}
			r -= c.Weight
		}
	}
	return out
}
