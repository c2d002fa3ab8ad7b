package codeshape

import (
	"go/ast"
	"go/token"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/internal/settingstable"
)

// envLiteral is an environment variable name of leasehold's.
var envLiteral = regexp.MustCompile(`^LEASEHOLD_[A-Z0-9_]+$`)

// harness are the directories whose own LEASEHOLD_* variables configure
// the test harness (which stack, how hard to shake it), not the product;
// they are not settings of a worker, a dispatcher or the command.
var harness = []string{"internal/awstest/", "internal/chaos/", "internal/bench/"}

// TestEnvNamesLiveInTheSettingsTable (issue 34): every LEASEHOLD_*
// variable the product reads is spelled out once, as a constant of package
// settings, and has its row in settingstable.All; other packages refer to the
// constant.
func TestEnvNamesLiveInTheSettingsTable(t *testing.T) {
	inTable := map[string]bool{}
	for _, s := range settingstable.All {
		if s.Env != "" {
			inTable[s.Env] = true
		}
	}
	var outside []string
	declared := map[string]bool{}
	for path, f := range sourceFiles(t) {
		if harnessFile(path) {
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			v, err := strconv.Unquote(lit.Value)
			if err != nil || !envLiteral.MatchString(v) {
				return true
			}
			if strings.HasPrefix(path, "settings/") {
				declared[v] = true
			} else {
				outside = append(outside, path+": "+v)
			}
			return true
		})
	}
	sort.Strings(outside)
	for _, o := range outside {
		t.Errorf("%s is spelled out outside package settings: declare it there (a constant and a row of settingstable.All) and refer to the constant", o)
	}
	if len(declared) < 30 {
		t.Fatalf("found only %d LEASEHOLD_* names in package settings", len(declared))
	}
	for v := range declared {
		if !inTable[v] {
			t.Errorf("settings declares %s but settingstable.All has no row for it", v)
		}
	}
}

func harnessFile(path string) bool {
	for _, h := range harness {
		if strings.HasPrefix(path, h) {
			return true
		}
	}
	return false
}
