package toolchain_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/mod/modfile"

	"github.com/leasehold/leasehold/internal/toolchain"
)

// Minimum moves with go.mod's toolchain line: bumping one without the
// other fails here.
func TestMinimumIsGoModsToolchain(t *testing.T) {
	t.Parallel()
	path := filepath.Join("..", "..", "go.mod")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := modfile.Parse(path, raw, nil)
	if err != nil {
		t.Fatal(err)
	}
	if f.Toolchain == nil || f.Toolchain.Name != toolchain.Minimum {
		t.Fatalf("go.mod's toolchain line is %v, toolchain.Minimum is %s: keep them equal", f.Toolchain, toolchain.Minimum)
	}
}

func TestRequired(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		gomod, want string
	}{
		{"module m\n\ngo 1.26.0\n", toolchain.Minimum},                       // a project without a toolchain line: leasehold's
		{"module m\n\ngo 1.26.0\n\ntoolchain go1.26.2\n", toolchain.Minimum}, // an older line does not lower it
		{"module m\n\ngo 1.26.0\n\ntoolchain go1.99.1\n", "go1.99.1"},        // a newer line raises it
		{"module m\n\ngo 1.99.3\n", "go1.99.3"},                              // so does a newer go line
		{"module m\n\ngo 1.26.0\n\ntoolchain default\n", toolchain.Minimum},  // "default" names no version
	} {
		got, err := toolchain.Required("go.mod", []byte(tc.gomod))
		if err != nil || got != tc.want {
			t.Errorf("Required(%q) = %q, %v; want %q", tc.gomod, got, err, tc.want)
		}
	}
	if _, err := toolchain.Required("go.mod", []byte("module m\ngo nonsense x\n")); err == nil {
		t.Error("Required of a malformed go.mod: no error")
	}
}

func TestCheck(t *testing.T) {
	t.Parallel()
	for _, ok := range [][2]string{
		{"go1.26.10", "go1.26.10"},
		{"go1.26.11", "go1.26.10"},
		{"go1.27.0", "go1.26.10"},
		{"go1.27rc1", "go1.26.10"},
	} {
		if err := toolchain.Check(ok[0], ok[1]); err != nil {
			t.Errorf("Check(%s, %s): %v", ok[0], ok[1], err)
		}
	}
	for _, old := range [][2]string{
		{"go1.26.8", "go1.26.10"},
		{"go1.26.9", "go1.26.10"},
		{"go1.25.12", "go1.26.10"},
		{"go1.26rc2", "go1.26.0"},
		{"devel go1.27-abcdef", "go1.26.10"}, // not a release: no version to trust
	} {
		err := toolchain.Check(old[0], old[1])
		if err == nil || !strings.Contains(err.Error(), old[0]) || !strings.Contains(err.Error(), old[1]) || !strings.Contains(err.Error(), "GOTOOLCHAIN") {
			t.Errorf("Check(%s, %s) = %v, want a refusal naming both and GOTOOLCHAIN", old[0], old[1], err)
		}
	}
}
