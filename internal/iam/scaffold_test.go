package iam_test

import (
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/internal/scaffold"
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
