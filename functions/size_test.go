// Package functions_test holds leasehold's Lambda bootstraps to a size
// limit (issue 10): a smaller bootstrap is a smaller deployment package
// and a faster cold start.
package functions_test

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/awstest"
)

// maxBootstrap is the most bytes a function's bootstrap may take. It was
// 10,000,000 until the payload bucket (issue 36, point 2): the worker links
// the AWS SDK's S3 client to keep payloads and results over their inline
// limits there (internal/claimcheck), which took its bootstrap from
// 9,175,202 to 10,420,386 bytes; the dispatcher, which never reads or
// writes the bucket, stays at 8,716,450. The SDK's client, not a
// hand-written signer and PutObject/GetObject, is the choice: the
// 1.2 MB buys its retries, checksums and signing as the SDK maintains them.
const maxBootstrap = 11_000_000

// buildTarget is a rule of the Makefile that sam runs (BuildMethod:
// makefile), one per function of template.yaml.
var buildTarget = regexp.MustCompile(`(?m)^(build-[A-Za-z0-9]+):`)

// TestBootstrapSize builds every function the way `sam build` does, by
// running its rule of this directory's Makefile with ARTIFACTS_DIR set, so
// the flags measured are the Makefile's own, and fails if a bootstrap is
// larger than maxBootstrap. With a warm build cache it takes seconds.
func TestBootstrapSize(t *testing.T) {
	t.Parallel()
	makeTool, err := exec.LookPath("make")
	if err != nil {
		t.Skipf("no make on PATH, so the Makefile's rules cannot run: %v", err)
	}
	makefile, err := os.ReadFile("Makefile")
	if err != nil {
		t.Fatal(err)
	}
	var targets []string
	for _, m := range buildTarget.FindAllSubmatch(makefile, -1) {
		targets = append(targets, string(m[1]))
	}
	for _, want := range []string{"build-WorkerFunction", "build-DispatchFunction"} {
		if !slices.Contains(targets, want) {
			t.Fatalf("functions/Makefile has no rule %s (found %q)", want, targets)
		}
	}
	for _, target := range targets {
		dir := t.TempDir()
		cmd := exec.CommandContext(t.Context(), makeTool, "--makefile", "Makefile", target)
		// go test puts the go command that runs it first on PATH. The
		// rule refuses a toolchain older than go.mod's toolchain line
		// (TestBootstrapBuildRefusesAnOlderToolchain); GOTOOLCHAIN=auto
		// lets the go command fetch that one from the module proxy when
		// the local one is older, even where GOTOOLCHAIN=local is the
		// default.
		cmd.Env = awstest.ChildEnv("ARTIFACTS_DIR="+dir, "GOTOOLCHAIN=auto")
		start := time.Now()
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("make %s: %v\n%s", target, err, out)
		}
		bootstrap := filepath.Join(dir, "bootstrap")
		fi, err := os.Stat(bootstrap)
		if err != nil {
			t.Fatalf("make %s: %v", target, err)
		}
		f, err := elf.Open(bootstrap)
		if err != nil {
			t.Fatalf("make %s: %v", target, err)
		}
		machine := f.Machine
		f.Close()
		if machine != elf.EM_AARCH64 {
			t.Errorf("make %s built for %v, want arm64 as template.yaml's Architectures", target, machine)
		}
		t.Logf("make %s: bootstrap %d bytes (limit %d), built in %s",
			target, fi.Size(), maxBootstrap, time.Since(start).Round(time.Millisecond))
		if fi.Size() > maxBootstrap {
			t.Errorf("make %s: bootstrap is %d bytes, more than %d: see what grew with `go tool nm -size -sort size` on an unstripped build (docs/operations.md, \"Bootstrap size\")",
				target, fi.Size(), maxBootstrap)
		}
	}
}
