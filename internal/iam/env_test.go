package iam_test

// The environment each function reads is listed in internal/iam (Env, and
// Unread for variables of linked code that the function never reads), built
// from the Env* constants that declare every variable. These tests check
//   - that no code linked into a function knows a variable the list does not
//     classify: every Env* constant, every os.Getenv / os.LookupEnv of a
//     constant name, and no LEASEHOLD_* name spelled out anywhere else;
//   - that the template sets exactly Env on each function, and that the
//     variables naming resources reference the right ones.

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/leasehold/leasehold/internal/iam"
)

const module = "github.com/leasehold/leasehold"

// envFunction ties a function of the template to its main package.
type envFunction struct {
	fn   iam.Function
	main string
}

var envFunctions = []envFunction{
	{iam.Worker, module + "/functions/worker"},
	{iam.Dispatch, module + "/functions/dispatch"},
}

// resourceEnv are the variables that carry a resource's name or URL, and
// the resource they must reference.
var resourceEnv = map[string]string{
	"LEASEHOLD_TABLE":          iam.TasksTable,
	"LEASEHOLD_WORK_QUEUE_URL": iam.WorkQueue,
	"LEASEHOLD_WORK_DLQ_URL":   iam.WorkDeadLetterQueue,
	"LEASEHOLD_INTAKE_DLQ_URL": iam.IntakeDeadLetterQueue,
}

// envRead are the variables a function may read without declaring them:
// those Lambda sets.
var envRead = regexp.MustCompile(`^(AWS_|_HANDLER$|_X_AMZN_TRACE_ID$|LAMBDA_)`)

var envName = regexp.MustCompile(`^LEASEHOLD_[A-Z0-9_]+$`)

// goPackage is one package of the module, parsed.
type goPackage struct {
	path   string
	fset   *token.FileSet
	files  []*ast.File
	consts map[string]string // string constants by name
}

// listDeps returns the module's packages linked into main, parsed.
func listDeps(t *testing.T, main string) map[string]*goPackage {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-json=ImportPath,Dir,GoFiles,Module", main)
	cmd.Dir = moduleRoot(t)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", main, err)
	}
	pkgs := map[string]*goPackage{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p struct {
			ImportPath, Dir string
			GoFiles         []string
			Module          *struct{ Path string }
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		if p.Module == nil || p.Module.Path != module {
			continue
		}
		gp := &goPackage{path: p.ImportPath, fset: token.NewFileSet(), consts: map[string]string{}}
		for _, name := range p.GoFiles {
			f, err := parser.ParseFile(gp.fset, filepath.Join(p.Dir, name), nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			gp.files = append(gp.files, f)
			for _, d := range f.Decls {
				gd, ok := d.(*ast.GenDecl)
				if !ok || gd.Tok != token.CONST {
					continue
				}
				for _, s := range gd.Specs {
					vs := s.(*ast.ValueSpec)
					for i, n := range vs.Names {
						if i < len(vs.Values) {
							if s, ok := stringLit(vs.Values[i]); ok {
								gp.consts[n.Name] = s
							}
						}
					}
				}
			}
		}
		pkgs[p.ImportPath] = gp
	}
	return pkgs
}

func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

// declared returns the values of p's Env* constants.
func (p *goPackage) declared(t *testing.T) []string {
	t.Helper()
	var names []string
	for _, f := range p.files {
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, s := range gd.Specs {
				for _, n := range s.(*ast.ValueSpec).Names {
					if !strings.HasPrefix(n.Name, "Env") {
						continue
					}
					v, ok := p.consts[n.Name]
					if !ok || !envName.MatchString(v) {
						t.Errorf("%s.%s must be a string literal LEASEHOLD_*, got %q", p.path, n.Name, v)
						continue
					}
					names = append(names, v)
				}
			}
		}
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// envAccess is one use of os.Getenv or os.LookupEnv.
type envAccess struct {
	pos  string
	name string // "" when the name is computed or the function is passed on
}

// scan reports p's env accesses and its LEASEHOLD_* literals outside Env*
// constant declarations.
func (p *goPackage) scan(all map[string]*goPackage) (accesses []envAccess, strays []string) {
	for _, f := range p.files {
		imports := map[string]string{}
		for _, im := range f.Imports {
			path, _ := strconv.Unquote(im.Path.Value)
			name := filepath.Base(path)
			if im.Name != nil {
				name = im.Name.Name
			}
			imports[name] = path
		}
		osName := ""
		for name, path := range imports {
			if path == "os" {
				osName = name
			}
		}
		// resolve evaluates a constant string expression, if it is one.
		resolve := func(e ast.Expr) (string, bool) {
			switch e := e.(type) {
			case *ast.BasicLit:
				return stringLit(e)
			case *ast.Ident:
				v, ok := p.consts[e.Name]
				return v, ok
			case *ast.SelectorExpr:
				if x, ok := e.X.(*ast.Ident); ok {
					if dep, ok := all[imports[x.Name]]; ok {
						v, ok := dep.consts[e.Sel.Name]
						return v, ok
					}
				}
			}
			return "", false
		}
		isEnvFunc := func(e ast.Expr) bool {
			sel, ok := e.(*ast.SelectorExpr)
			if !ok || osName == "" {
				return false
			}
			x, ok := sel.X.(*ast.Ident)
			return ok && x.Name == osName && (sel.Sel.Name == "Getenv" || sel.Sel.Name == "LookupEnv")
		}
		called := map[ast.Expr]bool{}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.GenDecl:
				if n.Tok == token.CONST {
					// Env* declarations are the declared names; other
					// constants are checked like any literal.
					for _, s := range n.Specs {
						vs := s.(*ast.ValueSpec)
						for i, name := range vs.Names {
							if i < len(vs.Values) && !strings.HasPrefix(name.Name, "Env") {
								ast.Inspect(vs.Values[i], func(m ast.Node) bool {
									if s, ok := stringLit(asExpr(m)); ok && envName.MatchString(s) {
										strays = append(strays, fmt.Sprintf("%s: %q", p.fset.Position(m.Pos()), s))
									}
									return true
								})
							}
						}
					}
					return false
				}
			case *ast.CallExpr:
				if isEnvFunc(n.Fun) {
					called[n.Fun] = true
					a := envAccess{pos: p.fset.Position(n.Pos()).String()}
					if len(n.Args) == 1 {
						a.name, _ = resolve(n.Args[0])
					}
					accesses = append(accesses, a)
				}
			case *ast.SelectorExpr:
				if isEnvFunc(n) && !called[n] {
					accesses = append(accesses, envAccess{pos: p.fset.Position(n.Pos()).String()})
				}
			case *ast.BasicLit:
				if s, ok := stringLit(n); ok && envName.MatchString(s) {
					strays = append(strays, fmt.Sprintf("%s: %q", p.fset.Position(n.Pos()), s))
				}
			}
			return true
		})
	}
	return accesses, strays
}

func asExpr(n ast.Node) ast.Expr {
	e, _ := n.(ast.Expr)
	return e
}

func TestFunctionsReadOnlyDeclaredEnvironment(t *testing.T) {
	t.Parallel()
	for _, ef := range envFunctions {
		t.Run(ef.fn.LogicalID, func(t *testing.T) {
			t.Parallel()
			f := ef.fn
			for _, name := range f.Env {
				if why, ok := f.Unread[name]; ok {
					t.Errorf("%s is both read and unread (%s)", name, why)
				}
			}
			known := func(name string) bool { return slices.Contains(f.Env, name) || f.Unread[name] != "" }
			seen := map[string]bool{}
			for _, p := range listDeps(t, ef.main) {
				for _, name := range p.declared(t) {
					seen[name] = true
					if !known(name) {
						t.Errorf("%s declares %s, linked into %s: list it in internal/iam as read (Env, and set it in template.yaml) or Unread (with the reason)",
							p.path, name, f.LogicalID)
					}
				}
				accesses, strays := p.scan(pkgsOf(t, ef.main))
				for _, s := range strays {
					t.Errorf("%s spells out an environment variable; use an Env* constant", s)
				}
				for _, a := range accesses {
					if a.name == "" || envRead.MatchString(a.name) {
						continue // computed names come from the Env* constants above
					}
					seen[a.name] = true
					if !known(a.name) {
						t.Errorf("%s reads %s, which internal/iam does not list for %s", a.pos, a.name, f.LogicalID)
					}
				}
			}
			for _, name := range slices.Concat(f.Env, slices.Collect(maps.Keys(f.Unread))) {
				if !seen[name] {
					t.Errorf("internal/iam lists %s for %s, but no code linked into it declares or reads it", name, f.LogicalID)
				}
			}
		})
	}
}

// pkgsOf caches listDeps per main for the constant lookups of scan.
func pkgsOf(t *testing.T, main string) map[string]*goPackage {
	t.Helper()
	depsMu.Lock()
	defer depsMu.Unlock()
	if p, ok := depsCache[main]; ok {
		return p
	}
	p := listDeps(t, main)
	depsCache[main] = p
	return p
}

var (
	depsMu    sync.Mutex
	depsCache = map[string]map[string]*goPackage{}
)

func TestTemplateSetsTheDeclaredEnvironment(t *testing.T) {
	t.Parallel()
	tp := loadTemplate(t)
	for _, ef := range envFunctions {
		t.Run(ef.fn.LogicalID, func(t *testing.T) {
			t.Parallel()
			want := ef.fn.Env
			env, _ := props(tp.resource(t, ef.fn.LogicalID))["Environment"].(map[string]any)
			vars, _ := env["Variables"].(map[string]any)
			for _, name := range want {
				v, ok := vars[name]
				switch {
				case !ok:
					t.Errorf("template.yaml does not set %s on %s, which reads it", name, ef.fn.LogicalID)
				case v == nil || v == "":
					t.Errorf("template.yaml sets %s on %s to nothing", name, ef.fn.LogicalID)
				}
				if res, ok := resourceEnv[name]; ok && fmt.Sprint(v) != fmt.Sprint(map[string]any{"Ref": res}) {
					t.Errorf("%s of %s is %v, want !Ref %s", name, ef.fn.LogicalID, v, res)
				}
			}
			for name := range vars {
				if !slices.Contains(want, name) {
					t.Errorf("template.yaml sets %s on %s, whose code does not read it", name, ef.fn.LogicalID)
				}
			}
		})
	}
}
