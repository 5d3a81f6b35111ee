package billing

import (
	"fmt"
	"time"
)

// WindowRefusal is a reservation a window has no room for.
type WindowRefusal struct {
	Subject string
	Window  WindowKind
	Limit   int64
	Used    int64 // spent and reserved in the window
	Amount  int64 // what was asked for
	// Reset is when the window frees enough for Amount (the period's end,
	// or for 5h when enough spend rolls out); zero for lifetime
	Reset time.Time
	// RetryAfter is Reset - now, at least a second; 0 for lifetime
	RetryAfter time.Duration
}

func (r *WindowRefusal) Error() string {
	return fmt.Sprintf("%s budget of %s: %d units asked, %d of %d used", r.Window, r.Subject, r.Amount, r.Used, r.Limit)
}

// WindowHold is a reservation in every window of its budgets; Ledger
// settles it with the ledger's hold it rides on.
type WindowHold struct {
	sp      *Spend
	holds   []heldWindows
	amount  int64
	settled bool
	// ids are the window ids the settled cost counted against
	// ("user:3/daily@2026-11-26"), comma-separated, for the usage row
	ids []byte
	// Remaining and Reset are the tightest window's room after this
	// reservation and when it next resets (zero: lifetime)
	Remaining int64
	Reset     time.Time
	// Plan is the plan that pays the request, "" when the balance pays
	Plan string
	// Multiplier is the plan's factor for the request's model, applied
	// to the amount held and, by Charge, to the cost settled
	Multiplier Multiplier
}

// Charge is what a request that cost cost (at the model's price) is
// charged: the plan's multiplier applied when a plan pays, rounded up.
func (h *WindowHold) Charge(cost int64) int64 {
	if !h.PlanPaid() {
		return cost
	}
	return h.Multiplier.Apply(cost)
}

// PaidBy is the plan that pays the hold's request, "" for the balance.
func (h *WindowHold) PaidBy() string {
	if h == nil {
		return ""
	}
	return h.Plan
}

// PlanPaid is true when a plan pays the hold's request.
func (h *WindowHold) PlanPaid() bool { return h != nil && h.Plan != "" }

type heldWindows struct {
	subject string
	limits  WindowLimits
	loc     *time.Location
}

// settle ends the hold: its reservation leaves every window and cost is
// counted in each window's period at the settle time. Once only.
func (h *WindowHold) settle(cost int64) {
	if h == nil {
		return
	}
	h.settleAt(h.sp.now(), cost)
}

// settleAt is settle at now.
func (h *WindowHold) settleAt(now time.Time, cost int64) {
	s := h.sp
	s.mu.Lock()
	defer s.mu.Unlock()
	if h.settled {
		return
	}
	h.settled = true
	for _, hw := range h.holds {
		ss := s.subjects[hw.subject]
		if ss == nil { // swept: cannot be while reserved, but never panic
			ss = &subjectSpend{spent: map[period]int64{}, loc: hw.loc}
			s.subjects[hw.subject] = ss
		}
		ss.usedAt = now
		for k := range windowKinds {
			if hw.limits[k] == 0 {
				continue
			}
			ss.reserved[k] = subSat(ss.reserved[k], h.amount)
			if cost == 0 {
				continue
			}
			p := periodOf(k, now, ss.loc)
			ss.add(p, cost)
			if s.Claims != nil {
				ss.bump(p, 0, cost)
			}
			if len(h.ids) > 0 {
				h.ids = append(h.ids, ',')
			}
			h.ids = p.appendID(append(append(h.ids, hw.subject...), '/'))
		}
		ss.prune(now, ss.loc)
	}
}

// IDsAt are the window ids settling the hold at now counts its cost
// against (what WindowIDs says after), comma-separated: a task stores
// them with its reservation, which settles at the same now.
func (h *WindowHold) IDsAt(now time.Time) string {
	if h == nil {
		return ""
	}
	var ids []byte
	for _, hw := range h.holds {
		for k := range windowKinds {
			if hw.limits[k] == 0 {
				continue
			}
			if len(ids) > 0 {
				ids = append(ids, ',')
			}
			ids = periodOf(k, now, hw.loc).appendID(append(append(ids, hw.subject...), '/'))
		}
	}
	return string(ids)
}

// Amount is what the hold reserves in each of its windows.
func (h *WindowHold) Amount() int64 {
	if h == nil {
		return 0
	}
	return h.amount
}

// WindowIDs are the window ids the hold's settled cost counted against,
// comma-separated for the usage row; "" before settling or for none.
func (h *WindowHold) WindowIDs() string {
	if h == nil {
		return ""
	}
	h.sp.mu.Lock()
	defer h.sp.mu.Unlock()
	return string(h.ids)
}
