// Package toolchain says which Go toolchain may build leasehold's Lambda
// bootstraps (issue 18, item 21). go.mod's toolchain line is only advice
// to the go command: with GOTOOLCHAIN=local an older toolchain builds the
// binaries anyway, with the standard-library vulnerabilities fixed since.
// The bootstrap builds (functions/Makefile, a generated project's
// Makefile) run functions/checktoolchain first, which refuses such a
// toolchain.
package toolchain

import (
	"fmt"
	"go/version"

	"golang.org/x/mod/modfile"
)

// Minimum is the oldest toolchain leasehold's binaries may be built with:
// go.mod's toolchain line (a test keeps them equal).
const Minimum = "go1.26.10"

// Required is the oldest toolchain that may build the bootstraps of the
// main module whose go.mod (read from path) is gomod: the newest of
// Minimum and its go and toolchain lines.
func Required(path string, gomod []byte) (string, error) {
	f, err := modfile.Parse(path, gomod, nil)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	want := Minimum
	if f.Go != nil && version.Compare("go"+f.Go.Version, want) > 0 {
		want = "go" + f.Go.Version
	}
	if f.Toolchain != nil && version.IsValid(f.Toolchain.Name) && version.Compare(f.Toolchain.Name, want) > 0 {
		want = f.Toolchain.Name
	}
	return want, nil
}

// Check refuses running (runtime.Version of the toolchain that builds)
// when it is older than required or is not a release.
func Check(running, required string) error {
	if version.IsValid(running) && version.Compare(running, required) >= 0 {
		return nil
	}
	return fmt.Errorf("refusing to build with %s: the bootstraps need %s or newer (go.mod's toolchain line; older toolchains leave known standard-library vulnerabilities in the binaries). Install %s, or let the go command fetch it: unset GOTOOLCHAIN=local, or set GOTOOLCHAIN=%s+auto",
		running, required, required, required)
}
