package billing

// Batch is the price of one line of a batch: the batch_input and
// batch_output prices where set, every other token price (and the flat
// request charge) with batch_discount taken off, rounded up to a whole
// unit so a discount never bills less than the operator asked. A price
// with no batch terms is itself: a batch line then costs what the same
// request costs.
func (p *Price) Batch() *Price {
	if p == nil || p.Free || (p.BatchInput == nil && p.BatchOutput == nil && p.BatchDiscount <= 0) {
		return p
	}
	b := *p
	off := min(max(p.BatchDiscount, 0), 100)
	cut := func(v int64) int64 {
		if v <= 0 || off == 0 {
			return v
		}
		// ceil(v * (100-off) / 100) without overflow for any int64 price
		q, r := v/100, v%100
		return q*(100-off) + (r*(100-off)+99)/100
	}
	cutPtr := func(v *int64) *int64 {
		if v == nil {
			return nil
		}
		c := cut(*v)
		return &c
	}
	b.Input, b.Output = cut(p.Input), cut(p.Output)
	if p.BatchInput != nil {
		b.Input = *p.BatchInput
	}
	if p.BatchOutput != nil {
		b.Output = *p.BatchOutput
	}
	// a cached or cache-written prompt token follows the input price when
	// unpriced; priced, it gets the discount
	b.CachedInput, b.CacheWrite = cutPtr(p.CachedInput), cutPtr(p.CacheWrite)
	b.AudioInput, b.AudioOutput = cutPtr(p.AudioInput), cutPtr(p.AudioOutput)
	b.Request = cut(p.Request)
	b.BatchInput, b.BatchOutput, b.BatchDiscount = nil, nil, 0
	return &b
}
