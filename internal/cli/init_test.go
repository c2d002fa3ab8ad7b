package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestInitRefusesANonEmptyDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	code := Main(t.Context(), []string{"init", dir, "--module", "example.com/x"}, Streams{In: strings.NewReader(""), Out: &out, Err: &errOut})
	if code != ExitUsage || !strings.Contains(errOut.String(), "directory is not empty (use --force") {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
		t.Error("init wrote go.mod into a non-empty directory")
	}
}

// Without --local there is nothing to tidy against: init writes the files,
// runs no go command and says what to do.
func TestInitWithoutLocal(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "x")
	var out, errOut bytes.Buffer
	code := Main(t.Context(), []string{"init", dir, "--module", "example.com/x"}, Streams{In: strings.NewReader(""), Out: &out, Err: &errOut})
	if code != ExitOK {
		t.Fatalf("exit %d, stderr %q", code, errOut.String())
	}
	for _, want := range []string{"go.mod", "main.go", filepath.Join("leasehold", "template.yaml"), "replace github.com/leasehold/leasehold => ", "go mod tidy"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("init's output does not mention %q:\n%s", want, out.String())
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "go.sum")); err == nil {
		t.Error("init without --local wrote go.sum")
	}
}
