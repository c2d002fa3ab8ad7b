package settingstable

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the generated settings tables of docs/worker.md, docs/dispatch.md and docs/running.md from the table")

// generatedTables are the settings tables the docs show: the doc (relative
// to this package's directory), the name of its markers, and the scope the
// table lists.
var generatedTables = []struct {
	doc   string
	name  string
	scope Scope
}{
	{"../../docs/worker.md", "worker", Worker},
	{"../../docs/dispatch.md", "dispatch", Dispatch},
	{"../../docs/running.md", "process", Process},
}

// TestDocTables checks that each generated table of the docs is what
// Markdown renders from All; with -update it rewrites the tables instead.
func TestDocTables(t *testing.T) {
	for _, g := range generatedTables {
		t.Run(g.name, func(t *testing.T) {
			raw, err := os.ReadFile(g.doc)
			if err != nil {
				t.Fatal(err)
			}
			doc := string(raw)
			start, end, err := generatedBlock(doc, g.name)
			if err != nil {
				// -update cannot help: it would not know where the table goes.
				t.Fatalf("%s: %v. The table goes between the lines\n\t%s\n\t%s\nthen run\n\tgo test ./internal/settingstable -run TestDocTables -update", g.doc, err, Begin(g.name), End)
			}
			got, want := doc[start:end], Markdown(g.scope)
			if got == want {
				return
			}
			if *update {
				if err := os.WriteFile(g.doc, []byte(doc[:start]+want+doc[end:]), 0o644); err != nil {
					t.Fatal(err)
				}
				t.Logf("rewrote the %q table of %s", g.name, g.doc)
				return
			}
			t.Errorf("%s: the %q settings table differs from the settings table (internal/settingstable): %s\nregenerate it with\n\tgo test ./internal/settingstable -run TestDocTables -update",
				g.doc, g.name, firstDifference(got, want))
		})
	}
}

// generatedBlock returns where the text of the generated block name starts
// (the line after its Begin marker) and ends (the start of the End marker's
// line). Each marker must be a line of its own; Begin must appear once, and
// End after it.
func generatedBlock(doc, name string) (start, end int, err error) {
	begin := Begin(name)
	switch n := strings.Count(doc, begin); {
	case n == 0:
		return 0, 0, fmt.Errorf("no begin marker %q", begin)
	case n > 1:
		return 0, 0, fmt.Errorf("the begin marker %q appears %d times", begin, n)
	}
	i := strings.Index(doc, begin)
	if i > 0 && doc[i-1] != '\n' || !strings.HasPrefix(doc[i+len(begin):], "\n") {
		return 0, 0, errors.New("the begin marker is not a line of its own")
	}
	start = i + len(begin) + 1
	j := strings.Index(doc[start:], End)
	if j < 0 {
		return 0, 0, fmt.Errorf("no end marker %q after the begin marker", End)
	}
	end = start + j
	if end > start && doc[end-1] != '\n' {
		return 0, 0, errors.New("the end marker is not at the start of a line")
	}
	return start, end, nil
}

// firstDifference says on which line of the table got and want first
// differ, and how.
func firstDifference(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	line := func(lines []string, i int) string {
		if i < len(lines) {
			return fmt.Sprintf("%q", lines[i])
		}
		return "(no such line)"
	}
	for i := 0; i < len(g) || i < len(w); i++ {
		if i >= len(g) || i >= len(w) || g[i] != w[i] {
			return fmt.Sprintf("line %d of the table is\n\t%s\nwant\n\t%s", i+1, line(g, i), line(w, i))
		}
	}
	return "they differ" // not reached: got != want
}

// TestGeneratedBlockNeedsItsMarkers checks that a doc without its markers,
// or with them out of place, fails rather than passes unchecked.
func TestGeneratedBlockNeedsItsMarkers(t *testing.T) {
	b, table := Begin("worker"), "| a |\n|---|\n"
	for name, doc := range map[string]string{
		"no markers":        "# Options\n\n" + table,
		"no begin":          "# Options\n\n" + table + End + "\n",
		"no end":            "# Options\n\n" + b + "\n" + table,
		"end before begin":  End + "\n" + b + "\n" + table,
		"begin twice":       b + "\n" + table + End + "\n" + b + "\n" + table + End + "\n",
		"another name":      Begin("dispatch") + "\n" + table + End + "\n",
		"begin inside text": "see " + b + "\n" + table + End + "\n",
		"end inside a line": b + "\n" + table + "text " + End + "\n",
	} {
		if _, _, err := generatedBlock(doc, "worker"); err == nil {
			t.Errorf("%s: generatedBlock accepted\n%s", name, doc)
		}
	}
	doc := "# Options\n\n" + b + "\n" + table + End + "\n\nmore\n"
	start, end, err := generatedBlock(doc, "worker")
	if err != nil || doc[start:end] != table {
		t.Errorf("generatedBlock = %q, %v; want %q", doc[start:end], err, table)
	}
}
