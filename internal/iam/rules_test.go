package iam_test

import (
	"fmt"
	"strconv"
	"testing"
)

// evalRule evaluates the condition functions of CloudFormation Rules that
// template.yaml uses, with parameter values as strings (as Rules see them).
func evalRule(t *testing.T, expr any, params map[string]string) any {
	t.Helper()
	switch e := expr.(type) {
	case string:
		return e
	case []any:
		out := make([]any, len(e))
		for i, x := range e {
			out[i] = evalRule(t, x, params)
		}
		return out
	case map[string]any:
		if len(e) != 1 {
			t.Fatalf("rule expression %v: want one function", e)
		}
		for fn, arg := range e {
			args, _ := arg.([]any)
			switch fn {
			case "Ref":
				v, ok := params[fmt.Sprint(arg)]
				if !ok {
					t.Fatalf("rule refers to parameter %v, which the test does not set", arg)
				}
				return v
			case "Fn::Not":
				return !evalRule(t, args[0], params).(bool)
			case "Fn::Or":
				for _, a := range args {
					if evalRule(t, a, params).(bool) {
						return true
					}
				}
				return false
			case "Fn::And":
				for _, a := range args {
					if !evalRule(t, a, params).(bool) {
						return false
					}
				}
				return true
			case "Fn::Equals":
				return fmt.Sprint(evalRule(t, args[0], params)) == fmt.Sprint(evalRule(t, args[1], params))
			case "Fn::Contains":
				v := fmt.Sprint(evalRule(t, args[1], params))
				for _, x := range evalRule(t, args[0], params).([]any) {
					if fmt.Sprint(x) == v {
						return true
					}
				}
				return false
			}
			t.Fatalf("rule function %s: not known to the test", fn)
		}
	}
	t.Fatalf("rule expression %v (%T): not known to the test", expr, expr)
	return nil
}

// ruleHolds reports whether the named rule of template.yaml accepts params.
func ruleHolds(t *testing.T, tp template, name string, params map[string]string) bool {
	t.Helper()
	rules, _ := tp["Rules"].(map[string]any)
	rule, ok := rules[name].(map[string]any)
	if !ok {
		t.Fatalf("template.yaml has no rule %s", name)
	}
	if c, ok := rule["RuleCondition"]; ok && !evalRule(t, c, params).(bool) {
		return true
	}
	for _, a := range list(rule["Assertions"]) {
		if !evalRule(t, a.(map[string]any)["Assert"], params).(bool) {
			return false
		}
	}
	return true
}

// paramRange is the MinValue..MaxValue of a Number parameter.
func paramRange(t *testing.T, tp template, name string) (lo, hi int) {
	t.Helper()
	ps, _ := tp["Parameters"].(map[string]any)
	p, _ := ps[name].(map[string]any)
	lo, err1 := strconv.Atoi(fmt.Sprint(p["MinValue"]))
	hi, err2 := strconv.Atoi(fmt.Sprint(p["MaxValue"]))
	if err1 != nil || err2 != nil {
		t.Fatalf("parameter %s: MinValue %v MaxValue %v", name, p["MinValue"], p["MaxValue"])
	}
	return lo, hi
}

func TestRuleLeaseAtLeastTwiceRenewBefore(t *testing.T) {
	t.Parallel()
	tp := loadTemplate(t)
	rlo, rhi := paramRange(t, tp, "RenewBeforeSeconds")
	llo, lhi := paramRange(t, tp, "LeaseDurationSeconds")
	for r := rlo; r <= rhi; r++ {
		for l := llo; l <= lhi; l++ {
			params := map[string]string{"RenewBeforeSeconds": strconv.Itoa(r), "LeaseDurationSeconds": strconv.Itoa(l)}
			if got, want := ruleHolds(t, tp, "LeaseAtLeastTwiceRenewBefore", params), l >= 2*r; got != want {
				t.Errorf("lease %d, renew before %d: rule accepts %v, want %v", l, r, got, want)
			}
		}
	}
}

func TestRuleBatchOverTenNeedsWindow(t *testing.T) {
	t.Parallel()
	tp := loadTemplate(t)
	for _, c := range []struct {
		size, window string
		ok           bool
	}{{"10", "0", true}, {"1", "0", true}, {"11", "0", false}, {"11", "1", true}, {"1000", "0", false}, {"1000", "300", true}} {
		params := map[string]string{"WorkerBatchSize": c.size, "WorkerBatchWindowSeconds": c.window}
		if got := ruleHolds(t, tp, "BatchOverTenNeedsWindow", params); got != c.ok {
			t.Errorf("batch %s window %s: rule accepts %v, want %v", c.size, c.window, got, c.ok)
		}
	}
}
