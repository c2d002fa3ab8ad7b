package lifecycle

import (
	"flag"
	"os"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the execution states section of docs/states.md from the transitions table")

const statesDoc = "../../docs/states.md"

// TestStatesDoc checks that docs/states.md draws the machine the
// transitions table declares.
func TestStatesDoc(t *testing.T) {
	raw, err := os.ReadFile(statesDoc)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	begin, end := strings.Index(doc, statesDocBegin), strings.Index(doc, statesDocEnd)
	if begin < 0 || end < begin {
		t.Fatalf("%s has no execution states section (between %q and %q)", statesDoc, statesDocBegin, statesDocEnd)
	}
	want := renderStates()
	got := doc[begin : end+len(statesDocEnd)]
	if got == want {
		return
	}
	if *update {
		if err := os.WriteFile(statesDoc, []byte(doc[:begin]+want+doc[end+len(statesDocEnd):]), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s's execution states section differs from the transitions table; regenerate it with\n\tgo test ./internal/lifecycle -run TestStatesDoc -update", statesDoc)
}

// TestEveryStateHasATransition checks that each state but StateExited is
// left, and each but StateReceived entered, by a declared transition.
func TestEveryStateHasATransition(t *testing.T) {
	var from, to [numStates]bool
	for _, tr := range transitions {
		from[tr.From], to[tr.To] = true, true
	}
	for s := range State(numStates) {
		if s != StateExited && !from[s] {
			t.Errorf("no transition leaves %s", s)
		}
		if s != StateReceived && !to[s] {
			t.Errorf("no transition enters %s", s)
		}
	}
}
