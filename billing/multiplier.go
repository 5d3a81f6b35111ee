package billing

import (
	"fmt"
	"math"
	"math/big"
	"math/bits"
	"strings"
)

// Multiplier scales what a plan is charged for a model, in millionths:
// 1,000,000 is 1x, 500,000 is 0.5x. A factor with up to six decimals is
// exact; 0 means no multiplier (1x).
type Multiplier int64

// MultiplierOne is 1x.
const MultiplierOne Multiplier = 1_000_000

// maxMultiplier bounds a factor: a plan charging a model more than 1000x
// is a typo.
const maxMultiplier = 1000 * MultiplierOne

// ParseMultiplier reads a decimal factor ("0.5", "2", "1.25") exactly.
func ParseMultiplier(s string) (Multiplier, error) {
	r, ok := new(big.Rat).SetString(strings.TrimSpace(s))
	if !ok || r.Sign() <= 0 {
		return 0, fmt.Errorf("multiplier %q is not a positive decimal number (0.5 halves the price, 2 doubles it)", s)
	}
	r.Mul(r, big.NewRat(int64(MultiplierOne), 1))
	if !r.IsInt() {
		return 0, fmt.Errorf("multiplier %q has more than six decimals", s)
	}
	if !r.Num().IsInt64() || r.Num().Int64() > int64(maxMultiplier) {
		return 0, fmt.Errorf("multiplier %q is above 1000", s)
	}
	return Multiplier(r.Num().Int64()), nil
}

// String is the factor as a decimal ("0.5").
func (m Multiplier) String() string {
	if m == 0 {
		m = MultiplierOne
	}
	return new(big.Rat).SetFrac64(int64(m), int64(MultiplierOne)).FloatString(6)
}

// Apply is cost times the factor, rounded up to a whole unit as every
// charge is (ceil(cost * m / 1,000,000)), saturating. Rounding up keeps a
// reservation covering its settlement: cost <= reserved gives
// Apply(cost) <= Apply(reserved).
func (m Multiplier) Apply(cost int64) int64 {
	if m == 0 || m == MultiplierOne || cost <= 0 {
		return cost
	}
	hi, lo := bits.Mul64(uint64(cost), uint64(m))
	if hi >= uint64(MultiplierOne) {
		return math.MaxInt64
	}
	q, r := bits.Div64(hi, lo, uint64(MultiplierOne))
	if r > 0 {
		q++
	}
	if q > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(q)
}

// Room is the largest cost whose Apply fits in left: floor(left *
// 1,000,000 / m), so that what a reservation may be before the factor is
// known from what the plan has left after it.
func (m Multiplier) Room(left int64) int64 {
	if m == 0 || m == MultiplierOne || left <= 0 {
		return left
	}
	hi, lo := bits.Mul64(uint64(left), uint64(MultiplierOne))
	if hi >= uint64(m) {
		return math.MaxInt64
	}
	q, _ := bits.Div64(hi, lo, uint64(m))
	if q > math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(q)
}

// ModelMultiplier is a factor for the models a list names (names and
// "group:<name>"s).
type ModelMultiplier struct {
	Models []string
	Factor Multiplier
}

// Multiplier is the factor the plan charges model at: the first entry
// whose list holds the model, 1x when none does.
func (p *Plan) Multiplier(groups ModelGroups, model string) Multiplier {
	if p == nil {
		return MultiplierOne
	}
	for _, m := range p.Multipliers {
		if groups.Allows(m.Models, model) && len(m.Models) > 0 {
			return m.Factor
		}
	}
	return MultiplierOne
}
