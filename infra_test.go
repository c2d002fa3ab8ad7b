package leasehold_test

import (
	"bytes"
	"io/fs"
	"os"
	"testing"

	"github.com/leasehold/leasehold"
)

// Infrastructure serves the files of this checkout, byte for byte: what
// `leasehold init` writes is what `make check-template` checks.
func TestInfrastructureIsTheTemplate(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"template.yaml", "functions/Makefile"} {
		got, err := fs.ReadFile(leasehold.Infrastructure(), name)
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("Infrastructure's %s differs from the file", name)
		}
	}
}
