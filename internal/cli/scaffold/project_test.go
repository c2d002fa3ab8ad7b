package scaffold_test

// The acceptance test of `leasehold init`: a project written by the command
// builds, vets and passes its own tests (one of them runs a task end to end
// on the local stack), and its template passes the checks leasehold's own
// template passes (scripts/template-tools.sh check).

import (
	"bytes"
	"context"
	"debug/elf"
	"go/version"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/awstest"
	"github.com/leasehold/leasehold/internal/cli"
	"github.com/leasehold/leasehold/internal/cli/scaffold"
	"github.com/leasehold/leasehold/internal/toolchain"
)

const envRequireStack = "LEASEHOLD_REQUIRE_STACK"

// moduleRoot is leasehold's checkout: two levels above this package.
func moduleRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", "..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("module root not found: %v", err)
	}
	return root
}

// initProject runs `leasehold init` into a new directory with --local at
// this checkout and returns the project's directory.
func initProject(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and checks a generated project, which takes minutes (-short)")
	}
	root := moduleRoot(t)
	dir := filepath.Join(t.TempDir(), "thumbs")
	var out, errOut bytes.Buffer
	code := cli.Main(t.Context(), []string{"init", dir, "--module", "example.com/thumbs", "--local", root},
		cli.Streams{In: strings.NewReader(""), Out: &out, Err: &errOut, Getenv: os.Getenv})
	if code != cli.ExitOK {
		t.Fatalf("leasehold init: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	if !strings.Contains(out.String(), "go.sum (go mod tidy)") {
		t.Errorf("init did not report go.sum:\n%s", out.String())
	}
	// leasehold's files, byte for byte.
	for _, f := range []string{"template.yaml", "functions/Makefile"} {
		want, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(dir, "leasehold", f))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("the project's leasehold/%s differs from leasehold's %s", f, f)
		}
	}
	return dir
}

// run runs a command in dir with env added to the test's environment and
// returns its combined output; it fails the test if the command does.
func run(t *testing.T, ctx context.Context, dir string, env []string, name string, args ...string) string {
	t.Helper()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = awstest.ChildEnv(env...)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v after %s\n%s", name, strings.Join(args, " "), err, time.Since(start).Round(time.Second), out)
	}
	t.Logf("%s %s: passed in %s", name, strings.Join(args, " "), time.Since(start).Round(time.Second))
	return string(out)
}

func TestInitProjectBuildsAndPassesItsTests(t *testing.T) {
	t.Parallel()
	dir := initProject(t)
	ctx, cancel := context.WithTimeout(t.Context(), awstest.Scale(10*time.Minute))
	defer cancel()

	// The project's own test of a task end to end runs on fresh resources
	// of the local stack (not its shared named ones, which other tests'
	// workers poll); without the stack it skips, unless the stack is
	// required.
	env := []string{"STACK_TESTS="}
	stack := os.Getenv("AWS_ENDPOINT_URL_DYNAMODB") != "" || os.Getenv(envRequireStack) == "1"
	if stack {
		cfg := awstest.Config(t)
		table := awstest.NewTable(t, cfg)
		queues := awstest.NewQueues(t, cfg)
		env = []string{"STACK_TESTS=1", "LEASEHOLD_TABLE=" + table,
			"LEASEHOLD_WORK_QUEUE_URL=" + queues.Work, "LEASEHOLD_WORK_DLQ_URL=" + queues.WorkDLQ,
			"LEASEHOLD_INTAKE_QUEUE_URL=" + queues.Intake, "LEASEHOLD_INTAKE_DLQ_URL=" + queues.IntakeDLQ}
	}

	run(t, ctx, dir, nil, "go", "build", "./...")
	run(t, ctx, dir, nil, "go", "vet", "./...")
	out := run(t, ctx, dir, env, "go", "test", "-race", "-count=1", "-v", "./...")
	for _, name := range []string{"TestResize", "TestResizeRejectsABadPayload", "TestResizeThroughTheWorker", "TestRegisteredKinds"} {
		if !strings.Contains(out, "--- PASS: "+name+" ") {
			t.Errorf("the project's %s did not pass:\n%s", name, out)
		}
	}
	if !strings.Contains(out, "--- SKIP: TestReplay ") {
		t.Errorf("the project's TestReplay ran without histories to replay:\n%s", out)
	}
	// With a history in testdata/replay (as make replay-check writes one),
	// TestReplay replays it through the project's handlers.
	if err := os.MkdirAll(filepath.Join(dir, "testdata", "replay"), 0o750); err != nil {
		t.Fatal(err)
	}
	hist := `{"leasehold_history":1,"id":"r1","kind":"resize","status":"PENDING","attempt":1,"fence":1,"payload":{"url":"s3://pics/cat.png","width":64},"steps":[],"exported":"2026-12-07T00:00:00Z"}`
	if err := os.WriteFile(filepath.Join(dir, "testdata", "replay", "r1.json"), []byte(hist), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := run(t, ctx, dir, nil, "go", "test", "-count=1", "-run", "^TestReplay$", "-v", "."); !strings.Contains(out, "--- PASS: TestReplay/r1 ") || !strings.Contains(out, "ok       r1 (resize): replayed 0 recorded operations; then the handler returns") {
		t.Errorf("the project's TestReplay over one history:\n%s", out)
	}
	for _, name := range []string{"TestResizeOnTheStack", "TestIntakeOnTheStack"} {
		want := "--- SKIP: " + name + " "
		if stack {
			want = "--- PASS: " + name + " "
		}
		if !strings.Contains(out, want) {
			t.Errorf("the project's go test does not say %q:\n%s", want, out)
		}
	}
}

// The template check of a generated project, with the second-fleet example
// of docs/deploy.md added to it.
func TestInitProjectTemplatePassesTheChecks(t *testing.T) {
	t.Parallel()
	root := moduleRoot(t)
	bin := filepath.Join(root, ".stack", "py-venv", "bin")
	for _, tool := range []string{"sam", "cfn-lint", "checkov"} {
		if _, err := os.Stat(filepath.Join(bin, tool)); err != nil {
			msg := "the template tools are not installed (" + tool + " not in " + bin + "): run scripts/template-tools.sh install, or make test"
			if os.Getenv(envRequireStack) == "1" {
				t.Fatal(msg + " [" + envRequireStack + "=1]")
			}
			t.Skip(msg)
		}
	}
	dir := initProject(t)
	// With docs/deploy.md's second fleet added, which is checked with it.
	path := filepath.Join(dir, "template.yaml")
	if err := scaffold.AddFleetExample(root, path); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), awstest.Scale(10*time.Minute))
	defer cancel()
	out := run(t, ctx, dir, nil, filepath.Join(root, "scripts", "template-tools.sh"), "check", path)
	for _, s := range []string{
		"Failed checks: 0,",
		"arm64 .aws-sam/build/WorkerFunction/bootstrap",
		"arm64 .aws-sam/build/ImagesWorkerFunction/bootstrap",
		"arm64 .aws-sam/build/Leasehold/DispatchFunction/bootstrap",
		"all template checks passed",
	} {
		if !strings.Contains(out, s) {
			t.Errorf("the template check does not say %q:\n%s", s, out)
		}
	}
}

// The project's bootstrap build (its Makefile's build-%Function rule, which
// sam runs) refuses a Go toolchain older than go.mod's toolchain line, as
// leasehold's own does (issue 18, item 21), and builds with a current one.
func TestInitProjectBuildRefusesAnOlderToolchain(t *testing.T) {
	t.Parallel()
	dir := initProject(t)
	ctx, cancel := context.WithTimeout(t.Context(), awstest.Scale(10*time.Minute))
	defer cancel()
	local := strings.TrimSpace(run(t, ctx, dir, []string{"GOTOOLCHAIN=local"}, "go", "env", "GOVERSION"))
	if version.Compare(local, toolchain.Minimum) >= 0 {
		t.Skipf("the local toolchain %s is not older than %s; functions/toolchain_test.go covers an older one fetched from the proxy", local, toolchain.Minimum)
	}
	artifacts := t.TempDir()
	cmd := exec.CommandContext(ctx, "make", "--makefile", "Makefile", "build-WorkerFunction")
	cmd.Dir = dir
	cmd.Env = awstest.ChildEnv("ARTIFACTS_DIR="+artifacts, "GOTOOLCHAIN=local")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "refusing to build with "+local) {
		t.Fatalf("make build-WorkerFunction with GOTOOLCHAIN=local (%s, older than %s): %v\n%s", local, toolchain.Minimum, err, out)
	}
	if _, err := os.Stat(filepath.Join(artifacts, "bootstrap")); err == nil {
		t.Error("a refused build left a bootstrap")
	}
	run(t, ctx, dir, []string{"ARTIFACTS_DIR=" + artifacts, "GOTOOLCHAIN=auto"}, "make", "--makefile", "Makefile", "build-WorkerFunction")
	if _, err := os.Stat(filepath.Join(artifacts, "bootstrap")); err != nil {
		t.Errorf("make build-WorkerFunction with GOTOOLCHAIN=auto: %v", err)
	}
}

// maxBootstrap is the most bytes a project's bootstrap may take: the limit
// of leasehold's own (functions/size_test.go), 11,000,000 since the worker
// links the S3 client for the payload bucket (issue 36).
const maxBootstrap = 11_000_000

// The project's bootstrap, built as sam builds it (the Makefile's
// build-%Function rule with ARTIFACTS_DIR set), is an arm64 binary no larger
// than leasehold's own may be: built with lambda.norpc, stripped and
// trimmed as leasehold's functions/Makefile builds them (issue 19: it was
// 21.6 MB without).
func TestInitProjectBootstrapSize(t *testing.T) {
	t.Parallel()
	dir := initProject(t)
	ctx, cancel := context.WithTimeout(t.Context(), awstest.Scale(10*time.Minute))
	defer cancel()
	artifacts := t.TempDir()
	// GOTOOLCHAIN=auto: the rule refuses a toolchain older than go.mod's
	// toolchain line, which the go command then fetches.
	run(t, ctx, dir, []string{"ARTIFACTS_DIR=" + artifacts, "GOTOOLCHAIN=auto"}, "make", "--makefile", "Makefile", "build-WorkerFunction")
	bootstrap := filepath.Join(artifacts, "bootstrap")
	fi, err := os.Stat(bootstrap)
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(bootstrap)
	if err != nil {
		t.Fatal(err)
	}
	machine := f.Machine
	f.Close()
	if machine != elf.EM_AARCH64 {
		t.Errorf("the bootstrap is built for %v, want arm64 as template.yaml's Architectures", machine)
	}
	t.Logf("the project's bootstrap: %d bytes (limit %d)", fi.Size(), maxBootstrap)
	if fi.Size() > maxBootstrap {
		t.Errorf("the project's bootstrap is %d bytes, more than %d: is the Makefile's build-%%Function rule building with -tags lambda.norpc -trimpath -ldflags='-s -w'?", fi.Size(), maxBootstrap)
	}
}
