package iam_test

// Tests that hold template.yaml to the code: each role grants exactly what
// internal/iam lists for its function, and each function's environment sets
// exactly the variables its code reads.

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/leasehold/leasehold/internal/cli/scaffold"
	"github.com/leasehold/leasehold/internal/iam"
	"github.com/leasehold/leasehold/internal/lifecycle"
	"github.com/leasehold/leasehold/internal/schedule"
	"github.com/leasehold/leasehold/settings"
)

// template is template.yaml with its short-form intrinsics (!Ref, !GetAtt,
// !Sub, ...) turned into their long forms, as CloudFormation reads them.
type template map[string]any

func loadTemplate(t *testing.T) template {
	t.Helper()
	return loadTemplateFile(t, filepath.Join(moduleRoot(t), "template.yaml"))
}

// loadTemplateFile is loadTemplate of another template.
func loadTemplateFile(t *testing.T, path string) template {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("parse template.yaml: %v", err)
	}
	v, err := fromNode(&doc)
	if err != nil {
		t.Fatalf("template.yaml: %v", err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("template.yaml is not a mapping")
	}
	return m
}

// moduleRoot is where go.mod is: two levels above this package.
func moduleRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not found: %v", err)
	}
	return root
}

// fromNode converts a YAML node to maps, slices and scalars, with tags such
// as !GetAtt X.Arn turned into {"Fn::GetAtt": ["X", "Arn"]}.
func fromNode(n *yaml.Node) (any, error) {
	var v any
	switch n.Kind {
	case yaml.DocumentNode:
		return fromNode(n.Content[0])
	case yaml.AliasNode:
		return fromNode(n.Alias)
	case yaml.MappingNode:
		m := map[string]any{}
		for i := 0; i < len(n.Content); i += 2 {
			val, err := fromNode(n.Content[i+1])
			if err != nil {
				return nil, err
			}
			m[n.Content[i].Value] = val
		}
		v = m
	case yaml.SequenceNode:
		s := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			val, err := fromNode(c)
			if err != nil {
				return nil, err
			}
			s = append(s, val)
		}
		v = s
	case yaml.ScalarNode:
		if strings.HasPrefix(n.Tag, "!!") {
			if err := n.Decode(&v); err != nil {
				return nil, fmt.Errorf("line %d: %w", n.Line, err)
			}
		} else {
			v = n.Value
		}
	}
	if strings.HasPrefix(n.Tag, "!!") || n.Tag == "" {
		return v, nil
	}
	name := strings.TrimPrefix(n.Tag, "!")
	switch name {
	case "Ref", "Condition":
		return map[string]any{name: v}, nil
	case "GetAtt":
		if s, ok := v.(string); ok {
			id, attr, _ := strings.Cut(s, ".")
			v = []any{id, attr}
		}
	}
	return map[string]any{"Fn::" + name: v}, nil
}

func (tp template) resource(t *testing.T, id string) map[string]any {
	t.Helper()
	res, _ := tp["Resources"].(map[string]any)
	r, ok := res[id].(map[string]any)
	if !ok {
		t.Fatalf("template.yaml has no resource %s", id)
	}
	return r
}

func props(r map[string]any) map[string]any {
	p, _ := r["Properties"].(map[string]any)
	return p
}

// list reads a string-or-list field.
func list(v any) []any {
	if s, ok := v.([]any); ok {
		return s
	}
	return []any{v}
}

// resourceID names the template resource an ARN expression stands for:
// !GetAtt X.Arn is "X", !Sub "${X.Arn}/index/NAME" is "X/index/NAME", and
// !Ref NamedQueueArns and !Ref NamedDeadLetterQueueArns, the parameters'
// lists of queue ARNs, are iam.NamedQueues and iam.NamedDeadLetterQueues.
func resourceID(expr any) (string, error) {
	m, ok := expr.(map[string]any)
	if !ok {
		return "", fmt.Errorf("resource %v is not an ARN of a resource of the template", expr)
	}
	if ga, ok := m["Fn::GetAtt"].([]any); ok && len(ga) == 2 && ga[1] == "Arn" {
		return fmt.Sprint(ga[0]), nil
	}
	if m["Ref"] == iam.NamedQueues || m["Ref"] == iam.NamedDeadLetterQueues {
		return fmt.Sprint(m["Ref"]), nil // a parameter's list of queue ARNs
	}
	if sub, ok := m["Fn::Sub"].(string); ok && strings.HasPrefix(sub, "${") {
		ref, rest, ok := strings.Cut(sub[2:], "}")
		if id, found := strings.CutSuffix(ref, ".Arn"); ok && found && subSuffixOK(id, rest) {
			return id + rest, nil
		}
	}
	// !Sub ["${V}REST", {V: ARN}], as a project names the nested stack's
	// payload bucket: the ARN's resource, then REST.
	if sub, ok := m["Fn::Sub"].([]any); ok && len(sub) == 2 {
		s, _ := sub[0].(string)
		vars, _ := sub[1].(map[string]any)
		if name, rest, ok := strings.Cut(strings.TrimPrefix(s, "${"), "}"); ok && strings.HasPrefix(s, "${") && len(vars) == 1 && vars[name] != nil {
			if id, err := resourceID(vars[name]); err == nil && subSuffixOK(id, rest) {
				return id + rest, nil
			}
		}
	}
	return "", fmt.Errorf("resource %v is not an ARN of a resource of the template", expr)
}

// subSuffixOK reports whether REST after a resource's ARN names one part
// of it: no pattern, except the payload bucket's objects under tasks/,
// which S3 can grant only by key prefix (iam.PayloadObjects).
func subSuffixOK(id, rest string) bool {
	return !strings.ContainsAny(rest, "*$") || id+rest == iam.PayloadObjects
}

// granted reads what role allows, as grants, with a failure for anything
// a least-privilege role must not have.
func granted(t *testing.T, tp template, role string) []iam.Grant {
	t.Helper()
	r := tp.resource(t, role)
	if r["Type"] != "AWS::IAM::Role" {
		t.Fatalf("%s is a %v, want AWS::IAM::Role", role, r["Type"])
	}
	p := props(r)
	if _, ok := p["ManagedPolicyArns"]; ok {
		t.Errorf("%s attaches managed policies; grant actions inline so the test can see them", role)
	}
	var out []iam.Grant
	for _, pol := range list(p["Policies"]) {
		doc, _ := pol.(map[string]any)["PolicyDocument"].(map[string]any)
		for _, st := range statements(doc) {
			if st["Effect"] != "Allow" || st["NotAction"] != nil || st["NotResource"] != nil || st["Condition"] != nil {
				t.Errorf("%s: statement %v: want a plain Allow of actions on resources", role, st["Sid"])
				continue
			}
			for _, a := range list(st["Action"]) {
				action := fmt.Sprint(a)
				if strings.Contains(action, "*") {
					t.Errorf("%s: wildcard action %q", role, action)
				}
				for _, res := range list(st["Resource"]) {
					id, err := resourceID(res)
					if err != nil {
						t.Errorf("%s: %s: %v", role, action, err)
						continue
					}
					out = append(out, iam.Grant{Action: action, Resource: id})
				}
			}
		}
	}
	return out
}

func TestRolesGrantExactlyTheDeclaredActions(t *testing.T) {
	t.Parallel()
	tp := loadTemplate(t)
	for _, f := range iam.Functions {
		t.Run(f.LogicalID, func(t *testing.T) {
			t.Parallel()
			fn := tp.resource(t, f.LogicalID)
			if got := props(fn)["Role"]; fmt.Sprint(got) != fmt.Sprint(map[string]any{"Fn::GetAtt": []any{f.Role, "Arn"}}) {
				t.Fatalf("%s's Role is %v, want !GetAtt %s.Arn", f.LogicalID, got, f.Role)
			}
			assume := fmt.Sprint(props(tp.resource(t, f.Role))["AssumeRolePolicyDocument"])
			if !strings.Contains(assume, "lambda.amazonaws.com") || strings.Count(assume, "Principal") != 1 {
				t.Errorf("%s must be assumable by Lambda only: %s", f.Role, assume)
			}
			diffGrants(t, f.Role, granted(t, tp, f.Role), f.Granted())
		})
	}
}

// diffGrants fails for every grant in only one of got and want.
func diffGrants(t *testing.T, what string, got, want []iam.Grant) {
	t.Helper()
	in := func(gs []iam.Grant, g iam.Grant) bool { return slices.Contains(gs, g) }
	for _, g := range got {
		if !in(want, g) {
			t.Errorf("%s grants %s on %s, which internal/iam does not list: remove it, or list the call that needs it", what, g.Action, g.Resource)
		}
	}
	for _, g := range want {
		if !in(got, g) {
			t.Errorf("%s lacks %s on %s, which internal/iam lists", what, g.Action, g.Resource)
		}
	}
}

// TestTemplateParsing guards the converter the other tests rely on.
func TestTemplateParsing(t *testing.T) {
	t.Parallel()
	tp := loadTemplate(t)
	q := props(tp.resource(t, "WorkQueue"))
	rp := q["RedrivePolicy"].(map[string]any)
	if got, want := fmt.Sprint(rp["deadLetterTargetArn"]), fmt.Sprint(map[string]any{"Fn::GetAtt": []any{"WorkDeadLetterQueue", "Arn"}}); got != want {
		t.Errorf("deadLetterTargetArn = %s, want %s", got, want)
	}
	id, err := resourceID(map[string]any{"Fn::Sub": "${TasksTable.Arn}/index/sweep"})
	if err != nil || id != iam.SweepIndex {
		t.Errorf("resourceID(index) = %q, %v", id, err)
	}
	for sub, want := range map[string]any{
		"${PayloadBucket.Arn}/tasks/*": "${PayloadBucket.Arn}/tasks/*",
		"nested":                       []any{"${Bucket}/tasks/*", map[string]any{"Bucket": map[string]any{"Fn::GetAtt": []any{"PayloadBucket", "Arn"}}}},
	} {
		if id, err := resourceID(map[string]any{"Fn::Sub": want}); err != nil || id != iam.PayloadObjects {
			t.Errorf("resourceID(%s) = %q, %v; want %s", sub, id, err, iam.PayloadObjects)
		}
	}
	for _, bad := range []any{"*", map[string]any{"Fn::Sub": "${TasksTable.Arn}/*"}, map[string]any{"Ref": "WorkQueue"},
		map[string]any{"Fn::Sub": "${PayloadBucket.Arn}/*"}, map[string]any{"Fn::Sub": "${TasksTable.Arn}/tasks/*"}} {
		if id, err := resourceID(bad); err == nil {
			t.Errorf("resourceID(%v) = %q, want an error", bad, id)
		}
	}
}

// The work queue's timing: a visibility timeout of at least six times the
// worker's timeout, as AWS advises for a queue that triggers a function, and
// one maxReceiveCount in template.yaml, in the local stack and in the
// worker's default for replacing tokens near it.
func TestWorkQueueTiming(t *testing.T) {
	t.Parallel()
	tp := loadTemplate(t)
	q := props(tp.resource(t, "WorkQueue"))
	params, _ := tp["Parameters"].(map[string]any)
	timeout, _ := params["WorkerTimeoutSeconds"].(map[string]any)
	maxTimeout, err := strconv.Atoi(fmt.Sprint(timeout["MaxValue"]))
	if err != nil {
		t.Fatalf("WorkerTimeoutSeconds MaxValue: %v", err)
	}
	visibility, err := strconv.Atoi(fmt.Sprint(q["VisibilityTimeout"]))
	if err != nil {
		t.Fatalf("WorkQueue VisibilityTimeout %v is not a number: %v", q["VisibilityTimeout"], err)
	}
	if visibility < 6*maxTimeout {
		t.Errorf("work queue visibility timeout %ds, want at least 6 x the largest worker timeout (%ds)", visibility, maxTimeout)
	}
	if fn := props(tp.resource(t, "WorkerFunction")); fmt.Sprint(fn["Timeout"]) != fmt.Sprint(map[string]any{"Ref": "WorkerTimeoutSeconds"}) {
		t.Errorf("worker timeout %v, want !Ref WorkerTimeoutSeconds", fn["Timeout"])
	}

	rp, _ := q["RedrivePolicy"].(map[string]any)
	if got := fmt.Sprint(rp["maxReceiveCount"]); got != strconv.Itoa(lifecycle.DefaultMaxReceiveCount) {
		t.Errorf("template maxReceiveCount %s, want lifecycle.DefaultMaxReceiveCount %d", got, lifecycle.DefaultMaxReceiveCount)
	}
	raw, err := os.ReadFile(filepath.Join(moduleRoot(t), "localstack", "resources.json"))
	if err != nil {
		t.Fatal(err)
	}
	var stack struct {
		Queues []struct {
			CreateQueue   struct{ QueueName string }
			RedrivePolicy struct {
				MaxReceiveCount int `json:"maxReceiveCount"`
			}
		}
	}
	if err := json.Unmarshal(raw, &stack); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, q := range stack.Queues {
		if q.CreateQueue.QueueName == "leasehold-work" {
			found = true
			if q.RedrivePolicy.MaxReceiveCount != lifecycle.DefaultMaxReceiveCount {
				t.Errorf("localstack work queue maxReceiveCount %d, want %d as in template.yaml", q.RedrivePolicy.MaxReceiveCount, lifecycle.DefaultMaxReceiveCount)
			}
		}
	}
	if !found {
		t.Error("localstack/resources.json has no leasehold-work queue")
	}
	env, _ := props(tp.resource(t, "WorkerFunction"))["Environment"].(map[string]any)
	vars, _ := env["Variables"].(map[string]any)
	if got := fmt.Sprint(vars[settings.EnvReplaceAtReceiveCount]); got != strconv.Itoa(lifecycle.DefaultReplaceAtReceiveCount) {
		t.Errorf("%s = %s, want %d (maxReceiveCount - 2)", settings.EnvReplaceAtReceiveCount, got, lifecycle.DefaultReplaceAtReceiveCount)
	}
}

// impliesTracing reports whether the condition named cond holds only when
// TracingActive does: it is TracingActive, or an Fn::And that includes it
// (WorkerTracingActive: the worker's role exists only with DeployWorker).
func impliesTracing(tp template, cond any) bool {
	if cond == "TracingActive" {
		return true
	}
	name, ok := cond.(string)
	if !ok {
		return false
	}
	conds, _ := tp["Conditions"].(map[string]any)
	def, _ := conds[name].(map[string]any)
	for _, c := range list(def["Fn::And"]) {
		if c, ok := c.(map[string]any); ok && c["Condition"] == "TracingActive" {
			return true
		}
	}
	return false
}

// The only IAM policies outside the roles are the X-Ray grants that
// Tracing=Active adds: conditional, one per role, exactly the two calls
// Lambda makes to send segments, which X-Ray cannot scope to a resource.
func TestOnlyTracingPoliciesOutsideRoles(t *testing.T) {
	t.Parallel()
	tp := loadTemplate(t)
	res, _ := tp["Resources"].(map[string]any)
	attached := map[string]bool{}
	for id, r := range res {
		r := r.(map[string]any)
		switch r["Type"] {
		case "AWS::IAM::Policy", "AWS::IAM::ManagedPolicy", "AWS::IAM::RolePolicy":
		default:
			continue
		}
		if isOperatorPolicy(id) {
			continue // TestOperatorPoliciesGrantExactlyTheirCalls
		}
		if r["Type"] != "AWS::IAM::RolePolicy" || !impliesTracing(tp, r["Condition"]) {
			t.Errorf("%s: a %v (condition %v); want only AWS::IAM::RolePolicy resources on condition TracingActive (or one that requires it)", id, r["Type"], r["Condition"])
			continue
		}
		p := props(r)
		role, _ := p["RoleName"].(map[string]any)
		name := fmt.Sprint(role["Ref"])
		attached[name] = true
		doc, _ := p["PolicyDocument"].(map[string]any)
		for _, st := range list(doc["Statement"]) {
			st := st.(map[string]any)
			acts := fmt.Sprint(list(st["Action"]))
			if st["Effect"] != "Allow" || acts != "[xray:PutTraceSegments xray:PutTelemetryRecords]" || st["Condition"] != nil {
				t.Errorf("%s: statement %v allows %s; want only xray:PutTraceSegments and xray:PutTelemetryRecords", id, st["Sid"], acts)
			}
		}
	}
	for _, f := range iam.Functions {
		if !attached[f.Role] {
			t.Errorf("no TracingActive policy for %s: Tracing=Active would leave %s unable to send segments", f.Role, f.LogicalID)
		}
	}
}

func isOperatorPolicy(id string) bool {
	return slices.ContainsFunc(iam.Policies, func(p iam.Policy) bool { return p.LogicalID == id })
}

// operatorGrants reads what an operator policy allows, as grants, each on
// a resource of the template, without conditions.
func operatorGrants(t *testing.T, tp template, id string) []iam.Grant {
	t.Helper()
	r := tp.resource(t, id)
	if r["Type"] != "AWS::IAM::ManagedPolicy" {
		t.Fatalf("%s is a %v, want AWS::IAM::ManagedPolicy", id, r["Type"])
	}
	p := props(r)
	for _, k := range []string{"Roles", "Users", "Groups"} {
		if p[k] != nil {
			t.Errorf("%s attaches itself to %s: an operator attaches it to whom they choose", id, k)
		}
	}
	doc, _ := p["PolicyDocument"].(map[string]any)
	var out []iam.Grant
	for _, st := range statements(doc) {
		if st["Effect"] != "Allow" || st["NotAction"] != nil || st["NotResource"] != nil || st["Condition"] != nil {
			t.Errorf("%s: statement %v: want a plain Allow of actions on resources", id, st["Sid"])
			continue
		}
		for _, a := range list(st["Action"]) {
			action := fmt.Sprint(a)
			if strings.Contains(action, "*") {
				t.Errorf("%s: wildcard action %q", id, action)
			}
			for _, res := range list(st["Resource"]) {
				rid, err := resourceID(res)
				if err != nil {
					t.Errorf("%s: %s: %v", id, action, err)
					continue
				}
				out = append(out, iam.Grant{Action: action, Resource: rid})
			}
		}
	}
	return out
}

// Each operator policy grants exactly the calls of its command, in
// template.yaml and in the template `leasehold init` writes (whose
// PauseQueuesPolicy stands in for the nested stack's), and the templates
// say where to find it (an output of its ARN).
func TestOperatorPoliciesGrantExactlyTheirCalls(t *testing.T) {
	t.Parallel()
	root := loadTemplate(t)
	dir := t.TempDir()
	if _, err := scaffold.Write(scaffold.Config{Dir: dir, Module: "example.com/thumbs"}); err != nil {
		t.Fatal(err)
	}
	outputs, _ := root["Outputs"].(map[string]any)
	resolved, err := resolveNested(map[string]any(loadTemplateFile(t, filepath.Join(dir, "template.yaml"))), "Leasehold", outputs)
	if err != nil {
		t.Fatal(err)
	}
	for name, tp := range map[string]template{"template.yaml": root, "the project's template.yaml": template(resolved.(map[string]any))} {
		outs, _ := tp["Outputs"].(map[string]any)
		for _, p := range iam.Policies {
			diffGrants(t, name+": "+p.LogicalID, operatorGrants(t, tp, p.LogicalID), p.Calls)
			out, _ := outs[p.LogicalID+"Arn"].(map[string]any)
			if fmt.Sprint(out["Value"]) != fmt.Sprint(map[string]any{"Ref": p.LogicalID}) {
				t.Errorf("%s: no output %sArn with !Ref %s", name, p.LogicalID, p.LogicalID)
			}
		}
	}
}

// Pausing needs only the queue's tag: PauseQueuesPolicy grants no Lambda
// action (lambda:UpdateEventSourceMapping cannot be limited to Enabled, and
// a FilterCriteria it sets has Lambda delete the SQS messages it does not
// match), and it covers the queues of NamedQueueArns as the work queue.
func TestPauseQueuesPolicyIsTheTagOnEveryWorkQueue(t *testing.T) {
	t.Parallel()
	for _, g := range iam.PauseQueues.Calls {
		if !strings.HasPrefix(g.Action, "sqs:") {
			t.Errorf("PauseQueuesPolicy grants %s on %s; want SQS calls only, no Lambda action", g.Action, g.Resource)
		}
	}
	for _, action := range []string{"sqs:TagQueue", "sqs:UntagQueue", "sqs:ListQueueTags"} {
		for _, q := range []string{iam.WorkQueue, iam.NamedQueues} {
			if !slices.Contains(iam.PauseQueues.Calls, iam.Grant{Action: action, Resource: q}) {
				t.Errorf("PauseQueuesPolicy lacks %s on %s", action, q)
			}
		}
	}
	// The worker reads the tag of the queue it consumes.
	if !slices.Contains(iam.Worker.Calls, iam.Grant{Action: "sqs:ListQueueTags", Resource: iam.WorkQueue}) {
		t.Error("the worker function cannot read its queue's pause tag (sqs:ListQueueTags on WorkQueue)")
	}
}

// The role EventBridge Scheduler assumes sends a slot's token to the work
// queue, and an undeliverable one to the schedule dead-letter queue; it can
// do nothing else, and only scheduler.amazonaws.com, for this account, may
// assume it.
func TestSchedulerRoleOnlySendsSlotTokens(t *testing.T) {
	t.Parallel()
	tp := loadTemplate(t)
	assume := fmt.Sprint(props(tp.resource(t, "SchedulerRole"))["AssumeRolePolicyDocument"])
	if !strings.Contains(assume, "scheduler.amazonaws.com") || strings.Count(assume, "Principal") != 1 || !strings.Contains(assume, "aws:SourceAccount") {
		t.Errorf("SchedulerRole must be assumable by EventBridge Scheduler of this account only: %s", assume)
	}
	diffGrants(t, "SchedulerRole", granted(t, tp, "SchedulerRole"), []iam.Grant{
		{Action: "sqs:SendMessage", Resource: "WorkQueue"},
		{Action: "sqs:SendMessage", Resource: "ScheduleDeadLetterQueue"},
	})
}

// The template's example schedule sends the token `leasehold schedule
// create` would: the same id rule, byte for byte.
func TestExampleScheduleInputIsTheCLIs(t *testing.T) {
	t.Parallel()
	tp := loadTemplate(t)
	target, _ := props(tp.resource(t, "ExampleScheduleResource"))["Target"].(map[string]any)
	input, _ := target["Input"].(map[string]any)
	sub, _ := input["Fn::Sub"].(string)
	got := strings.Replace(sub, "${ExampleScheduleKind}", "greet", 1)
	e, err := schedule.Parse("rate(1 hour)", schedule.AWS)
	if err != nil {
		t.Fatal(err)
	}
	want, err := schedule.Spec{Name: "example", Expr: e, Kind: "greet", Payload: []byte(`{"name":"schedule"}`)}.Input()
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("the example schedule's Input is\n%s\nleasehold schedule create writes\n%s", got, want)
	}
}
