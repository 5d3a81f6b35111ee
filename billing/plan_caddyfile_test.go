package billing

import (
	"reflect"
	"testing"
)

// The Caddyfile's lines become the JSON config as docs/budgets.md says,
// and malformed ones are refused naming the line.
func TestBudgetConfigSet(t *testing.T) {
	c := &BudgetConfig{}
	run := func(opt string, args []string, lines ...[]string) error {
		line, err := c.Set(opt, args)
		if err != nil {
			return err
		}
		for _, l := range lines {
			if err := line(l[0], l[1:]); err != nil {
				return err
			}
		}
		return nil
	}
	for _, ok := range []error{
		run("budget_timezone", []string{"Asia/Shanghai"}),
		run("models_group", []string{"coding", "claude-*", "gpt-5*"}),
		run("plan", []string{"pro"}, []string{"window", "5h", "10"}, []string{"weekly", "60"}, []string{"models", "group", "coding"},
			[]string{"models", "gpt-4o"}, []string{"rpm", "120"}, []string{"max_parallel", "4"}, []string{"then", "balance"}),
		run("budget_group", []string{"team"}, []string{"monthly", "500"}, []string{"plan", "pro"}),
	} {
		if ok != nil {
			t.Fatal(ok)
		}
	}
	want := &BudgetConfig{Timezone: "Asia/Shanghai", ModelGroups: map[string][]string{"coding": {"claude-*", "gpt-5*"}},
		Plans: map[string]*PlanConfig{"pro": {Windows: map[string]string{"5h": "10", "weekly": "60"}, Models: []string{"group:coding", "gpt-4o"},
			RPM: 120, MaxParallel: 4, ThenBalance: true}},
		Groups: map[string]*GroupConfig{"team": {Windows: map[string]string{"monthly": "500"}, Plan: "pro"}}}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("config %+v", c)
	}
	if _, err := c.Build(&Spend{}, nil, 0); err != nil {
		t.Fatal(err)
	}
	for _, bad := range [][]string{{"hourly", "1"}, {"daily", "ten"}, {"rpm", "-1"}, {"then", "nothing"}, {"5h"}} {
		if err := run("plan", []string{"p"}, bad); err == nil {
			t.Errorf("plan line %q accepted", bad)
		}
	}
	if err := run("models_group", []string{"only-name"}); err == nil {
		t.Error("a model group without models accepted")
	}
	if err := run("budget_timezone", []string{"UTC"}, []string{"x"}); err == nil {
		t.Error("a block after budget_timezone accepted")
	}
}
