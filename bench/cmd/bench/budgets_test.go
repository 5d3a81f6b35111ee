package main

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// The spending-windows targets run by default and in the like-for-like
// scenarios only; -budgets=false leaves them out even when named.
func TestBudgetTargets(t *testing.T) {
	o := &options{budgets: true}
	if err := o.setTargets(defaultTargets); err != nil {
		t.Fatal(err)
	}
	if got := o.budgetTargets(); !slices.Equal(got, []string{gatewayBudgets, gatewayPlan}) {
		t.Errorf("default budgets targets %v", got)
	}
	b := &bench{o: o}
	for _, sc := range scenarios {
		got := b.targetsOf(sc)
		if slices.Contains(got, gatewayBudgets) != sc.like || slices.Contains(got, gatewayPlan) != sc.like {
			t.Errorf("%s (like %v): targets %v", sc.key, sc.like, got)
		}
	}

	off := &options{}
	if err := off.setTargets(defaultTargets + ",gateway_plan"); err != nil {
		t.Fatal(err)
	}
	if off.has(gatewayBudgets) || off.has(gatewayPlan) || !off.has(gatewayExample) || len(off.targets) != 5 {
		t.Errorf("-budgets=false: targets %v", off.targets)
	}
	if err := (&options{}).setTargets("gateway,nonsense"); err == nil || !strings.Contains(err.Error(), `"nonsense"`) {
		t.Errorf("an unknown target: %v", err)
	}
}

// The plan goes into the main process's gateway app only, and only when
// gateway_plan runs; the gateway_pg process never gets it.
func TestCaddyfilePlan(t *testing.T) {
	s := &setup{mockAddr: "127.0.0.1:9", plan: true}
	main := s.caddyfileFor(2019, "sqlite /tmp/x/gateway.db", 8001, 8002)
	if !strings.Contains(main, "\t\t}\n"+planBlock+"\t}\n}\n") {
		t.Errorf("main Caddyfile has no plan at the end of its gateway app:\n%s", main)
	}
	if pg := s.caddyfileFor(2020, "postgres postgres://x/y", 0, 8003); strings.Contains(pg, "plan ") {
		t.Errorf("gateway_pg Caddyfile has the plan:\n%s", pg)
	}
	s.plan = false
	if main := s.caddyfileFor(2019, "sqlite /tmp/x/gateway.db", 8001, 8002); strings.Contains(main, "plan ") || strings.Contains(main, "models_group") {
		t.Errorf("plan without gateway_plan:\n%s", main)
	}
}

// What /api/user/self says decides whether the windows really counted the
// run: every window must show spend, and the plan must have paid.
func TestWindowsCheck(t *testing.T) {
	body := `{"id":3,"username":"bench_budgets","used_quota":812,"budget":{"windows":[
		{"subject":"key:2","window":"monthly","limit":1000000000,"spent":812,"reset_at":"2026-12-01T00:00:00Z"},
		{"subject":"user:3","window":"5h","limit":500000000,"spent":812},
		{"subject":"user:3","window":"daily","limit":1000000000,"spent":812}]}}`
	c := &windowsCheck{}
	if err := parseSelf([]byte(body), c); err != nil {
		t.Fatal(err)
	}
	if v := c.verdict(gatewayBudgets); v != "" || c.UsedQuota != 812 || len(c.Windows) != 3 {
		t.Errorf("verdict %q, check %+v", v, c)
	}
	c.Windows[1].Spent = 0
	if v := c.verdict(gatewayBudgets); !strings.Contains(v, "5h window of user:3 counted nothing") {
		t.Errorf("a window that counted nothing: %q", v)
	}
	if v := (&windowsCheck{Windows: c.Windows[:2]}).verdict(gatewayBudgets); !strings.Contains(v, "2 windows, want 3") {
		t.Errorf("a missing window: %q", v)
	}

	plan := &windowsCheck{Plan: benchPlan, Windows: []windowSpent{{"plan:bench/user:4", "5h", 1, 5}, {"plan:bench/user:4", "weekly", 1, 5}}}
	if v := plan.verdict(gatewayPlan); v != "" {
		t.Errorf("plan: %q", v)
	}
	plan.UsedQuota = 7
	if v := plan.verdict(gatewayPlan); !strings.Contains(v, "balance paid 7") {
		t.Errorf("a plan user whose balance paid: %q", v)
	}
	plan.UsedQuota, plan.Plan = 0, ""
	if v := plan.verdict(gatewayPlan); !strings.Contains(v, "plan \"\"") {
		t.Errorf("no plan: %q", v)
	}
	if err := parseSelf([]byte(`{"id":1}`), &windowsCheck{}); err == nil {
		t.Error("an answer without budget passed")
	}
	if v := (&windowsCheck{Error: "status 401"}).verdict(gatewayBudgets); v != "status 401" {
		t.Errorf("an error: %q", v)
	}
}

// The windows table sets each budgets target against gateway_example of
// the same run: the difference in the figure's unit and the ratio.
func TestWindowFigures(t *testing.T) {
	r := &report{WindowChecks: map[string]*windowsCheck{
		gatewayBudgets: {Windows: []windowSpent{{"key:2", "monthly", 9, 1}, {"user:3", "5h", 9, 1}, {"user:3", "daily", 9, 1}}},
		gatewayPlan:    {Plan: benchPlan, UsedQuota: 3, Windows: []windowSpent{{"plan:bench/user:4", "5h", 9, 1}, {"plan:bench/user:4", "weekly", 9, 1}}},
	}}
	tr := func(thr, cpu float64, errs int) *targetResult {
		return &targetResult{Throughput: thr, CPUPerRequestUs: cpu, P50ms: 0.4, TTFEP50ms: 0.5, Errors: errs}
	}
	for _, key := range []string{"c1", "c50", "stream_c1", "stream_c50"} {
		r.Scenarios = append(r.Scenarios, &scenarioResult{Key: key, Targets: map[string]*targetResult{
			gatewayExample: tr(5000, 150, 0), gatewayBudgets: tr(4500, 165, 0), gatewayPlan: tr(5000, 160, 1),
		}})
	}
	r.buildFigures(&options{})
	var cpu *figure
	for _, f := range r.Figures {
		if f.Windows && f.Name == "c50 CPU per request" {
			cpu = f
		}
	}
	if cpu == nil || cpu.Ratio != nil {
		t.Fatalf("c50 CPU figure %+v", cpu)
	}
	if vs := cpu.Versus[gatewayBudgets]; vs.Diff != 15 || vs.Ratio != 1.1 {
		t.Errorf("budgets against example: %+v", vs)
	}
	if vs := cpu.Versus[gatewayPlan]; vs.Diff != 10 {
		t.Errorf("plan against example: %+v", vs)
	}
	if r.Pass {
		t.Error("a failed request on gateway_plan and a plan paid from the balance should fail the run")
	}
	var b strings.Builder
	r.printTable(&b)
	out := b.String()
	head, rest, _ := strings.Cut(out, "Without access logs")
	for _, want := range []string{"Spending windows", "+windows", "+15.0", "1.10×", "-500", "0.90×",
		"gateway_budgets windows after the run: key:2 monthly 1 of 9 units", "balance paid 3 units; WRONG: the balance paid 3 units"} {
		if !strings.Contains(head, want) {
			t.Errorf("windows table has no %q:\n%s", want, out)
		}
	}
	if strings.Contains(rest, "+windows") || strings.Contains(rest, "windows that counted") {
		t.Errorf("windows figures in the main table:\n%s", rest)
	}

	var plain strings.Builder
	none := &report{Finished: time.Now()}
	none.buildFigures(&options{})
	none.printTable(&plain)
	if strings.Contains(plain.String(), "Spending windows") {
		t.Errorf("a run without the budgets targets prints their table:\n%s", plain.String())
	}
}
