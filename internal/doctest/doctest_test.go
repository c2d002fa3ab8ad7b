// Package doctest runs the shell snippets of README.md and docs/*.md against
// the local stack, as a reader would after `eval "$(scripts/stack.sh env)"`.
//
// Every ```sh (or bash) block is run, in order, one bash process per file
// (so a block can use what an earlier block of the same page made), with
// `set -euo pipefail`. A block that cannot run here is preceded by a line
//
//	<!-- doctest: skip REASON -->
//
// and the reason is printed; a skip without a reason fails the test. The
// snippets run in a scratch directory that links to every top-level entry
// of the repository (the files the root package embeds are copied: an embed
// pattern refuses links), so `scripts/stack.sh`, `go install
// ./cmd/leasehold` and relative paths work as in a clone, and files a
// snippet writes land in the scratch directory. Nothing else is prepared: a
// file a snippet reads is written by a snippet the reader sees before it.
// GOBIN is a scratch
// bin directory at the front of PATH, and `leasehold` is installed there
// before the first snippet.
//
// A worker (`leasehold run` with the intake queue, so dispatcher and sweep
// too) serves the stack's named resources while the snippets run, as the
// docs tell the reader to keep one running.
package doctest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/awstest"
)

// snippet is one shell block of a page.
type snippet struct {
	file string // relative to the repository root
	line int    // of the opening fence
	code string
	skip string // the reason, when marked skip
}

var (
	fenceOpen  = regexp.MustCompile("^```(sh|bash)\\s*$")
	fenceClose = regexp.MustCompile("^```\\s*$")
	skipMarker = regexp.MustCompile(`^<!--\s*doctest:\s*skip\b\s*(.*?)\s*-->\s*$`)
)

func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot locate the doctest source file")
	}
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// pages lists the documents whose snippets run.
func pages(t *testing.T, root string) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := []string{"README.md"}
	for _, d := range docs {
		rel, _ := filepath.Rel(root, d)
		out = append(out, rel)
	}
	return out
}

// parse returns the shell blocks of one page.
func parse(t *testing.T, root, file string) []snippet {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, file))
	if err != nil {
		t.Fatal(err)
	}
	var (
		out     []snippet
		cur     *snippet
		prev    string // the previous non-blank line outside a block
		inOther bool   // inside a fenced block of another language
		lineNo  int
		sc      = bufio.NewScanner(bytes.NewReader(data))
		body    strings.Builder
	)
	for sc.Scan() {
		lineNo++
		line := sc.Text()
		switch {
		case cur != nil:
			if fenceClose.MatchString(line) {
				cur.code = body.String()
				out = append(out, *cur)
				cur = nil
				body.Reset()
				continue
			}
			body.WriteString(line)
			body.WriteByte('\n')
		case inOther:
			if fenceClose.MatchString(line) {
				inOther = false
				prev = ""
			}
		case fenceOpen.MatchString(line):
			cur = &snippet{file: file, line: lineNo}
			// A marker applies to the block right after it.
			if m := skipMarker.FindStringSubmatch(prev); m != nil {
				cur.skip = m[1]
				if cur.skip == "" {
					t.Errorf("%s:%d: <!-- doctest: skip --> needs a reason", file, lineNo)
					cur.skip = "(no reason given)"
				}
			}
			prev = ""
		case strings.HasPrefix(line, "```"):
			inOther = true
			prev = ""
		case strings.TrimSpace(line) != "":
			prev = line
		}
	}
	if cur != nil {
		t.Fatalf("%s:%d: unterminated code block", file, cur.line)
	}
	return out
}

// TestDocsAreParsed checks the parser on the pages themselves without a
// stack: every page parses, and every skip has a reason.
func TestDocsAreParsed(t *testing.T) {
	root := repoRoot(t)
	n := 0
	for _, p := range pages(t, root) {
		n += len(parse(t, root, p))
	}
	if n == 0 {
		t.Fatal("no shell snippets found in README.md and docs/: the parser or the docs are broken")
	}
}

func TestDocSnippets(t *testing.T) {
	awstest.Config(t) // skips (or fails under LEASEHOLD_REQUIRE_STACK=1) without a stack
	for _, v := range []string{"LEASEHOLD_TABLE", "LEASEHOLD_WORK_QUEUE_URL", "LEASEHOLD_INTAKE_QUEUE_URL", "LEASEHOLD_INTAKE_DLQ_URL"} {
		if os.Getenv(v) == "" {
			t.Fatalf("%s is unset: run the doc test with the environment of `eval \"$(scripts/stack.sh env)\"` (make test does)", v)
		}
	}
	root := repoRoot(t)

	// The scratch directory stands in for a clone.
	work := t.TempDir()
	entries, err := os.ReadDir(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() == ".git" {
			continue
		}
		if err := os.Symlink(filepath.Join(root, e.Name()), filepath.Join(work, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
	materializeEmbeds(t, root, work)
	bin := filepath.Join(t.TempDir(), "bin")
	env := append(os.Environ(),
		"GOBIN="+bin,
		"PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"),
		"AWS_EC2_METADATA_DISABLED=true",
		"NO_COLOR=1",
	)
	build := exec.CommandContext(t.Context(), "go", "install", "./cmd/leasehold")
	build.Dir, build.Env = work, env
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go install ./cmd/leasehold: %v\n%s", err, out)
	}

	stop := startWorker(t, work, env, filepath.Join(bin, "leasehold"))
	defer stop()

	var ran, skipped int
	for _, p := range pages(t, root) {
		snips := parse(t, root, p)
		var script strings.Builder
		script.WriteString("set -euo pipefail\n")
		count := 0
		for i, s := range snips {
			if s.skip != "" {
				t.Logf("%s:%d: skipped: %s", s.file, s.line, s.skip)
				skipped++
				continue
			}
			// The marker goes to stderr, so a failure names its block.
			fmt.Fprintf(&script, "echo '>>> doctest block %d (%s:%d)' >&2\n", i, s.file, s.line)
			script.WriteString(s.code)
			count++
		}
		if count == 0 {
			continue
		}
		ran += count
		t.Run(strings.ReplaceAll(p, "/", "_"), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), awstest.Scale(3*time.Minute))
			defer cancel()
			cmd := exec.CommandContext(ctx, "bash", "-c", script.String())
			cmd.Dir, cmd.Env = work, env
			cmd.Stdin = nil
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			cmd.WaitDelay = 5 * time.Second
			if err := cmd.Run(); err != nil {
				t.Fatalf("%s: the snippets failed: %v\n--- stderr (last block marker names the failing snippet):\n%s\n--- stdout:\n%s",
					p, err, tail(stderr.String(), 60), tail(stdout.String(), 40))
			}
			t.Logf("%s: %d snippets ran", p, count)
		})
	}
	if ran == 0 {
		t.Fatal("no snippet ran")
	}
	t.Logf("%d snippets ran, %d skipped with a reason", ran, skipped)
}

// startWorker runs `leasehold run` against the stack's named resources until
// the returned function stops it (SIGTERM, then a bounded wait).
func startWorker(t *testing.T, dir string, env []string, binary string) func() {
	t.Helper()
	logf, err := os.Create(filepath.Join(t.TempDir(), "worker.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "run",
		"--intake-queue-url", os.Getenv("LEASEHOLD_INTAKE_QUEUE_URL"),
		"--intake-dlq-url", os.Getenv("LEASEHOLD_INTAKE_DLQ_URL"))
	cmd.Dir, cmd.Env = dir, env
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatalf("start leasehold run: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	return func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-done:
			var exit *exec.ExitError
			if err != nil && !errors.As(err, &exit) {
				t.Errorf("leasehold run: %v", err)
			}
		case <-time.After(awstest.Scale(90 * time.Second)):
			_ = cmd.Process.Kill()
			<-done
			t.Errorf("leasehold run did not stop within its graceful-stop bound after SIGTERM")
		}
		logf.Close()
	}
}

func tail(s string, lines int) string {
	parts := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	return strings.Join(parts, "\n")
}

// materializeEmbeds replaces the links to the files the root package embeds
// (template.yaml and functions/Makefile, infra.go) with copies, and the
// links to the directories above them with real directories of links: an
// embed pattern refuses a symlink, so the scratch module would not compile.
func materializeEmbeds(t *testing.T, root, work string) {
	t.Helper()
	list := exec.CommandContext(t.Context(), "go", "list", "-f", `{{join .EmbedFiles "\n"}}`, ".")
	list.Dir = root
	out, err := list.Output()
	if err != nil {
		t.Fatalf("go list the root package's embedded files: %v", err)
	}
	for _, rel := range strings.Fields(string(out)) {
		parts := strings.Split(rel, "/")
		for i := 1; i < len(parts); i++ {
			dir := filepath.Join(parts[:i]...)
			if fi, err := os.Lstat(filepath.Join(work, dir)); err == nil && fi.Mode()&os.ModeSymlink == 0 {
				continue // made real for another file
			}
			if err := os.Remove(filepath.Join(work, dir)); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(filepath.Join(work, dir), 0o755); err != nil {
				t.Fatal(err)
			}
			entries, err := os.ReadDir(filepath.Join(root, dir))
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				if err := os.Symlink(filepath.Join(root, dir, e.Name()), filepath.Join(work, dir, e.Name())); err != nil {
					t.Fatal(err)
				}
			}
		}
		data, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(filepath.Join(work, rel)); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(work, rel), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
