package caddymodule

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/caddy-model-gateway/gateway/billing"
)

// parseBatchPrice reads a price's batch terms: `batch_input <usd>`,
// `batch_output <usd>` (per million tokens) and `batch_discount <n>%`.
func parseBatchPrice(pc *PriceConfig, opt, v string) error {
	switch opt {
	case "batch_input":
		pc.BatchInput = v
	case "batch_output":
		pc.BatchOutput = v
	case "batch_discount":
		if _, err := parseDiscount(v); err != nil {
			return err
		}
		pc.BatchDiscount = v
		return nil
	}
	if _, err := billing.ParseUSD(v); err != nil {
		return fmt.Errorf("%s: %w", opt, err)
	}
	return nil
}

// parseDiscount reads a whole percentage from 0 to 100, "50%" or "50".
func parseDiscount(v string) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), "%"), 10, 64)
	if err != nil || n < 0 || n > 100 {
		return 0, fmt.Errorf("batch_discount must be a whole percentage from 0 to 100 such as 50%%, not %q", v)
	}
	return n, nil
}

// batchPrice sets p's batch terms from the configuration.
func (pc *PriceConfig) batchPrice(p *billing.Price, parse func(name, s string) (int64, error)) error {
	for name, field := range map[string]struct {
		s   string
		dst **int64
	}{"batch_input": {pc.BatchInput, &p.BatchInput}, "batch_output": {pc.BatchOutput, &p.BatchOutput}} {
		if field.s != "" {
			v, err := parse(name, field.s)
			if err != nil {
				return err
			}
			*field.dst = &v
		}
	}
	if pc.BatchDiscount != "" {
		n, err := parseDiscount(pc.BatchDiscount)
		if err != nil {
			return err
		}
		p.BatchDiscount = n
	}
	return nil
}
