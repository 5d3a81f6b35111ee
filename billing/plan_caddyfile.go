package billing

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Set applies one option of the Caddyfile's gateway block to c:
//
//	budget_timezone <IANA zone>
//	models_group <name> <model or glob>...
//	plan <name> { ... }
//	budget_group <name> { ... }
//
// It returns what reads each line of the option's block (an option
// without a block refuses any): a window
// (`<window> <usd>` or `window <window> <usd>`), and for a plan `models
// <name|group:g>...` or `models group <g>`, `rpm`/`tpm`/`max_parallel
// <n>`, `then balance`, `multiplier <name|group:g>... <factor>`; for a
// group `plan <name>`. The Caddy layer only walks the tokens.
func (c *BudgetConfig) Set(opt string, args []string) (line func(opt string, args []string) error, err error) {
	noBlock := func(string, []string) error { return errors.New("takes no block") }
	switch {
	case opt == "budget_timezone" && len(args) == 1:
		c.Timezone = args[0]
		return noBlock, nil
	case opt == "models_group" && len(args) >= 2:
		c.ModelGroups = setIn(c.ModelGroups, args[0], args[1:])
		return noBlock, nil
	case opt == "budget_group" && len(args) == 1:
		g := &GroupConfig{Windows: map[string]string{}}
		c.Groups = setIn(c.Groups, args[0], g)
		return windowLines(g.Windows, func(opt string, v []string) bool {
			if opt == "plan" && len(v) == 1 {
				g.Plan = v[0]
				return true
			}
			return false
		}), nil
	case opt == "plan" && len(args) == 1:
		p := &PlanConfig{Windows: map[string]string{}}
		c.Plans = setIn(c.Plans, args[0], p)
		lines := windowLines(p.Windows, p.line)
		return func(opt string, v []string) error {
			// a multiplier's own mistake, said as such
			if opt == "multiplier" && len(v) >= 2 {
				if _, err := ParseMultiplier(v[len(v)-1]); err != nil {
					return fmt.Errorf("multiplier %s: %w: write 'multiplier <model or group:name>... <factor>'", strings.Join(v[:len(v)-1], " "), err)
				}
			}
			return lines(opt, v)
		}, nil
	}
	return nil, fmt.Errorf("%s: wrong number of arguments %q", opt, args)
}

// line reads a plan's line other than a window.
func (p *PlanConfig) line(opt string, v []string) bool {
	switch {
	case opt == "models" && len(v) == 2 && v[0] == "group":
		p.Models = append(p.Models, GroupPrefix+v[1])
	case opt == "models" && len(v) > 0:
		p.Models = append(p.Models, v...)
	case opt == "then" && len(v) == 1 && v[0] == "balance":
		p.ThenBalance = true
	case opt == "multiplier" && len(v) >= 2:
		if _, err := ParseMultiplier(v[len(v)-1]); err != nil {
			return false
		}
		p.Multipliers = append(p.Multipliers, MultiplierConfig{Models: slices.Clone(v[:len(v)-1]), Factor: v[len(v)-1]})
	case (opt == "rpm" || opt == "tpm" || opt == "max_parallel") && len(v) == 1:
		n, err := strconv.ParseInt(v[0], 10, 64)
		if err != nil || n < 0 {
			return false
		}
		*map[string]*int64{"rpm": &p.RPM, "tpm": &p.TPM, "max_parallel": &p.MaxParallel}[opt] = n
	default:
		return false
	}
	return true
}

// windowLines reads `<window> <usd>` lines into windows and gives others
// to other, whose false is an error naming the line.
func windowLines(windows map[string]string, other func(opt string, args []string) bool) func(string, []string) error {
	return func(opt string, args []string) error {
		if opt == "window" && len(args) == 2 {
			opt, args = args[0], args[1:]
		}
		if _, ok := ParseWindowKind(opt); ok && len(args) == 1 {
			if _, err := ParseUSD(args[0]); err != nil {
				return fmt.Errorf("%s: %w", opt, err)
			}
			windows[opt] = args[0]
			return nil
		}
		if !other(opt, args) {
			return fmt.Errorf("unrecognized or malformed line %q %q: windows are %s", opt, args, WindowNames())
		}
		return nil
	}
}

func setIn[K comparable, V any](m map[K]V, k K, v V) map[K]V {
	if m == nil {
		m = map[K]V{}
	}
	m[k] = v
	return m
}
