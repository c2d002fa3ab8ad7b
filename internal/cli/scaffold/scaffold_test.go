package scaffold

import (
	"bytes"
	"errors"
	"go/format"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestCheckModule(t *testing.T) {
	t.Parallel()
	tests := []struct {
		path string
		ok   bool
	}{
		{"example.com/thumbnails", true},
		{"github.com/acme/jobs/v2", true},
		{"thumbnails", true},
		{"", false},
		{"example.com/Thumb nails", false},
		{"/abs/path", false},
		{"example.com/../x", false},
	}
	for _, tt := range tests {
		if err := CheckModule(tt.path); (err == nil) != tt.ok {
			t.Errorf("CheckModule(%q) = %v, want ok=%v", tt.path, err, tt.ok)
		}
	}
}

func TestName(t *testing.T) {
	t.Parallel()
	tests := map[string]string{
		"example.com/thumbnails":      "thumbnails",
		"github.com/acme/Image_Jobs":  "image-jobs",
		"github.com/acme/jobs/v2":     "jobs",
		"example.com/2fa":             "tasks-2fa",
		"example.com/thumbs.worker_/": "thumbs-worker",
	}
	for in, want := range tests {
		if got := name(in); got != want {
			t.Errorf("name(%q) = %q, want %q", in, got, want)
		}
	}
}

// setup makes a fake leasehold checkout (a go.mod) for --local.
func setup(t *testing.T) (local string) {
	t.Helper()
	local = t.TempDir()
	if err := os.WriteFile(filepath.Join(local, "go.mod"), []byte("module "+LeaseholdModule+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return local
}

func TestWriteWithLocal(t *testing.T) {
	t.Parallel()
	local := setup(t)
	dir := filepath.Join(t.TempDir(), "new", "thumbs")
	written, err := Write(Config{Dir: dir, Module: "example.com/thumbs", Local: local})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{".gitignore", "Makefile", "README.md", "awsconfig_lambda.go", "awsconfig_local.go", "go.mod", "kinds.go", "leasehold/functions/Makefile",
		"leasehold/template.yaml", "main.go", "main_test.go", "samconfig.toml", "template.yaml"}
	if !slices.Equal(written, want) {
		t.Errorf("wrote %q, want %q", written, want)
	}
	for _, f := range written {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "<no value>") || strings.Contains(string(b), "{{") {
			t.Errorf("%s: an unrendered template field", f)
		}
		if strings.HasSuffix(f, ".go") {
			if formatted, err := format.Source(b); err != nil || !bytes.Equal(formatted, b) {
				t.Errorf("%s is not gofmt-formatted (%v)", f, err)
			}
		}
	}
	mod := read(t, dir, "go.mod")
	for _, s := range []string{"module example.com/thumbs\n", "replace " + LeaseholdModule + " => " + local + "\n", "require " + LeaseholdModule + " " + placeholderVersion} {
		if !strings.Contains(mod, s) {
			t.Errorf("go.mod lacks %q:\n%s", s, mod)
		}
	}
	if mk := read(t, dir, "Makefile"); !strings.Contains(mk, "LEASEHOLD ?= "+local+"\n") {
		t.Errorf("the Makefile's LEASEHOLD is not the checkout:\n%s", mk)
	}
	if sc := read(t, dir, "samconfig.toml"); !strings.Contains(sc, `stack_name = "thumbs"`) {
		t.Errorf("samconfig.toml does not name the stack thumbs")
	}
}

func TestWriteWithoutLocalSaysToAddTheReplace(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if _, err := Write(Config{Dir: dir, Module: "example.com/thumbs"}); err != nil {
		t.Fatal(err)
	}
	mod := read(t, dir, "go.mod")
	if strings.Contains(mod, "\nreplace ") || !strings.Contains(mod, "//\treplace "+LeaseholdModule+" => ") {
		t.Errorf("go.mod should carry the replace directive as a comment only:\n%s", mod)
	}
	if !strings.Contains(read(t, dir, "README.md"), "go mod tidy") {
		t.Error("README.md does not say to run go mod tidy")
	}
}

func TestWriteRefusesANonEmptyDirectoryUnlessForced(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Write(Config{Dir: dir, Module: "example.com/thumbs"}); !errors.Is(err, ErrNotEmpty) {
		t.Fatalf("Write into a non-empty directory: %v, want ErrNotEmpty", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "go.mod")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused Write wrote go.mod (%v)", err)
	}
	if _, err := Write(Config{Dir: dir, Module: "example.com/thumbs", Force: true}); err != nil {
		t.Fatal(err)
	}
	if read(t, dir, "notes.txt") != "mine" {
		t.Error("--force touched a file that is not the project's")
	}
}

func TestWriteRejects(t *testing.T) {
	t.Parallel()
	if _, err := Write(Config{Dir: t.TempDir(), Module: "not a path"}); err == nil {
		t.Error("Write accepted an invalid module path")
	}
	if _, err := Write(Config{Dir: t.TempDir(), Module: "example.com/x", Local: t.TempDir()}); err == nil {
		t.Error("Write accepted a --local directory without go.mod")
	}
}

func read(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
