package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"text/tabwriter"
	"time"
)

// Spending windows (issue 22): what checking them costs a request. The
// same site as gateway_example (Caddyfile.example's), the same process, the
// same model; only the key differs. gateway_budgets' user has a 5h and a
// daily window and its key a monthly one; gateway_plan's user is on the
// plan below, whose windows pay for the request instead of the balance.
// Every limit is far above what a run spends, so no request is refused:
// the difference to gateway_example is the windows' check, hold and
// settlement, and the claims of room from the store (docs/budgets.md).
const (
	gatewayBudgets = "gateway_budgets"
	gatewayPlan    = "gateway_plan"
)

// benchPlan is the plan gateway_plan's user is on.
const benchPlan = "bench"

// planBlock is what the main Caddyfile's gateway app gets when gateway_plan
// runs: a model group and a plan that covers it. No other user is on the
// plan, so the other targets' requests do not touch it.
const planBlock = `		models_group bench gpt-4o-*
		plan ` + benchPlan + ` {
			5h 500
			weekly 1000
			models group bench
		}
`

// budgetUser is the user, the key and the windows each budgets target gets.
type budgetUser struct {
	username string
	user     []string // `user budget` window flags
	key      []string // `token budget` window flags
	plan     bool     // on benchPlan
}

var budgetUsers = map[string]budgetUser{
	gatewayBudgets: {username: "bench_budgets", user: []string{"--daily", "1000", "--5h", "500"}, key: []string{"--monthly", "1000"}},
	gatewayPlan:    {username: "bench_plan", plan: true},
}

// budgetTargets are the selected budgets targets, in a fixed order.
func (o *options) budgetTargets() []string {
	var out []string
	for _, t := range []string{gatewayBudgets, gatewayPlan} {
		if o.has(t) {
			out = append(out, t)
		}
	}
	return out
}

// createBudgetUsers makes each budgets target's user and key with the CLI,
// as an operator would (docs/budgets.md), and returns the keys by target.
func (s *setup) createBudgetUsers(targets []string) (map[string]string, error) {
	keys := map[string]string{}
	for _, t := range targets {
		bu := budgetUsers[t]
		key, err := s.createUserToken(s.caddyfile, bu.username)
		if err != nil {
			return nil, err
		}
		keys[t] = key
		if len(bu.user) > 0 {
			args := append([]string{"user", "budget", "--username", bu.username}, bu.user...)
			if _, err := gatewayCLI(s, s.caddyfile, args...); err != nil {
				return nil, fmt.Errorf("setting %s's windows: %w", bu.username, err)
			}
		}
		if len(bu.key) > 0 {
			id, err := s.tokenID(bu.username)
			if err != nil {
				return nil, err
			}
			args := append([]string{"token", "budget", "--id", fmt.Sprint(id)}, bu.key...)
			if _, err := gatewayCLI(s, s.caddyfile, args...); err != nil {
				return nil, fmt.Errorf("setting the windows of %s's key: %w", bu.username, err)
			}
		}
		if bu.plan {
			if _, err := gatewayCLI(s, s.caddyfile, "user", "plan", "--username", bu.username, "--plan", benchPlan, "--days", "30"); err != nil {
				return nil, fmt.Errorf("putting %s on the plan: %w", bu.username, err)
			}
		}
	}
	return keys, nil
}

// tokenID is the id of the user's one key, from `token list`.
func (s *setup) tokenID(username string) (int64, error) {
	out, err := gatewayCLI(s, s.caddyfile, "token", "list", "--username", username)
	if err != nil {
		return 0, err
	}
	var list []struct {
		ID int64 `json:"id"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil || len(list) != 1 {
		return 0, fmt.Errorf("token list --username %s: want one key, got %q (%v)", username, out, err)
	}
	return list[0].ID, nil
}

// windowsCheck is what /api/user/self said about a budgets target's
// windows after its runs: each window must have counted spend, and the
// plan's user must not have paid from the balance.
type windowsCheck struct {
	Plan      string        `json:"plan,omitempty"`
	UsedQuota int64         `json:"used_quota"`
	Windows   []windowSpent `json:"windows"`
	Error     string        `json:"error,omitempty"`
}

type windowSpent struct {
	Subject string `json:"subject"`
	Window  string `json:"window"`
	Limit   int64  `json:"limit"`
	Spent   int64  `json:"spent"`
}

// want is how many windows target should show: the user's and the key's
// own, or the plan's two.
func windowsWanted(target string) int {
	if target == gatewayPlan {
		return 2
	}
	bu := budgetUsers[target]
	return (len(bu.user) + len(bu.key)) / 2
}

// verdict says what is wrong with the check, "" when nothing is.
func (c *windowsCheck) verdict(target string) string {
	if c.Error != "" {
		return c.Error
	}
	if len(c.Windows) != windowsWanted(target) {
		return fmt.Sprintf("%d windows, want %d", len(c.Windows), windowsWanted(target))
	}
	for _, w := range c.Windows {
		if w.Spent <= 0 {
			return fmt.Sprintf("the %s window of %s counted nothing", w.Window, w.Subject)
		}
	}
	if target == gatewayPlan {
		if c.Plan != benchPlan {
			return fmt.Sprintf("plan %q, want %q", c.Plan, benchPlan)
		}
		if c.UsedQuota != 0 {
			return fmt.Sprintf("the balance paid %d units: the plan should have", c.UsedQuota)
		}
	}
	return ""
}

// checkWindows asks the example site's /api/user/self, with the target's
// key, what its windows counted.
func (s *setup) checkWindows(ctx context.Context, target string) *windowsCheck {
	c := &windowsCheck{}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/api/user/self", s.exPort), nil)
	if err != nil {
		c.Error = err.Error()
		return c
	}
	req.Header.Set("Authorization", "Bearer "+s.keys[target])
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		c.Error = err.Error()
		return c
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		c.Error = fmt.Sprintf("/api/user/self: status %d: %.300s", resp.StatusCode, body)
		return c
	}
	if err := parseSelf(body, c); err != nil {
		c.Error = err.Error()
	}
	return c
}

func parseSelf(body []byte, c *windowsCheck) error {
	var v struct {
		UsedQuota int64 `json:"used_quota"`
		Budget    *struct {
			Plan    string        `json:"plan"`
			Windows []windowSpent `json:"windows"`
		} `json:"budget"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return fmt.Errorf("/api/user/self: %w", err)
	}
	if v.Budget == nil {
		return fmt.Errorf("/api/user/self has no budget: %.300s", body)
	}
	c.UsedQuota, c.Plan, c.Windows = v.UsedQuota, v.Budget.Plan, v.Budget.Windows
	return nil
}

// versus is a budgets target's figure against gateway_example's.
type versus struct {
	Diff  float64 `json:"diff"`  // target − gateway_example, in the figure's unit
	Ratio float64 `json:"ratio"` // target / gateway_example
}

// addWindows adds a figure of the spending-windows table: gateway_example
// and the budgets targets, each of these against gateway_example.
func (r *report) addWindows(name, unit string, v map[string]float64, b *bar) *figure {
	f := r.addFigure(false, name, unit, v, b)
	f.Windows = true
	f.Ratio = nil
	base, ok := v[gatewayExample]
	if !ok {
		return f
	}
	for _, t := range []string{gatewayBudgets, gatewayPlan} {
		if x, ok := v[t]; ok {
			if f.Versus == nil {
				f.Versus = map[string]versus{}
			}
			vs := versus{Diff: x - base}
			if base != 0 {
				vs.Ratio = x / base
			}
			f.Versus[t] = vs
		}
	}
	return f
}

// buildWindowFigures is the spending-windows table: what the window check
// costs per request, in CPU and in throughput, against the same site
// without windows.
func (r *report) buildWindowFigures(errs map[string]float64) {
	if r.scenario("c50").Targets[gatewayBudgets] == nil && r.scenario("c50").Targets[gatewayPlan] == nil {
		return
	}
	win := []string{gatewayExample, gatewayBudgets, gatewayPlan}
	p50 := func(t *targetResult) float64 { return t.P50ms }
	thr := func(t *targetResult) float64 { return t.Throughput }
	cpu := func(t *targetResult) float64 { return t.CPUPerRequestUs }
	ttfe50 := func(t *targetResult) float64 { return t.TTFEP50ms }
	r.addWindows("c1 latency p50", "ms", r.per("c1", p50, win...), nil)
	r.addWindows("c1 CPU per request", "µs", r.per("c1", cpu, win...), nil)
	r.addWindows("c50 throughput", "req/s", r.per("c50", thr, win...), nil)
	r.addWindows("c50 CPU per request", "µs", r.per("c50", cpu, win...), nil)
	r.addWindows("stream c1 first event p50", "ms", r.per("stream_c1", ttfe50, win...), nil)
	r.addWindows("stream c50 streams/s", "1/s", r.per("stream_c50", thr, win...), nil)
	r.addWindows("stream c50 CPU per stream", "µs", r.per("stream_c50", cpu, win...), nil)
	failed := map[string]float64{}
	for _, t := range win {
		if x, ok := errs[t]; ok {
			failed[t] = x
		}
	}
	r.addWindows("failed requests or wrong streams", "count", failed, allZero)
	for _, t := range []string{gatewayBudgets, gatewayPlan} {
		c, ok := r.WindowChecks[t]
		if !ok {
			continue
		}
		n := 0.0
		for _, w := range c.Windows {
			if w.Spent > 0 {
				n++
			}
		}
		target := t
		r.addWindows("windows that counted spend ("+t+")", "count", map[string]float64{t: n},
			&bar{fmt.Sprintf("= %d", windowsWanted(t)), func(map[string]float64, *float64, bool) (bool, bool) {
				return c.verdict(target) == "", true
			}})
	}
}

// printWindows is the spending-windows table, under the headline: the
// example's site with windows on its key and user, and paid by a plan,
// against the same site without.
func (r *report) printWindows(w io.Writer) {
	figs := r.figuresWhere(func(f *figure) bool { return f.Windows })
	if len(figs) == 0 {
		return
	}
	fmt.Fprintln(w, "Spending windows: the same site and process, keys with windows (and a plan) against a key without")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "figure\tunit\tgateway (example)\t+windows\t+plan\twindows−ex\twindows/ex\tplan−ex\tplan/ex\tbar\tresult\t")
	for _, f := range figs {
		cells := []string{f.Name, f.Unit}
		for _, t := range []string{gatewayExample, gatewayBudgets, gatewayPlan} {
			if v, ok := f.Values[t]; ok {
				cells = append(cells, format(v, f.Unit))
			} else {
				cells = append(cells, "-")
			}
		}
		for _, t := range []string{gatewayBudgets, gatewayPlan} {
			vs, ok := f.Versus[t]
			if !ok || f.Unit == "count" {
				cells = append(cells, "", "")
				continue
			}
			cells = append(cells, signed(vs.Diff, f.Unit), fmt.Sprintf("%.2f×", vs.Ratio))
		}
		cells = append(cells, f.Bar, verdictCell(f.Pass, f.Bar))
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	tw.Flush()
	for _, t := range []string{gatewayBudgets, gatewayPlan} {
		c, ok := r.WindowChecks[t]
		if !ok {
			continue
		}
		var parts []string
		for _, win := range c.Windows {
			parts = append(parts, fmt.Sprintf("%s %s %d of %d units", win.Subject, win.Window, win.Spent, win.Limit))
		}
		line := strings.Join(parts, ", ")
		if t == gatewayPlan {
			line += fmt.Sprintf("; balance paid %d units", c.UsedQuota)
		}
		if v := c.verdict(t); v != "" {
			line += "; WRONG: " + v
		}
		fmt.Fprintf(w, "%s windows after the run: %s\n", t, line)
	}
	fmt.Fprintln(w)
}

// signed is a difference with its sign, in the unit's precision.
func signed(v float64, unit string) string {
	s := format(v, unit)
	if unit == "µs" {
		s = fmt.Sprintf("%.1f", v) // a window check is a few µs
	}
	if v >= 0 && !strings.HasPrefix(s, "-") {
		s = "+" + s
	}
	return s
}
