package codeshape

import (
	"go/ast"
	"path/filepath"
	"testing"
)

// TestNoInitHooks: neither the root package nor the test kit has an init
// function. The kit once reached the root through package variables the
// root set at init (internal/clienthook, internal/handlerhook), typed any;
// now both import internal/wiring, which defines what they share (issue
// 34), and a seam set at init should not come back.
func TestNoInitHooks(t *testing.T) {
	checked := 0
	for path, f := range sourceFiles(t) {
		dir := filepath.Dir(path)
		if dir != "." && dir != "leaseholdtest" && dir != filepath.Join("internal", "wiring") {
			continue
		}
		checked++
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv == nil && fn.Name.Name == "init" {
				t.Errorf("%s has an init function; share what the root and leaseholdtest need through internal/wiring instead", path)
			}
		}
	}
	if checked < 10 {
		t.Fatalf("checked only %d files", checked)
	}
}
