package codeshape

import (
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// maxInternalAPI bounds the exported top-level identifiers of one package
// under internal/ (issue 34): a package that exports more mixes concerns,
// as internal/lease did with 239 (task model, DynamoDB store, limiters,
// admin queries in one), and is split by concern instead.
const maxInternalAPI = 120

// TestInternalPackageSize: no package under internal/ exports more than
// maxInternalAPI top-level identifiers (funcs, types, vars and consts; not
// methods or fields), counted over its non-test files.
func TestInternalPackageSize(t *testing.T) {
	byPkg := map[string][]string{}
	for path, f := range sourceFiles(t) {
		dir := filepath.ToSlash(filepath.Dir(path))
		if dir != "internal" && !strings.HasPrefix(dir, "internal/") {
			continue
		}
		byPkg[dir] = append(byPkg[dir], exportedNames(f)...)
	}
	if len(byPkg) < 10 {
		t.Fatalf("found only %d packages under internal/; the walk is broken", len(byPkg))
	}
	var dirs []string
	for dir := range byPkg {
		dirs = append(dirs, dir)
	}
	sort.Strings(dirs)
	for _, dir := range dirs {
		names := byPkg[dir]
		if len(names) > maxInternalAPI {
			sort.Strings(names)
			t.Errorf("%s exports %d top-level identifiers, more than %d: split it by concern, or unexport what nothing outside it uses: %s",
				dir, len(names), maxInternalAPI, strings.Join(names, " "))
		}
	}
}
