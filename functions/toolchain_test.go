package functions_test

import (
	"errors"
	"go/version"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/internal/awstest"
	"github.com/leasehold/leasehold/internal/toolchain"
)

// TestBootstrapBuildRefusesAnOlderToolchain runs a function's rule of the
// Makefile, as `sam build` does, with a toolchain older than go.mod's
// toolchain line selected the way a user selects one, and wants it refused
// with the reason and no bootstrap (issue 18, item 21: with
// GOTOOLCHAIN=local and go1.26.8 the bootstraps built with ten reachable
// standard-library vulnerabilities). The older toolchain is the local one
// when it is older (GOTOOLCHAIN=local, the reported case), else go.mod's go
// line, which the go command fetches from the module proxy.
func TestBootstrapBuildRefusesAnOlderToolchain(t *testing.T) {
	t.Parallel()
	makeTool, err := exec.LookPath("make")
	if err != nil {
		t.Skipf("no make on PATH, so the Makefile's rules cannot run: %v", err)
	}
	gomod := filepath.Join("..", "go.mod")
	raw, err := os.ReadFile(gomod)
	if err != nil {
		t.Fatal(err)
	}
	required, err := toolchain.Required(gomod, raw)
	if err != nil {
		t.Fatal(err)
	}
	local := goVersion(t, "GOTOOLCHAIN=local")
	older := "GOTOOLCHAIN=local"
	if version.Compare(local, required) >= 0 {
		goLine := ""
		for line := range strings.Lines(string(raw)) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "go "); ok {
				goLine = "go" + v
			}
		}
		if version.Compare(goLine, required) >= 0 {
			t.Skipf("go.mod's go line %s is not older than the required %s: no older toolchain can build this module", goLine, required)
		}
		older = "GOTOOLCHAIN=" + goLine
	}
	t.Logf("building with %s (%s); %s is required", older, goVersion(t, older), required)

	dir := t.TempDir()
	cmd := exec.CommandContext(t.Context(), makeTool, "--makefile", "Makefile", "build-WorkerFunction")
	cmd.Env = awstest.ChildEnv("ARTIFACTS_DIR="+dir, older)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("make build-WorkerFunction with %s (older than %s) succeeded:\n%s", older, required, out)
	}
	if !strings.Contains(string(out), "refusing to build with") || !strings.Contains(string(out), required) {
		t.Errorf("make build-WorkerFunction with %s failed without saying why:\n%s", older, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "bootstrap")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a refused build left a bootstrap: %v", err)
	}
}

// goVersion is the toolchain version the go command runs with env added.
func goVersion(t *testing.T, env ...string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "go", "env", "GOVERSION")
	cmd.Env = awstest.ChildEnv(env...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go env GOVERSION with %v: %v", env, err)
	}
	return strings.TrimSpace(string(out))
}
