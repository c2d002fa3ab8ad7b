// Package doctest runs the shell snippets of README.md and docs/*.md against
// the local stack as a reader types them, in a fresh shell.
//
// The pages run in the order a reader meets them: README.md, then the docs
// in the order the README first links them (any other page after those,
// by name). Every ```sh (or bash) block runs, in order, with `set -euo
// pipefail`. A page starts where the README left its reader: in the
// repository's root, with the variables the README's snippets exported
// (its `eval "$(scripts/stack.sh env)"` among them) and nothing else. The
// README itself starts from a fresh login's environment: HOME, a system
// PATH with the go command on it, the machine's Go settings (module and
// build caches, proxy), and the stack's ports when they are not the
// default. None of the test's own environment (the stack's endpoints,
// credentials, table and queues) reaches a snippet unless a snippet sets it.
//
// A block that cannot run here is preceded by a line
//
//	<!-- doctest: skip REASON -->
//
// and the reason is printed; a skip without a reason fails the test. A
// block the reader runs in a second terminal (a worker that runs until
// stopped) is preceded by
//
//	<!-- doctest: background REASON -->
//
// and is started at that point in a fresh shell of its own (the fresh
// login's environment, in the root), kept running while the later snippets
// run, and stopped with SIGTERM after the last page; if it exits before
// that, the test fails with its output.
//
// The snippets run in a scratch directory that links to every top-level
// entry of the repository (the files the root package embeds are copied: an
// embed pattern refuses links), so `scripts/stack.sh`, `go install
// ./cmd/leasehold` and relative paths work as in a clone, and files a
// snippet writes land in the scratch directory. GOPATH is a scratch
// directory too (the module cache stays the machine's), so `go install`
// writes where `$(go env GOPATH)/bin` says, as on a fresh machine. Nothing
// else is prepared: a file a snippet reads is written by a snippet the
// reader sees before it, and a worker a snippet needs is one the reader was
// told to start.
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
	bg   string // the reason, when marked background (a second terminal)
}

var (
	fenceOpen  = regexp.MustCompile("^```(sh|bash)\\s*$")
	fenceClose = regexp.MustCompile("^```\\s*$")
	marker     = regexp.MustCompile(`^<!--\s*doctest:\s*(skip|background)\b\s*(.*?)\s*-->\s*$`)
	docLink    = regexp.MustCompile(`\(docs/([A-Za-z0-9_.-]+\.md)[)#]`)
)

func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot locate the doctest source file")
	}
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// pages lists the documents whose snippets run, in the order a reader meets
// them: README.md, then each page of docs/ in the order the README first
// links it, then any page it does not link, by name.
func pages(t *testing.T, root string) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	exists := map[string]bool{}
	for _, d := range docs {
		exists["docs/"+filepath.Base(d)] = true
	}
	out := []string{"README.md"}
	seen := map[string]bool{}
	for _, m := range docLink.FindAllStringSubmatch(string(readme), -1) {
		rel := "docs/" + m[1]
		if exists[rel] && !seen[rel] {
			seen[rel] = true
			out = append(out, rel)
		}
	}
	for _, d := range docs { // Glob sorts by name
		if rel := "docs/" + filepath.Base(d); !seen[rel] {
			out = append(out, rel)
		}
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
			if m := marker.FindStringSubmatch(prev); m != nil {
				reason := m[2]
				if reason == "" {
					t.Errorf("%s:%d: <!-- doctest: %s --> needs a reason", file, lineNo, m[1])
					reason = "(no reason given)"
				}
				if m[1] == "skip" {
					cur.skip = reason
				} else {
					cur.bg = reason
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
	// The README's worker serves the stack's named table and queues, which
	// the `leasehold init` project's README test uses too.
	awstest.LockNamedResources(t)
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
	fresh := awstest.FreshShellEnv(t)
	state := t.TempDir()

	var bgs []*background
	defer func() {
		for _, b := range bgs {
			b.stop(t)
		}
	}()

	var ran, skipped int
	readmeEnv := "" // where the README leaves its reader, once it has run
	for _, p := range pages(t, root) {
		snips := parse(t, root, p)
		// A page runs as segments split at its background blocks: each
		// segment is one bash that starts where the one before it ended.
		var segs []segment
		cur := segment{}
		for i, s := range snips {
			switch {
			case s.skip != "":
				t.Logf("%s:%d: skipped: %s", s.file, s.line, s.skip)
				skipped++
			case s.bg != "":
				cur.then = &snips[i]
				segs = append(segs, cur)
				cur = segment{}
			default:
				// The marker goes to stderr, so a failure names its block.
				fmt.Fprintf(&cur.script, "echo '>>> doctest block %d (%s:%d)' >&2\n", i, s.file, s.line)
				cur.script.WriteString(s.code)
				cur.blocks++
			}
		}
		segs = append(segs, cur)
		count := 0
		for _, sg := range segs {
			count += sg.blocks
		}
		if count == 0 && len(segs) == 1 {
			continue
		}
		ran += count
		t.Run(strings.ReplaceAll(p, "/", "_"), func(t *testing.T) {
			if p != "README.md" && readmeEnv == "" {
				t.Fatal("README.md's snippets did not run to the end, so no later page has the shell its reader would have")
			}
			from := readmeEnv // "" for the README: a fresh login
			for n, sg := range segs {
				out := filepath.Join(state, fmt.Sprintf("%s-%d.env", strings.ReplaceAll(p, "/", "_"), n))
				runSegment(t, p, work, fresh, from, out, sg.script.String())
				from = out
				for _, b := range bgs {
					b.check(t)
				}
				if sg.then != nil {
					bgs = append(bgs, startBackground(t, *sg.then, work, fresh))
				}
			}
			if p == "README.md" {
				readmeEnv = from
			}
			t.Logf("%s: %d snippets ran", p, count)
		})
	}
	if ran == 0 {
		t.Fatal("no snippet ran")
	}
	for _, b := range bgs {
		b.check(t)
	}
	t.Logf("%d snippets ran, %d skipped with a reason, %d in the background", ran, skipped, len(bgs))
}

// segment is the blocks of a page between two background blocks, and the
// background block that follows them, if any.
type segment struct {
	script strings.Builder
	blocks int
	then   *snippet
}

// runSegment runs one segment's blocks in bash in the fresh environment,
// first taking on the exported variables and directory that the file from
// holds (none when from is ""), and leaves its own in the file out.
func runSegment(t *testing.T, page, work string, fresh []string, from, out, blocks string) {
	t.Helper()
	var script strings.Builder
	script.WriteString("set -euo pipefail\n")
	if from != "" {
		fmt.Fprintf(&script, ". %s\ncd \"$(cat %s.cwd)\"\n", shellQuote(from), shellQuote(from))
	}
	script.WriteString(blocks)
	fmt.Fprintf(&script, "\nexport -p >%s\npwd >%s.cwd\n", shellQuote(out), shellQuote(out))

	ctx, cancel := context.WithTimeout(t.Context(), awstest.Scale(3*time.Minute))
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script.String())
	cmd.Dir, cmd.Env, cmd.Stdin = work, fresh, nil
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s: the snippets failed: %v\n--- stderr (last block marker names the failing snippet):\n%s\n--- stdout:\n%s",
			page, err, tail(stderr.String(), 60), tail(stdout.String(), 40))
	}
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// background is a block a reader runs in a second terminal: its own bash in
// the fresh environment, in its own process group, owned by the test.
type background struct {
	s    snippet
	cmd  *exec.Cmd
	log  string
	done chan error
}

func startBackground(t *testing.T, s snippet, dir string, fresh []string) *background {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "background.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "-c", "set -euo pipefail\n"+s.code)
	cmd.Dir, cmd.Env = dir, fresh
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("%s:%d: start the background block: %v", s.file, s.line, err)
	}
	b := &background{s: s, cmd: cmd, log: logPath, done: make(chan error, 1)}
	go func() {
		b.done <- cmd.Wait()
		logf.Close()
	}()
	return b
}

// check fails the test if the block has exited: a reader's worker that
// stopped would leave every later snippet waiting.
func (b *background) check(t *testing.T) {
	t.Helper()
	select {
	case err := <-b.done:
		b.done <- err // for stop
		out, _ := os.ReadFile(b.log)
		t.Fatalf("%s:%d: the background block exited before the last page: %v\n--- its output:\n%s", b.s.file, b.s.line, err, tail(string(out), 40))
	default:
	}
}

// stop sends SIGTERM to the block's process group, as Ctrl-C in its
// terminal would end it, and waits a bounded time for it to exit.
func (b *background) stop(t *testing.T) {
	t.Helper()
	_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case err := <-b.done:
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Errorf("%s:%d: the background block: %v", b.s.file, b.s.line, err)
		}
	case <-time.After(awstest.Scale(90 * time.Second)):
		_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
		<-b.done
		out, _ := os.ReadFile(b.log)
		t.Errorf("%s:%d: the background block did not stop within its graceful-stop bound after SIGTERM:\n%s", b.s.file, b.s.line, tail(string(out), 40))
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
