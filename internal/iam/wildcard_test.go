package iam_test

import (
	"fmt"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/internal/cli/scaffold"
	"github.com/leasehold/leasehold/internal/iam"
)

// statements lists the statements of a policy document, an Fn::If
// statement (one kept only under a condition) by the statement it keeps.
func statements(doc map[string]any) []map[string]any {
	var out []map[string]any
	for _, st := range list(doc["Statement"]) {
		m, _ := st.(map[string]any)
		if branches, ok := m["Fn::If"].([]any); ok && len(branches) == 3 {
			for _, b := range branches[1:] {
				if b, ok := b.(map[string]any); ok && b["Ref"] != "AWS::NoValue" {
					out = append(out, b)
				}
			}
			continue
		}
		out = append(out, m)
	}
	return out
}

// wildcardGrants lists every grant of every role of tp whose resource is a
// pattern, not one resource: a "*" anywhere in it, as in
// !Sub "arn:...:${AWS::StackName}-*", which also covers the intake queue,
// the dead-letter queues and the queues of every stack whose name starts
// the same. The X-Ray policies (TestOnlyTracingPoliciesOutsideRoles) are
// one exception: X-Ray cannot scope its two calls to a resource. The
// payload bucket's objects under tasks/ (iam.PayloadObjects) are the
// other: S3 grants objects by key prefix, and tasks/ is every key the code
// writes in that one bucket.
func wildcardGrants(tp template) []string {
	var bad []string
	res, _ := tp["Resources"].(map[string]any)
	for id, r := range res {
		r, _ := r.(map[string]any)
		var docs []map[string]any
		switch r["Type"] {
		case "AWS::IAM::Role":
			for _, pol := range list(props(r)["Policies"]) {
				doc, _ := pol.(map[string]any)["PolicyDocument"].(map[string]any)
				docs = append(docs, doc)
			}
		case "AWS::IAM::Policy", "AWS::IAM::ManagedPolicy", "AWS::IAM::RolePolicy":
			doc, _ := props(r)["PolicyDocument"].(map[string]any)
			docs = append(docs, doc)
		}
		for _, doc := range docs {
			for _, st := range statements(doc) {
				acts := list(st["Action"])
				xray := slices.Equal(acts, []any{"xray:PutTraceSegments", "xray:PutTelemetryRecords"})
				for _, res := range list(st["Resource"]) {
					if id, err := resourceID(res); err == nil && id == iam.PayloadObjects {
						continue
					}
					if s := fmt.Sprint(res); strings.Contains(s, "*") && !xray {
						bad = append(bad, fmt.Sprintf("%s: %v on %s", id, st["Sid"], s))
					}
				}
			}
		}
	}
	slices.Sort(bad)
	return bad
}

// No role in template.yaml, in the template `leasehold init` writes or in
// that template with the second fleet of docs/deploy.md grants anything on
// a wildcard resource: each grant names one resource (issue 18, item 18).
func TestGrantsNameNoWildcardResource(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if _, err := scaffold.Write(scaffold.Config{Dir: dir, Module: "example.com/thumbs"}); err != nil {
		t.Fatal(err)
	}
	project := loadTemplateFile(t, filepath.Join(dir, "template.yaml"))
	fleet := filepath.Join(t.TempDir(), "template.yaml")
	if _, err := scaffold.Write(scaffold.Config{Dir: filepath.Dir(fleet), Module: "example.com/thumbs"}); err != nil {
		t.Fatal(err)
	}
	if err := scaffold.AddFleetExample(moduleRoot(t), fleet); err != nil {
		t.Fatal(err)
	}
	root := loadTemplate(t)
	// A project's roles name the nested stack's outputs: read them as what
	// those outputs are.
	outputs, _ := root["Outputs"].(map[string]any)
	nested := func(tp template) template {
		resolved, err := resolveNested(map[string]any(tp), "Leasehold", outputs)
		if err != nil {
			t.Fatal(err)
		}
		return template(resolved.(map[string]any))
	}
	for name, tp := range map[string]template{
		"template.yaml":                       root,
		"the project's template.yaml":         nested(project),
		"the project's template with a fleet": nested(loadTemplateFile(t, fleet)),
	} {
		if bad := wildcardGrants(tp); len(bad) > 0 {
			t.Errorf("%s grants on wildcard resources; name each resource:\n  %s", name, strings.Join(bad, "\n  "))
		}
	}
}

// The check itself: a grant on the stack's queues by pattern is caught.
func TestWildcardGrantsAreFound(t *testing.T) {
	t.Parallel()
	role := func(res any) template {
		return template{"Resources": map[string]any{"R": map[string]any{
			"Type": "AWS::IAM::Role",
			"Properties": map[string]any{"Policies": []any{map[string]any{"PolicyDocument": map[string]any{
				"Statement": []any{map[string]any{"Fn::If": []any{"C", map[string]any{"Sid": "S", "Action": "sqs:SendMessage", "Resource": res}, map[string]any{"Ref": "AWS::NoValue"}}}},
			}}}},
		}}}
	}
	bad := wildcardGrants(role(map[string]any{"Fn::Sub": "arn:${AWS::Partition}:sqs:${AWS::Region}:${AWS::AccountId}:${AWS::StackName}-*"}))
	if len(bad) != 1 {
		t.Errorf("a conditional grant on ${AWS::StackName}-* was not found: %v", bad)
	}
	if bad := wildcardGrants(role(map[string]any{"Fn::GetAtt": []any{"WorkQueue", "Arn"}})); len(bad) != 0 {
		t.Errorf("a grant on one queue was taken for a wildcard: %v", bad)
	}
}

// The role EventBridge Scheduler assumes can be assumed only for schedules
// of this stack's schedule group: aws:SourceAccount alone would let any
// schedule of the account (of any group, made by anyone who may create
// schedules and pass some role) act as it (issue 18, item 19).
func TestSchedulerRoleTrustsOnlyTheScheduleGroup(t *testing.T) {
	t.Parallel()
	tp := loadTemplate(t)
	doc, _ := props(tp.resource(t, "SchedulerRole"))["AssumeRolePolicyDocument"].(map[string]any)
	sts := list(doc["Statement"])
	if len(sts) != 1 {
		t.Fatalf("SchedulerRole's trust policy has %d statements, want 1", len(sts))
	}
	cond, _ := sts[0].(map[string]any)["Condition"].(map[string]any)
	want := map[string]any{
		"StringEquals": map[string]any{"aws:SourceAccount": map[string]any{"Ref": "AWS::AccountId"}},
		"ArnLike": map[string]any{"aws:SourceArn": map[string]any{
			"Fn::Sub": "arn:${AWS::Partition}:scheduler:${AWS::Region}:${AWS::AccountId}:schedule/${ScheduleGroup}/*"}},
	}
	if !reflect.DeepEqual(cond, want) {
		t.Errorf("SchedulerRole's trust condition is\n%v\nwant\n%v", cond, want)
	}
	if name := fmt.Sprint(props(tp.resource(t, "ScheduleGroup"))["Name"]); !strings.Contains(name, "AWS::StackName") {
		t.Errorf("ScheduleGroup's name %s; the condition's ${ScheduleGroup} is its name", name)
	}
}
