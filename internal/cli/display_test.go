package cli

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/leasehold/leasehold"
)

// Ids stored before ids were checked, or written to the table by other
// means, may hold control or bidirectional characters: the human outputs
// print them escaped, never raw.
func TestOutputsEscapeIDs(t *testing.T) {
	t.Parallel()
	bad := "evil\x1b[2J\u202e\nSUCCEEDED\x00\xff"
	tasks := []leasehold.TaskInfo{{ID: bad, Kind: "k\u2066", Status: leasehold.StatusPending, MaxAttempts: 1}}
	var table, status bytes.Buffer
	if err := writeTable(&table, tasks); err != nil {
		t.Fatal(err)
	}
	if err := writeTask(&status, tasks[0]); err != nil {
		t.Fatal(err)
	}
	for name, out := range map[string]string{"list": table.String(), "status": status.String()} {
		if strings.ContainsAny(out, "\x1b\u202e\u2066\x00") || !utf8.ValidString(out) {
			t.Errorf("%s prints a raw control, bidi or invalid byte:\n%q", name, out)
		}
		if !strings.Contains(out, `"evil\x1b[2J\u202e\nSUCCEEDED\x00\xff"`) || !strings.Contains(out, `"k\u2066"`) {
			t.Errorf("%s does not show the id and kind quoted:\n%s", name, out)
		}
	}
	if lines := strings.Split(strings.TrimSpace(table.String()), "\n"); len(lines) != 2 {
		t.Errorf("list: the id split the row: %q", lines)
	}
}
