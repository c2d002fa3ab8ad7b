package cli

import (
	"go/build"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// sharedRules are the internal packages of the module that the CLI may
// import, by the CLI package that imports each (its directory below
// internal/cli), each with the reason. internal/cli itself and the
// inspector (ui) import none: what they need of a shared rule they take
// from internal/cli/rules, the one package of the CLI that reaches one. Every
// operation on tasks, queues and schedules goes through the public API
// (the root package and admin): a tool that reached into the store would
// duplicate its validation and drift from the client. What is allowed here
// is a leaf rule the CLI must apply exactly as the client, the worker or
// the dispatcher applies it; a copy of such a rule in the CLI would be a
// second rule waiting to differ from the first, and exporting it from a
// public package would make every user carry the CLI's helpers.
var sharedRules = map[string]map[string]string{
	"rules": {
		"internal/awsenv":        "the HTTP client and the credentials check every leasehold process sets its AWS configuration up with (HTTPClient, CheckCredentials)",
		"internal/durationtext":  "the spelling of a duration the settings and the docs use, for the limits the inspector prints (FormatDuration)",
		"internal/lease":         "the task model's rules the store applies: a task id made safe to print (DisplayID), a payload's JSON check with its depth limit (JSONProblem), the listing switch (ParseListing)",
		"internal/lease/query":   "the largest page the client's List and the stores accept, the bound of --limit and of the inspector's page size (MaxListLimit)",
		"internal/queues":        "the queue name rule the client and the dispatcher apply (CheckQueueName)",
		"internal/settingstable": "the settings table's reader, with which `leasehold run` fills its WorkerConfig from the LEASEHOLD_* variables as NewWorkerFromEnv and the worker function do (WorkerFromEnv)",
		"internal/tracing":       "the rule by which the OTEL_* environment asks for tracing, which otelenv.FromEnv applies, read with the command's own getenv (TracingAsked)",
		"internal/token":         "the intake dispatcher's decoding of a submission, with its bounds and words, applied to each line of `leasehold enqueue --file` (ParseSubmission)",
	},
	"scaffold": {
		"internal/toolchain": "a generated project's go.mod names the minimum Go toolchain that checktoolchain enforces on the bootstraps",
	},
}

// TestImportsOnlyPublicPackages keeps the CLI on the module's public API:
// the non-test files of internal/cli and of each of its sub-packages import
// no internal package of the module but internal/cli/... and the shared
// rules their package is allowed (sharedRules). An allowed import that is
// no longer used is an error too, so that the list says what the CLI
// really takes from internal packages.
func TestImportsOnlyPublicPackages(t *testing.T) {
	t.Parallel()
	const module = "github.com/leasehold/leasehold/"
	used := map[string]map[string]bool{}
	checked := 0
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if name := d.Name(); path != "." && (name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")) {
			return filepath.SkipDir
		}
		pkg, err := build.ImportDir(path, 0)
		if _, none := err.(*build.NoGoError); none {
			return nil
		} else if err != nil {
			return err
		}
		checked++
		dir := filepath.ToSlash(path)
		for _, imp := range pkg.Imports {
			rel, ok := strings.CutPrefix(imp, module)
			if !ok || !strings.HasPrefix(rel, "internal/") || strings.HasPrefix(rel, "internal/cli/") {
				continue
			}
			if _, ok := sharedRules[dir][rel]; !ok {
				t.Errorf("internal/cli/%s imports %s: use the root package, admin or another public package, or, for a rule the CLI must share with the client or the dispatcher, add it to sharedRules with the reason", dir, imp)
				continue
			}
			if used[dir] == nil {
				used[dir] = map[string]bool{}
			}
			used[dir][rel] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 3 {
		t.Fatalf("checked only %d packages under internal/cli", checked)
	}
	for dir, allowed := range sharedRules {
		for _, rel := range slices.Sorted(maps.Keys(allowed)) {
			if !used[dir][rel] {
				t.Errorf("sharedRules allows internal/cli/%s to import %s, which it no longer does: remove the entry", dir, rel)
			}
		}
	}
}
