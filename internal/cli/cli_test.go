package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
)

func TestParseLine(t *testing.T) {
	t.Parallel()
	soon := time.Now().Add(48 * time.Hour).Truncate(time.Second).UTC()
	cases := []struct {
		name, line string
		want       leasehold.Submission
		err        string
	}{
		{"minimal", `{"kind":"k"}`, leasehold.Submission{Kind: "k"}, ""},
		{"everything", `{"v":1,"kind":"k","payload":{"a":1},"id":"x","max_attempts":3,"delay_seconds":60}`,
			leasehold.Submission{Kind: "k", Payload: []byte(`{"a":1}`), ID: "x", MaxAttempts: 3, Delay: time.Minute}, ""},
		{"null payload", `{"kind":"k","payload":null}`, leasehold.Submission{Kind: "k"}, ""},
		{"run at", `{"kind":"k","run_at":"` + soon.Format(time.RFC3339) + `"}`, leasehold.Submission{Kind: "k", RunAt: soon}, ""},
		{"run at too far", `{"kind":"k","run_at":"2999-01-02T03:04:05Z"}`, leasehold.Submission{}, `"run_at" is more than 365 days ahead`},
		{"not JSON", `{"kind":`, leasehold.Submission{}, "empty or truncated JSON"},
		{"syntax", `{"kind" "k"}`, leasehold.Submission{}, "invalid JSON at byte"},
		{"too deep", `{"kind":"k","payload":` + strings.Repeat("[", 10001) + strings.Repeat("]", 10001) + `}`, leasehold.Submission{}, "the body nests arrays and objects deeper than 10000 levels, the JSON depth limit"},
		{"two values", `{"kind":"k"} {"kind":"k"}`, leasehold.Submission{}, "trailing data after the JSON object"},
		{"array", `[1]`, leasehold.Submission{}, "must be a JSON object, not an array"},
		{"unknown field", `{"kind":"k","paylod":{}}`, leasehold.Submission{}, `unknown field "paylod"`},
		{"version", `{"v":2,"kind":"k"}`, leasehold.Submission{}, "version 2; this dispatcher understands version 1"},
		{"no kind", `{"payload":{}}`, leasehold.Submission{}, `"kind" is required`},
		{"empty id", `{"kind":"k","id":""}`, leasehold.Submission{}, `"id" is empty`},
		{"zero attempts", `{"kind":"k","max_attempts":0}`, leasehold.Submission{}, `"max_attempts" 0 is outside 1..100`},
		{"both times", `{"kind":"k","delay_seconds":1,"run_at":"2030-01-02T03:04:05Z"}`, leasehold.Submission{}, "exclusive"},
		{"negative delay", `{"kind":"k","delay_seconds":-1}`, leasehold.Submission{}, `"delay_seconds" -1 is outside 0..31536000`},
		{"bad time", `{"kind":"k","run_at":"soon"}`, leasehold.Submission{}, "RFC 3339"},
		{"queue", `{"kind":"k","queue":"images-work"}`, leasehold.Submission{Kind: "k", Queue: "images-work"}, ""},
		{"fifo queue", `{"kind":"k","queue":"q.fifo"}`, leasehold.Submission{}, "FIFO"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := parseLine([]byte(tc.line))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("err = %v", err)
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestReadSubmissionsNumbersLines(t *testing.T) {
	t.Parallel()
	in := "{\"kind\":\"a\"}\n\n  \nnot json\r\n{\"kind\":\"b\"}" // no final newline
	subs, lines, bad, err := readSubmissions(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	if len(subs) != 2 || subs[0].Kind != "a" || subs[1].Kind != "b" || fmt.Sprint(lines) != "[1 5]" {
		t.Fatalf("subs %+v on lines %v", subs, lines)
	}
	if len(bad) != 1 || bad[0].line != 4 {
		t.Fatalf("bad lines %+v, want line 4", bad)
	}
}

func TestExitCodes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		err  error
		want int
	}{
		{nil, ExitOK},
		{errors.New("boom"), ExitError},
		{usageErrorf("bad flag"), ExitUsage},
		{fmt.Errorf("x: %w", leasehold.ErrInvalid), ExitUsage},
		{&notFoundError{id: "x", table: "t", err: leasehold.ErrNotFound}, ExitNotFound},
		{&leasehold.UnreachableError{Service: "SQS", Endpoint: "http://127.0.0.1:1", Reason: "connection refused"}, ExitUnreachable},
		{&leasehold.MissingResourceError{Service: "DynamoDB", Resource: "t"}, ExitUnreachable},
		{&leasehold.TaskError{ID: "x", Status: leasehold.StatusFailed}, ExitTaskEnded},
		{fmt.Errorf("watch: %w", &leasehold.TaskError{ID: "x", Status: leasehold.StatusCancelled}), ExitTaskEnded},
		{&leasehold.TaskError{ID: "x", Status: leasehold.StatusRunning}, ExitError},
		{&endedError{failed: 0, cancelled: 1, total: 3}, ExitTaskEnded},
		{context.DeadlineExceeded, ExitError},
		{fmt.Errorf("create x: %w", &leasehold.ConflictError{TaskID: "x", Field: "payload"}), ExitConflict},
	}
	for _, tc := range cases {
		if got := exitCode(tc.err); got != tc.want {
			t.Errorf("exitCode(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

func TestMessagesGiveHints(t *testing.T) {
	t.Parallel()
	cases := []struct {
		err  error
		want string
	}{
		{&leasehold.UnreachableError{Service: "DynamoDB", Endpoint: "http://127.0.0.1:4566", Reason: "connection refused"},
			"cannot reach DynamoDB at http://127.0.0.1:4566: connection refused — is the local stack running? (make stack-up)"},
		{&leasehold.UnreachableError{Service: "SQS", Endpoint: "https://sqs.eu-west-1.amazonaws.com", Reason: "no answer in time"},
			"cannot reach SQS at https://sqs.eu-west-1.amazonaws.com: no answer in time — check --endpoint-url, the AWS_ENDPOINT_URL* variables and the network"},
		{&leasehold.MissingResourceError{Service: "DynamoDB", Resource: "tasks"},
			"DynamoDB table tasks does not exist — set --table or LEASEHOLD_TABLE, or create the stack (make stack-up)"},
		{&leasehold.MissingResourceError{Service: "DynamoDB", Resource: "tasks", Region: "us-west-2", Endpoint: "http://127.0.0.1:4567"},
			"DynamoDB table tasks does not exist (region us-west-2, endpoint http://127.0.0.1:4567) — set --table"},
		{&leasehold.NotSentError{ID: "x", Err: &leasehold.MissingResourceError{Service: "SQS", Resource: "q"}},
			"task x is stored but its dispatch token was not sent: SQS queue q does not exist — create the queue (make stack-up creates the stack's), or name another with --queue or --queue-url"},
		{errors.New("two\nlines"), "two lines"},
	}
	for _, tc := range cases {
		if got := message(tc.err); !strings.HasPrefix(got, tc.want) {
			t.Errorf("message(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

func TestCheckJSON(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		`{"a":1}`: "",
		`"text"`:  "",
		`42`:      "",
		``:        "it is empty",
		`{"a":}`:  "(at byte 6)",
		`hello`:   `a string must be quoted`,
		`{} {}`:   "after top-level value",
		strings.Repeat("[", 10001) + strings.Repeat("]", 10001): "nests arrays and objects deeper than 10000 levels",
	} {
		err := checkJSON([]byte(in))
		switch {
		case want == "" && err != nil:
			t.Errorf("checkJSON(%q) = %v", in, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
			t.Errorf("checkJSON(%q) = %v, want %q", in, err, want)
		}
	}
}

// An explicit --id ” (a script's unset variable) is an error, not a
// random id: a random id would make every rerun a new task.
func TestEnqueueRefusesAnEmptyID(t *testing.T) {
	t.Parallel()
	for args, want := range map[*[]string]string{
		{"enqueue", "--kind", "k", "--id", "", "{}"}: "--id is empty",
		{"enqueue", "--kind", "k", "--id=", "{}"}:    "--id is empty",
		{"enqueue", "--file", "-", "--id", ""}:       "--file takes every field from the file",
	} {
		args := *args
		var out, errOut bytes.Buffer
		code := Main(t.Context(), args, Streams{In: strings.NewReader(`{"kind":"k"}` + "\n"), Out: &out, Err: &errOut, Getenv: func(string) string { return "" }})
		if code != ExitUsage || !strings.Contains(errOut.String(), want) || out.Len() != 0 {
			t.Errorf("%q: exit %d, stderr %q, stdout %q; want a usage error with %q", args, code, errOut.String(), out.String(), want)
		}
	}
}

// A --file that cannot be opened is a usage error that names the path once.
func TestEnqueueFileThatCannotBeOpened(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "tasks.jsonl")
	var out, errOut bytes.Buffer
	code := Main(t.Context(), []string{"enqueue", "--file", path}, Streams{In: strings.NewReader(""), Out: &out, Err: &errOut, Getenv: func(string) string { return "" }})
	want := "leasehold: read tasks: open " + path + ": no such file or directory"
	if code != ExitUsage || !strings.HasPrefix(errOut.String(), want+"\n") || strings.Count(errOut.String(), path) != 1 || out.Len() != 0 {
		t.Errorf("exit %d, stderr %q, stdout %q; want a usage error starting %q", code, errOut.String(), out.String(), want)
	}
}

// Main runs in-process too; its usage errors need no AWS.
func TestMainInProcess(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	code := Main(t.Context(), []string{"enqueue", "--kind", "k", "{"}, Streams{In: strings.NewReader(""), Out: &out, Err: &errOut})
	if code != ExitUsage || !strings.Contains(errOut.String(), "leasehold: payload (argument) is not valid JSON") || out.Len() != 0 {
		t.Fatalf("exit %d, stderr %q, stdout %q", code, errOut.String(), out.String())
	}
}
