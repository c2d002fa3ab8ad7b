package cli

import (
	"go/build"
	"strings"
	"testing"
)

// TestImportsOnlyPublicPackages keeps the CLI on the module's public API:
// its non-test files import no internal package of the module but its own
// sub-packages (internal/cli/...).
func TestImportsOnlyPublicPackages(t *testing.T) {
	t.Parallel()
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	const module = "github.com/leasehold/leasehold/"
	for _, imp := range pkg.Imports {
		if strings.HasPrefix(imp, module+"internal/") && !strings.HasPrefix(imp, module+"internal/cli/") {
			t.Errorf("internal/cli imports %s: use the root package, admin or another public package", imp)
		}
	}
}
