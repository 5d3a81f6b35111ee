package alerts

import "math/bits"

// Reached reports whether spent is at least pct percent of limit, exactly:
// spent*100 >= pct*limit in 128 bits, so no amount overflows or rounds.
func Reached(spent, limit int64, pct int) bool {
	if limit <= 0 || pct <= 0 {
		return false
	}
	if spent <= 0 {
		return false
	}
	sh, sl := bits.Mul64(uint64(spent), 100)
	lh, ll := bits.Mul64(uint64(limit), uint64(pct))
	return sh > lh || (sh == lh && sl >= ll)
}

// ReachedAll is the thresholds of ts (sorted) spent has reached of limit.
func ReachedAll(spent, limit int64, ts []int) []int {
	var out []int
	for _, t := range ts {
		if Reached(spent, limit, t) {
			out = append(out, t)
		}
	}
	return out
}
