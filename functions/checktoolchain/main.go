// Command checktoolchain refuses a Go toolchain older than the bootstraps
// need (internal/toolchain): functions/Makefile, and the Makefile of a
// project `leasehold init` writes, run it before building a Lambda
// bootstrap, with the same go command and environment as the build. It
// reads the main module's go.mod, named by its one argument (the output of
// `go env GOMOD`), and exits 1 with the reason if runtime.Version, the
// toolchain that compiled it and so the one about to build, is older than
// that go.mod's toolchain line, or than leasehold's own.
package main

import (
	"fmt"
	"os"
	"runtime"

	"github.com/leasehold/leasehold/internal/toolchain"
)

func main() {
	if len(os.Args) != 2 || os.Args[1] == "" || os.Args[1] == os.DevNull {
		fmt.Fprintln(os.Stderr, "checktoolchain: usage: checktoolchain \"$(go env GOMOD)\" (run inside a module)")
		os.Exit(2)
	}
	raw, err := os.ReadFile(os.Args[1])
	if err != nil {
		fmt.Fprintf(os.Stderr, "checktoolchain: %v\n", err)
		os.Exit(2)
	}
	required, err := toolchain.Required(os.Args[1], raw)
	if err != nil {
		fmt.Fprintf(os.Stderr, "checktoolchain: %v\n", err)
		os.Exit(2)
	}
	if err := toolchain.Check(runtime.Version(), required); err != nil {
		fmt.Fprintf(os.Stderr, "checktoolchain: %v\n", err)
		os.Exit(1)
	}
}
