package iam_test

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/internal/cli/scaffold"
	"github.com/leasehold/leasehold/internal/iam"
)

// The worker function of a project `leasehold init` writes is leasehold's
// bundled worker in another template: once every output of the nested
// leasehold stack it reads is replaced by what that output is in
// template.yaml, its role grants exactly what WorkerRole grants, and its
// environment, timeout, memory and event source are WorkerFunction's. So
// the project's worker follows internal/iam as the bundled one does.
func TestScaffoldWorkerIsTheBundledWorker(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if _, err := scaffold.Write(scaffold.Config{Dir: dir, Module: "example.com/thumbs"}); err != nil {
		t.Fatal(err)
	}
	root := loadTemplate(t)
	project := loadTemplateFile(t, filepath.Join(dir, "template.yaml"))
	nested := project.resource(t, "Leasehold")
	if loc := props(nested)["Location"]; loc != scaffold.InfraDir+"/template.yaml" {
		t.Fatalf("the project nests %v, want %s/template.yaml", loc, scaffold.InfraDir)
	}
	if dw := fmt.Sprint(props(nested)["Parameters"].(map[string]any)["DeployWorker"]); dw != "false" {
		t.Errorf("the nested stack's DeployWorker is %s, want false", dw)
	}
	outputs, _ := root["Outputs"].(map[string]any)
	resolved, err := resolveNested(map[string]any(project), "Leasehold", outputs)
	if err != nil {
		t.Fatal(err)
	}
	tp := template(resolved.(map[string]any))

	diffGrants(t, "the project's WorkerRole", granted(t, tp, "WorkerRole"), granted(t, root, "WorkerRole"))

	got, want := props(tp.resource(t, "WorkerFunction")), props(root.resource(t, "WorkerFunction"))
	for _, field := range []string{"Environment", "Timeout", "MemorySize", "Events", "LoggingConfig"} {
		if !reflect.DeepEqual(got[field], want[field]) {
			t.Errorf("the project's WorkerFunction %s is\n%v\nwant (as leasehold's)\n%v", field, got[field], want[field])
		}
	}
}

// resolveNested replaces each !GetAtt NESTED.Outputs.NAME in v with the
// value of output NAME of the nested template.
func resolveNested(v any, nested string, outputs map[string]any) (any, error) {
	switch v := v.(type) {
	case map[string]any:
		if ga, ok := v["Fn::GetAtt"].([]any); ok && len(ga) == 2 && ga[0] == nested {
			name, ok := strings.CutPrefix(fmt.Sprint(ga[1]), "Outputs.")
			out, found := outputs[name].(map[string]any)
			if !ok || !found {
				return nil, fmt.Errorf("!GetAtt %s.%v: the nested template has no such output", nested, ga[1])
			}
			return out["Value"], nil
		}
		m := make(map[string]any, len(v))
		for k, e := range v {
			r, err := resolveNested(e, nested, outputs)
			if err != nil {
				return nil, err
			}
			m[k] = r
		}
		return m, nil
	case []any:
		s := make([]any, len(v))
		for i, e := range v {
			r, err := resolveNested(e, nested, outputs)
			if err != nil {
				return nil, err
			}
			s[i] = r
		}
		return s, nil
	}
	return v, nil
}

// The second-fleet example of docs/deploy.md, added to a generated
// project, is the project's worker again on queues of its own: its role
// grants what WorkerRole grants with the fleet's queues and log group in
// place of the work queue's, its function has WorkerFunction's environment
// and event source on its own queue, and its queue is a work queue whose
// ARN the deployer can list in NamedQueueArns.
func TestDeployDocFleetIsAWorkerOnQueuesOfItsOwn(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if _, err := scaffold.Write(scaffold.Config{Dir: dir, Module: "example.com/thumbs"}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "template.yaml")
	if err := scaffold.AddFleetExample(moduleRoot(t), path); err != nil {
		t.Fatal(err)
	}
	root := loadTemplate(t)
	project := loadTemplateFile(t, path)
	outputs, _ := root["Outputs"].(map[string]any)
	resolved, err := resolveNested(map[string]any(project), "Leasehold", outputs)
	if err != nil {
		t.Fatal(err)
	}
	tp := template(resolved.(map[string]any))

	own := map[string]string{iam.WorkQueue: "ImagesQueue", iam.WorkDeadLetterQueue: "ImagesDeadLetterQueue", iam.WorkerLogGroup: "ImagesWorkerLogGroup"}
	var want []iam.Grant
	for _, g := range granted(t, root, "WorkerRole") {
		if r, ok := own[g.Resource]; ok {
			g.Resource = r
		}
		want = append(want, g)
	}
	diffGrants(t, "the fleet's ImagesWorkerRole", granted(t, tp, "ImagesWorkerRole"), want)

	getAtt := func(id, attr string) any { return map[string]any{"Fn::GetAtt": []any{id, attr}} }
	fn, worker := props(tp.resource(t, "ImagesWorkerFunction")), props(root.resource(t, "WorkerFunction"))
	vars := func(p map[string]any) map[string]any {
		return p["Environment"].(map[string]any)["Variables"].(map[string]any)
	}
	gotEnv, wantEnv := vars(fn), maps.Clone(vars(worker))
	wantEnv["LEASEHOLD_WORK_QUEUE_URL"] = getAtt("ImagesQueue", "QueueUrl")
	wantEnv["LEASEHOLD_WORK_DLQ_URL"] = getAtt("ImagesDeadLetterQueue", "QueueUrl")
	if !reflect.DeepEqual(gotEnv, wantEnv) {
		t.Errorf("the fleet's environment is\n%v\nwant WorkerFunction's on its own queues\n%v", gotEnv, wantEnv)
	}
	for _, field := range []string{"Timeout", "MemorySize"} {
		if !reflect.DeepEqual(fn[field], worker[field]) {
			t.Errorf("the fleet's %s is %v, want WorkerFunction's %v", field, fn[field], worker[field])
		}
	}
	wantSource := maps.Clone(worker["Events"].(map[string]any)["Work"].(map[string]any)["Properties"].(map[string]any))
	wantSource["Queue"] = getAtt("ImagesQueue", "Arn")
	if got := fn["Events"].(map[string]any)["Work"].(map[string]any)["Properties"]; !reflect.DeepEqual(got, wantSource) {
		t.Errorf("the fleet's event source is\n%v\nwant\n%v", got, wantSource)
	}

	q, work := props(tp.resource(t, "ImagesQueue")), props(root.resource(t, "WorkQueue"))
	for _, field := range []string{"VisibilityTimeout", "SqsManagedSseEnabled"} {
		if !reflect.DeepEqual(q[field], work[field]) {
			t.Errorf("ImagesQueue's %s is %v, want WorkQueue's %v", field, q[field], work[field])
		}
	}
	rp, wrp := q["RedrivePolicy"].(map[string]any), work["RedrivePolicy"].(map[string]any)
	if !reflect.DeepEqual(rp["deadLetterTargetArn"], getAtt("ImagesDeadLetterQueue", "Arn")) || rp["maxReceiveCount"] != wrp["maxReceiveCount"] {
		t.Errorf("ImagesQueue's redrive policy is %v, want WorkQueue's %v to ImagesDeadLetterQueue", rp, wrp)
	}
	// Named after the project's stack, so the deployer knows its ARN for
	// NamedQueueArns before the deployment (docs/deploy.md).
	const name = "${AWS::StackName}-images"
	if got := q["QueueName"]; !reflect.DeepEqual(got, map[string]any{"Fn::Sub": name}) {
		t.Errorf("ImagesQueue's name is %v, want !Sub %q", got, name)
	}
	if _, ok := outputs["NamedQueuesArn"]; ok {
		t.Errorf("template.yaml still has the output NamedQueuesArn, a pattern of queue ARNs")
	}
	allow := props(tp.resource(t, "ImagesDeadLetterQueue"))["RedriveAllowPolicy"].(map[string]any)
	if got, want := fmt.Sprint(allow["sourceQueueArns"]), fmt.Sprint([]any{map[string]any{"Fn::Sub": "arn:${AWS::Partition}:sqs:${AWS::Region}:${AWS::AccountId}:" + name}}); got != want {
		t.Errorf("ImagesDeadLetterQueue admits %s, want only ImagesQueue %s", got, want)
	}
}

// outputRef is how the docs name a stack output: in a describe-stacks query
// or as a nested stack's attribute.
var outputRef = regexp.MustCompile(`OutputKey=='([A-Za-z0-9]+)'|\bOutputs\.([A-Za-z0-9]+)`)

// Every output that leasehold's README and docs read from a stack exists in
// leasehold's template and in the template of a project `leasehold init`
// writes (issue 19: the project's lacked the schedule outputs
// docs/workflows-schedules.md reads). The project passes every output of
// the nested leasehold stack through under the same name, since
// describe-stacks of the project's stack does not list the nested one's.
func TestScaffoldHasEveryOutputTheDocsRead(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if _, err := scaffold.Write(scaffold.Config{Dir: dir, Module: "example.com/thumbs"}); err != nil {
		t.Fatal(err)
	}
	rootOutputs, _ := loadTemplate(t)["Outputs"].(map[string]any)
	projectOutputs, _ := loadTemplateFile(t, filepath.Join(dir, "template.yaml"))["Outputs"].(map[string]any)
	if len(rootOutputs) == 0 || len(projectOutputs) == 0 {
		t.Fatalf("no outputs parsed: leasehold's %d, the project's %d", len(rootOutputs), len(projectOutputs))
	}

	docs, err := filepath.Glob(filepath.Join(moduleRoot(t), "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	docs = append(docs, filepath.Join(moduleRoot(t), "README.md"))
	read := map[string][]string{} // output name -> the docs that read it
	for _, doc := range docs {
		raw, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		text := string(raw)
		for _, m := range outputRef.FindAllStringSubmatch(text, -1) {
			read[m[1]+m[2]] = append(read[m[1]+m[2]], filepath.Base(doc))
		}
		// An output named in backquotes (the tables of outputs).
		for name := range rootOutputs {
			if strings.Contains(text, "`"+name+"`") {
				read[name] = append(read[name], filepath.Base(doc))
			}
		}
	}
	for _, want := range []string{"ScheduleGroupName", "SchedulerRoleArn", "ScheduleDeadLetterQueueArn", "TasksTableName"} {
		if _, ok := read[want]; !ok {
			t.Errorf("the docs no longer read output %s: is outputRef still right?", want)
		}
	}
	// Outputs the docs name only to say they were removed (the upgrade
	// notes of docs/operations.md): neither template may have them.
	removed := []string{"NamedQueuesArn", "NamedQueuePrefix"}
	for _, name := range slices.Sorted(maps.Keys(read)) {
		if slices.Contains(removed, name) {
			_, inRoot := rootOutputs[name]
			_, inProject := projectOutputs[name]
			if inRoot || inProject {
				t.Errorf("output %s, which the docs say was removed, is back (leasehold's: %t, the project's: %t)", name, inRoot, inProject)
			}
			continue
		}
		if _, ok := rootOutputs[name]; !ok {
			t.Errorf("%s read output %s, which leasehold's template.yaml lacks", strings.Join(slices.Compact(read[name]), ", "), name)
		}
		if _, ok := projectOutputs[name]; !ok {
			t.Errorf("%s read output %s, which the project's template.yaml lacks", strings.Join(slices.Compact(read[name]), ", "), name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(rootOutputs)) {
		out, ok := projectOutputs[name].(map[string]any)
		if !ok {
			t.Errorf("the project's template.yaml does not pass leasehold's output %s through", name)
			continue
		}
		if name == "WorkerFunctionName" || name == "PauseQueuesPolicyArn" { // the project's own worker, and the policy that pauses it
			continue
		}
		want := map[string]any{"Fn::GetAtt": []any{"Leasehold", "Outputs." + name}}
		if !reflect.DeepEqual(out["Value"], want) {
			t.Errorf("the project's output %s is %v, want the nested stack's (%v)", name, out["Value"], want)
		}
	}
}
