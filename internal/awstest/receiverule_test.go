package awstest_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
)

// receiveAllowed lists the test code that may call ReceiveMessage itself,
// as "path:function" (path from the repository root), each with its reason.
var receiveAllowed = map[string]string{
	"internal/eventsource/runner_test.go:ReceiveMessage":     "receiveObserver wraps the runner's own SQS client to watch the receives of the poller under test; the poller, not the test, receives",
	"internal/awsenv/httpclient_test.go:receiveThroughRace":  "replays the SDK losing an answer against a one-answer server, not a queue: the unguarded call must fail to show the loss",
	"internal/awstest/lostanswer_test.go:TestLostAnswerRate": "the measurement of lost answers: it must see each raw receive, lost or not",
	"throughput_sim_test.go:simPollers":                      "the throughput simulation's bare and naive consumers poll its in-memory queue, which loses no answer",
	"lambda_sim_test.go:simMapping":                          "the simulated event source mapping of the Lambda path polls the simulation's in-memory queue, which loses no answer",
}

// templateAction is a text/template action, which a test template holds
// where Go code would (a name, a module path).
var templateAction = regexp.MustCompile(`\{\{.*?\}\}`)

// TestTestsReceiveThroughAwstest fails on any call of a ReceiveMessage
// method in test code (every *_test.go file, the test-support packages
// whose directory ends in "test", and every *_test.go.tmpl, the tests of
// the project `leasehold init` writes) other than awstest's own receive
// helpers and receiveAllowed. A receive whose answer is lost hides its
// messages for the visibility timeout; awstest.Receive, ReceiveEvent,
// ReceiveN and Drain wait that out (see localstack/README.md), a direct
// call does not. A generated project cannot import awstest: its tests
// receive through the leasehold worker they run, whose SDK clients are
// behind GuardHTTP.
func TestTestsReceiveThroughAwstest(t *testing.T) {
	t.Parallel()
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot locate this source file")
	}
	root := filepath.Join(filepath.Dir(self), "..", "..")
	helper := filepath.Join("internal", "awstest", "receive.go")
	seen := map[string]bool{}
	var bad []string
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		support := strings.HasSuffix(filepath.Base(filepath.Dir(path)), "test")
		tmpl := strings.HasSuffix(name, "_test.go.tmpl")
		if !tmpl && (!strings.HasSuffix(name, ".go") || rel == helper || !(strings.HasSuffix(name, "_test.go") || support)) {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if tmpl {
			src = templateAction.ReplaceAll(src, []byte("x"))
		}
		f, err := parser.ParseFile(fset, path, src, 0)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok {
				continue
			}
			ast.Inspect(fn, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				sel, ok := call.Fun.(*ast.SelectorExpr)
				if !ok || sel.Sel.Name != "ReceiveMessage" {
					return true
				}
				key := filepath.ToSlash(rel) + ":" + fn.Name.Name
				if _, ok := receiveAllowed[key]; ok {
					seen[key] = true
					return true
				}
				fix := "receive through awstest.Receive, ReceiveEvent, ReceiveN or Drain, which survive a lost answer"
				if tmpl {
					fix = "a project of `leasehold init` cannot import awstest: leave the receives to the leasehold worker its test runs"
				}
				bad = append(bad, fset.Position(call.Pos()).String()+" (in "+fn.Name.Name+") calls ReceiveMessage directly: "+fix)
				return true
			})
		}
		return nil
	})
	if err != nil {
		t.Fatalf("scan the repository: %v", err)
	}
	for _, b := range bad {
		t.Errorf("%s (or list it in receiveAllowed with the reason)", b)
	}
	for key := range receiveAllowed {
		if !seen[key] {
			t.Errorf("receiveAllowed lists %s, which calls ReceiveMessage no more: remove it", key)
		}
	}
}
