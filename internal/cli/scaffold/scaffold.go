// Package scaffold writes a new project for a user's own task kinds: what
// `leasehold init` does. The project's files are the templates under files/
// (rendered with text/template) and leasehold's own deployment template
// and function Makefile (leasehold.Infrastructure), copied unchanged into
// its leasehold/ directory.
//
// It lives under internal/cli as the CLI's own sub-package: it has no role
// in the library, only in the `leasehold init` command.
package scaffold

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"text/template"

	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/toolchain"
)

//go:embed all:files
var files embed.FS

// LeaseholdModule is the module path the project requires.
const LeaseholdModule = "github.com/leasehold/leasehold"

// InfraDir is the project directory that holds leasehold's template and
// function Makefile.
const InfraDir = "leasehold"

// placeholderVersion is the version required when the running leasehold
// has none of its own (a build from a checkout): the one `go mod edit
// -replace` uses, resolved only through a replace directive.
const placeholderVersion = "v0.0.0-00010101000000-000000000000"

// ErrNotEmpty is returned for a directory that has files, without Force.
var ErrNotEmpty = errors.New("directory is not empty")

// Config is what a project is made from.
type Config struct {
	// Dir is where the project goes; it is created if missing.
	Dir string
	// Module is the new module's path.
	Module string
	// Local, when set, is a leasehold checkout the project builds
	// leasehold from (a replace directive); made absolute.
	Local string
	// Force writes into a directory that has files, replacing those of the
	// same names and leaving the others.
	Force bool
}

// data is what the templates see.
type data struct {
	Module  string
	Name    string // the last element of Module, for the stack and the command
	Local   string
	Version string
	// Toolchain is go.mod's toolchain line: toolchain.Minimum.
	Toolchain string
}

// CheckModule reports whether p can be the module path of go.mod. Like
// `go mod init` it accepts a path without a dot in its first element
// (example/thumbnails): such a module cannot be fetched, but a worker that
// is only deployed need not be.
func CheckModule(p string) error {
	if err := module.CheckImportPath(p); err != nil {
		return err
	}
	if _, _, ok := module.SplitPathVersion(p); !ok {
		return fmt.Errorf("malformed module path %q: bad major version suffix", p)
	}
	return nil
}

// Write writes the project and returns the paths it wrote, relative to
// cfg.Dir, sorted.
func Write(cfg Config) ([]string, error) {
	if err := CheckModule(cfg.Module); err != nil {
		return nil, fmt.Errorf("module path: %w", err)
	}
	d := data{Module: cfg.Module, Name: name(cfg.Module), Version: version(), Toolchain: toolchain.Minimum}
	if cfg.Local != "" {
		abs, err := filepath.Abs(cfg.Local)
		if err != nil {
			return nil, err
		}
		if _, err := os.Stat(filepath.Join(abs, "go.mod")); err != nil {
			return nil, fmt.Errorf("--local %s: not a leasehold checkout: %w", cfg.Local, err)
		}
		d.Local = abs
		d.Version = placeholderVersion
	}
	if err := prepare(cfg.Dir, cfg.Force); err != nil {
		return nil, err
	}
	out := map[string][]byte{}
	err := fs.WalkDir(files, "files", func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		raw, err := files.ReadFile(p)
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(p, "files/")
		if name, ok := strings.CutSuffix(rel, ".tmpl"); ok {
			t, err := template.New(rel).Option("missingkey=error").Parse(string(raw))
			if err != nil {
				return err
			}
			var b bytes.Buffer
			if err := t.Execute(&b, d); err != nil {
				return err
			}
			rel, raw = name, b.Bytes()
		}
		out[rel] = raw
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("render: %w", err)
	}
	err = fs.WalkDir(leasehold.Infrastructure(), ".", func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		raw, err := fs.ReadFile(leasehold.Infrastructure(), p)
		out[path.Join(InfraDir, p)] = raw
		return err
	})
	if err != nil {
		return nil, err
	}
	written := make([]string, 0, len(out))
	for rel, raw := range out {
		dst := filepath.Join(cfg.Dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(dst, raw, 0o644); err != nil {
			return nil, err
		}
		written = append(written, rel)
	}
	slices.Sort(written)
	return written, nil
}

// prepare creates dir, or checks that it is empty unless force.
func prepare(dir string, force bool) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return os.MkdirAll(dir, 0o755)
	case err != nil:
		return err
	case len(entries) > 0 && !force:
		return fmt.Errorf("%s: %w (use --force to write into it anyway)", dir, ErrNotEmpty)
	}
	return nil
}

var notNameChar = regexp.MustCompile(`[^a-z0-9-]+`)

// name is a stack and command name from the module path's last element:
// lower case letters, digits and dashes (a major version suffix skipped).
func name(modPath string) string {
	prefix, _, _ := module.SplitPathVersion(modPath)
	n := strings.Trim(notNameChar.ReplaceAllString(strings.ToLower(path.Base(prefix)), "-"), "-")
	if n == "" || n[0] < 'a' || n[0] > 'z' {
		n = "tasks-" + n
	}
	return strings.TrimSuffix(n, "-")
}

// version is the leasehold version this program was built with, when it is
// a module version; else the placeholder.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return placeholderVersion
	}
	v := bi.Main.Version
	if bi.Main.Path != LeaseholdModule {
		for _, dep := range bi.Deps {
			if dep.Path == LeaseholdModule {
				v = dep.Version
			}
		}
	}
	if !semver.IsValid(v) || strings.HasSuffix(v, "+dirty") {
		return placeholderVersion
	}
	return v
}
