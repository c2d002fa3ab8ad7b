package cli

import (
	"bytes"
	"regexp"
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

// Task text comes from handlers and from whoever can send to the queues:
// an error, a result, a queue name or a lease owner may hold terminal
// escape sequences. Every human output prints them escaped (issue 18,
// item 20).
func TestOutputsEscapeTaskText(t *testing.T) {
	t.Parallel()
	const evil = "boom\x1b[31mred\rover\x9b2Jcsi\u009bC1\u202erev\x07\xff"
	raw := []string{"\x1b", "\r", "\x9b", "\u009b", "\u202e", "\x07", "\xff"}
	info := leasehold.TaskInfo{
		ID: "t1", Kind: "k", Queue: "q\x1b[0m", Status: leasehold.StatusRunning, Attempt: 1, MaxAttempts: 3,
		Error: evil, LeaseOwner: "w\x1b]0;title\x07",
		Payload: []byte(`"\u001b` + "\u009b" + `"`), Result: []byte(`"` + "\u009b\u202e" + `"`),
		History: []leasehold.AttemptInfo{{Attempt: 1, Status: leasehold.StatusFailed, Error: evil}},
	}
	var table, status bytes.Buffer
	if err := writeTable(&table, []leasehold.TaskInfo{info}); err != nil {
		t.Fatal(err)
	}
	if err := writeTask(&status, info); err != nil {
		t.Fatal(err)
	}
	msg := message(&leasehold.TaskError{ID: "t1", Status: leasehold.StatusFailed, Message: evil})
	for name, out := range map[string]string{"list": table.String(), "status": status.String(), "error message": msg} {
		for _, r := range raw {
			if strings.Contains(out, r) {
				t.Errorf("%s prints %q raw:\n%q", name, r, out)
			}
		}
		if !strings.Contains(out, `boom\x1b[31mred`) || !strings.Contains(out, `\x9b2Jcsi\u009bC1\u202erev\a\xff`) {
			t.Errorf("%s does not show the error text escaped:\n%s", name, out)
		}
	}
	for _, want := range []string{`q\x1b[0m`, `w\x1b]0;title\a`, `\u009b\u202e`} {
		if !strings.Contains(status.String(), want) {
			t.Errorf("status does not show %s:\n%s", want, status.String())
		}
	}
}

// status heads the reason of a handed-back attempt (a snooze, a sleep, a
// hold) apart from an error: the task waits, nothing failed.
func TestStatusHeadsAHandedBackReason(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name    string
		status  leasehold.Status
		attempt int
		want    string
	}{
		{"handed back", leasehold.StatusPending, 0, `(?m)^waits because:\s+held back`},
		{"running after the hand-back", leasehold.StatusRunning, 1, `(?m)^waited because:\s+held back`},
		{"retrying", leasehold.StatusPending, 1, `(?m)^error:\s+held back`},
		{"running after a failure", leasehold.StatusRunning, 2, `(?m)^error:\s+held back`},
	} {
		info := leasehold.TaskInfo{
			ID: "t1", Kind: "k", Status: c.status, Attempt: c.attempt, MaxAttempts: 3,
			Error:   "held back: kind \"k\" is at its concurrency limit",
			History: []leasehold.AttemptInfo{{Attempt: 1, Status: leasehold.StatusPending, Error: "held back"}},
		}
		var out bytes.Buffer
		if err := writeTask(&out, info); err != nil {
			t.Fatal(err)
		}
		if !regexp.MustCompile(c.want).MatchString(out.String()) || strings.Count(out.String(), "held back: kind") != 1 {
			t.Errorf("%s: status lacks %q, once:\n%s", c.name, c.want, out.String())
		}
	}
}

// `leasehold list --queue NAME` takes the work queue's own name as "-":
// the client lists the tasks recorded with it as of the default queue.
func TestWorkQueueNameIsTheDefaultQueue(t *testing.T) {
	t.Parallel()
	for url, want := range map[string]string{
		"": DefaultWorkQueueName,
		"http://127.0.0.1:4566/000000000000/my-work": "my-work",
	} {
		if got := (&app{queueURL: url}).workQueueName(); got != want {
			t.Errorf("work queue name of %q: %q, want %q", url, got, want)
		}
	}
}
