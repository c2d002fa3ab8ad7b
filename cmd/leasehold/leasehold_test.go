package main_test

// Tests of the leasehold command as users run it: the binary is built once
// in TestMain and run with exec, its environment pointed at per-test tables
// and queues of the local stack (internal/awstest). The tests of usage
// errors and of an unreachable stack need no stack.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/examples"
	"github.com/leasehold/leasehold/internal/awstest"
)

// binary is the leasehold command built by TestMain.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "leasehold-cli-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "leasehold")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	out, err := exec.CommandContext(ctx, "go", "build", "-o", binary, ".").CombinedOutput()
	cancel()
	if err != nil {
		fmt.Fprintf(os.Stderr, "build leasehold: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// result is one run of the binary.
type result struct {
	code           int
	stdout, stderr string
	took           time.Duration
}

// run runs the binary with env (and nothing else of this process's
// environment but PATH) and stdin, bounded by timeout.
func run(t *testing.T, env []string, stdin string, timeout time.Duration, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), awstest.Scale(timeout))
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append([]string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + t.TempDir(), // no shared AWS config or credentials
		"AWS_EC2_METADATA_DISABLED=true",
	}, env...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	r := result{stdout: stdout.String(), stderr: stderr.String(), took: time.Since(start)}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit) && ctx.Err() == nil:
		r.code = exit.ExitCode()
	default:
		t.Fatalf("leasehold %s: %v (after %s)\nstderr: %s", strings.Join(args, " "), err, r.took, r.stderr)
	}
	return r
}

// expect checks the exit code and that stderr contains want.
func (r result) expect(t *testing.T, code int, want string) {
	t.Helper()
	if r.code != code || !strings.Contains(r.stderr, want) {
		t.Fatalf("exit %d, want %d; stderr %q should contain %q\nstdout: %s", r.code, code, r.stderr, want, r.stdout)
	}
}

// closedPort returns a local address nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// offlineEnv points the command at a port nothing listens on.
func offlineEnv(t *testing.T) (env []string, endpoint string) {
	endpoint = "http://" + closedPort(t)
	return []string{
		"AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test",
		"AWS_ENDPOINT_URL_DYNAMODB=" + endpoint, "AWS_ENDPOINT_URL_SQS=" + endpoint,
	}, endpoint
}

// stack is one test's table and queues, and the command's environment for
// them.
type stack struct {
	cfg    aws.Config
	table  string
	queues awstest.Queues
	env    []string
	sqs    *sqs.Client
}

func newStack(t *testing.T) *stack {
	t.Helper()
	cfg := awstest.Config(t)
	s := &stack{cfg: cfg, table: awstest.NewTable(t, cfg), queues: awstest.NewQueues(t, cfg), sqs: sqs.NewFromConfig(cfg)}
	s.env = []string{
		"AWS_REGION=" + cfg.Region, "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test",
		"AWS_ENDPOINT_URL_DYNAMODB=" + os.Getenv("AWS_ENDPOINT_URL_DYNAMODB"),
		"AWS_ENDPOINT_URL_SQS=" + os.Getenv("AWS_ENDPOINT_URL_SQS"),
		"LEASEHOLD_TABLE=" + s.table,
		"LEASEHOLD_WORK_QUEUE_URL=" + s.queues.Work,
	}
	return s
}

func (s *stack) run(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	return run(t, s.env, stdin, time.Minute, args...)
}

// startWorker runs a worker with the example kinds on the stack's work
// queue until the test ends.
func (s *stack) startWorker(t *testing.T) {
	t.Helper()
	hs := leasehold.NewHandlers()
	examples.Register(hs)
	w, err := leasehold.NewWorker(leasehold.WorkerConfig{
		AWS: s.cfg, Table: s.table, QueueURL: s.queues.Work, DeadLetterQueueURL: s.queues.WorkDLQ, Handlers: hs,
		Logger: slog.New(slog.DiscardHandler), LongPoll: time.Second,
	})
	if err != nil {
		t.Fatalf("NewWorker: %v", err)
	}
	ctx, stop := context.WithCancel(context.WithoutCancel(t.Context()))
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("worker Run: %v", err)
		}
	})
}

// drainers delete the work queue's messages as they arrive (awstest.Drain):
// moto's SendMessage costs time in proportion to the messages already
// queued, so a bulk test keeps the queue short to stay fast.
var drainers = 4

func decode[T any](t *testing.T, r result) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatalf("stdout is not the JSON expected (%v):\n%s", err, r.stdout)
	}
	return v
}

func compact(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatalf("not JSON: %q", raw)
	}
	return b.String()
}

func TestHelpDocumentsExitCodes(t *testing.T) {
	t.Parallel()
	env, _ := offlineEnv(t)
	r := run(t, env, "", 30*time.Second, "--help")
	if r.code != 0 {
		t.Fatalf("--help exited %d: %s", r.code, r.stderr)
	}
	for _, want := range []string{"Exit codes:", "0  success", "1  error", "2  usage", "3  task not found", "4  stack unreachable", "5  result/watch",
		"enqueue", "status", "result", "list", "cancel", "retry", "watch", "schedule", "init", "--table", "--queue-url", "--endpoint-url", "--region"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("--help does not mention %q", want)
		}
	}
	r = run(t, env, "", 30*time.Second, "enqueue", "--help")
	for _, want := range []string{"--kind", "--id", "--payload-file", "--delay", "--at", "--max-attempts", "--file", "delay_seconds", "Exit codes:"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("enqueue --help does not mention %q", want)
		}
	}
}

// Mistakes in the command line exit 2 before any AWS call: the environment
// points at a port nothing listens on.
func TestUsageErrorsExit2(t *testing.T) {
	t.Parallel()
	env, _ := offlineEnv(t)
	env = append(env, "LEASEHOLD_WORK_QUEUE_URL=http://127.0.0.1:1/000000000000/q")
	cases := []struct {
		name  string
		stdin string
		args  []string
		want  string
	}{
		{"unknown command", "", []string{"enqeue"}, `unknown command "enqeue"; did you mean enqueue?`},
		{"unknown command, flags after", "", []string{"enqeue", "--kind", "greet", "{}"}, `unknown command "enqeue"; did you mean enqueue?`},
		{"unknown command after a global flag", "", []string{"--table", "t", "lsit", "--status", "failed"}, `unknown command "lsit"; did you mean init or list?`},
		{"unknown flag", "", []string{"list", "--bogus"}, "unknown flag: --bogus"},
		{"bad flag value", "", []string{"list", "--limit", "many"}, "invalid argument"},
		{"no kind", "", []string{"enqueue", "{}"}, "--kind is required"},
		{"truncated JSON", "", []string{"enqueue", "--kind", "k", `{"a":`}, "payload (argument) is not valid JSON"},
		{"unquoted string", "", []string{"enqueue", "--kind", "k", "hello"}, `a string must be quoted`},
		{"bad JSON on stdin", "{bad", []string{"enqueue", "--kind", "k", "-"}, "payload (stdin) is not valid JSON"},
		{"empty stdin", "", []string{"enqueue", "--kind", "k", "--payload-file", "-"}, "it is empty"},
		{"missing payload file", "", []string{"enqueue", "--kind", "k", "--payload-file", "/no/such/file"}, "no such file"},
		{"delay and at", "", []string{"enqueue", "--kind", "k", "--delay", "1m", "--at", "2031-01-01T00:00:00Z"}, "exclusive"},
		{"bad time", "", []string{"enqueue", "--kind", "k", "--at", "tomorrow"}, "RFC 3339"},
		{"too many attempts", "", []string{"enqueue", "--kind", "k", "--max-attempts", "101"}, "max attempts 101 is outside 1..100"},
		{"file and kind", "", []string{"enqueue", "--file", "-", "--kind", "k"}, "--file takes every field"},
		{"status without id", "", []string{"status"}, "accepts 1 arg(s), received 0"},
		{"zero limit", "", []string{"list", "--limit", "0"}, "--limit 0 is outside"},
		{"unknown status", "", []string{"list", "--status", "done"}, `unknown status "done"`},
		{"bad since", "", []string{"list", "--since", "yesterday"}, "--since: want a duration back from now"},
		{"parent and filter", "", []string{"list", "--parent", "p", "--kind", "k"}, "--parent takes no --status, --cursor or filter"},
		{"watch nothing", "", []string{"watch"}, "give the ids"},
		{"watch ids and all", "", []string{"watch", "--all", "x"}, "not both"},
		{"retry zero attempts", "", []string{"retry", "--attempts", "0", "x"}, "--attempts must be at least 1"},
		{"bad endpoint", "", []string{"--endpoint-url", "localhost", "status", "x"}, "is not a URL"},
		{"init typo", "", []string{"inti", "x"}, `unknown command "inti"; did you mean init?`},
		{"init without module", "", []string{"init", "no-such-dir"}, "--module is required"},
		{"init bad module", "", []string{"init", "no-such-dir", "--module", "a b"}, "--module: malformed import path"},
		{"init without dir", "", []string{"init", "--module", "example.com/x"}, "accepts 1 arg(s), received 0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := run(t, env, tc.stdin, 30*time.Second, tc.args...)
			r.expect(t, 2, tc.want)
			if n := strings.Count(strings.TrimSpace(r.stderr), "\n"); n > 1 {
				t.Errorf("usage error took %d lines:\n%s", n+1, r.stderr)
			}
		})
	}
}

// A stack that is not there exits 4 at once, saying where it looked.
func TestUnreachableStackExit4(t *testing.T) {
	t.Parallel()
	env, endpoint := offlineEnv(t)
	cases := [][]string{
		{"status", "x"},
		{"list", "--json"},
		{"cancel", "x"},
		{"retry", "x"},
		{"result", "x"},
		{"watch", "x"},
		{"--endpoint-url", endpoint, "status", "x"},
	}
	for _, args := range cases {
		r := run(t, env, "", 30*time.Second, args...)
		r.expect(t, 4, "cannot reach DynamoDB at "+endpoint+": connection refused — is the local stack running? (make stack-up)")
		if r.took > 5*time.Second {
			t.Errorf("%v took %s to report an unreachable stack", args, r.took)
		}
	}
	// Enqueue looks the work queue up first when it is not configured.
	r := run(t, env, "", 30*time.Second, "enqueue", "--kind", "greet", `{"name":"ada"}`)
	r.expect(t, 4, "cannot reach SQS at "+endpoint+": connection refused")

	// So does run; with a queue URL it checks the table first. Either way
	// one line, no SDK log lines.
	for _, tc := range []struct {
		env     []string
		service string
	}{
		{env, "SQS"},
		{append(slices.Clone(env), "LEASEHOLD_WORK_QUEUE_URL="+endpoint+"/000000000000/q"), "DynamoDB"},
	} {
		r := run(t, tc.env, "", 30*time.Second, "run")
		r.expect(t, 4, "leasehold: cannot reach "+tc.service+" at "+endpoint+": connection refused — is the local stack running?")
		if n := strings.Count(strings.TrimSpace(r.stderr), "\n"); n != 0 || strings.Contains(r.stderr, "WARN") {
			t.Errorf("run against a stopped stack printed %d lines, want one:\n%s", n+1, r.stderr)
		}
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	r := run(t, nil, "", 30*time.Second, "--version")
	want := "leasehold version "
	if r.code != 0 || !strings.HasPrefix(r.stdout, want) || !strings.Contains(r.stdout, " go1.") {
		t.Fatalf("--version: exit %d, stdout %q, stderr %q; want %q, the module version and the Go version", r.code, r.stdout, r.stderr, want)
	}
}

func TestMissingTableExit4(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	r := s.run(t, "", "--table", "no-such-table", "status", "x")
	r.expect(t, 4, "DynamoDB table no-such-table does not exist")
	// A queue that does not exist: the task is stored, its token is not sent.
	missing := s.queues.Work + "-gone"
	r = s.run(t, "", "--queue-url", missing, "enqueue", "--kind", "greet", "--id", "stranded", "{}")
	r.expect(t, 4, "task stranded is stored but its dispatch token was not sent: SQS queue "+missing+" does not exist")
	if r.stdout != "stranded\n" {
		t.Fatalf("stdout %q, want the stored task's id", r.stdout)
	}
}

// taskJSON is the JSON form of a task, as the command prints it.
type taskJSON struct {
	ID          string            `json:"id"`
	Kind        string            `json:"kind"`
	Queue       string            `json:"queue"`
	Metadata    map[string]string `json:"metadata"`
	Status      string            `json:"status"`
	Attempt     int               `json:"attempt"`
	MaxAttempts int               `json:"max_attempts"`
	Payload     json.RawMessage   `json:"payload"`
	Result      json.RawMessage   `json:"result"`
	Error       string            `json:"error"`
	RunAt       time.Time         `json:"run_at"`
	CreatedAt   time.Time         `json:"created_at"`
	History     []struct {
		Attempt int    `json:"attempt"`
		Status  string `json:"status"`
	} `json:"history"`
}

func TestEnqueueStatusList(t *testing.T) {
	t.Parallel()
	s := newStack(t)

	r := s.run(t, "", "enqueue", "--kind", "greet", "--id", "ada", "--max-attempts", "3", `{"name":"ada"}`)
	if r.code != 0 || r.stdout != "ada\n" {
		t.Fatalf("enqueue: exit %d, stdout %q, stderr %s", r.code, r.stdout, r.stderr)
	}
	// The same id, kind and payload again: nothing new, said on stderr,
	// still exit 0.
	r = s.run(t, "", "enqueue", "--kind", "greet", "--id", "ada", `{ "name": "ada" }`)
	r.expect(t, 0, "task ada already exists (PENDING); not enqueued again")
	// The same id with another payload or kind: a conflict, exit 6.
	r = s.run(t, "", "enqueue", "--kind", "greet", "--id", "ada", `{"name":"bob"}`)
	r.expect(t, 6, "id conflict: task ada exists (PENDING) with another payload; not enqueued")
	r = s.run(t, "", "enqueue", "--kind", "upper", "--id", "ada", `{"name":"ada"}`)
	r.expect(t, 6, "id conflict: task ada exists (PENDING) with another kind; not enqueued")
	// An id the CLI would print misleadingly is refused.
	s.run(t, "", "enqueue", "--kind", "greet", "--id", "a\u202eb", "{}").expect(t, 2, "id contains U+202E")
	s.run(t, "", "status", "a\nb").expect(t, 2, "id contains U+000A")

	payload := filepath.Join(t.TempDir(), "p.json")
	if err := os.WriteFile(payload, []byte(`{"name":"file"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = s.run(t, "", "enqueue", "--kind", "greet", "--payload-file", payload, "--json")
	fromFile := decode[taskJSON](t, r)
	r = s.run(t, `{"name":"stdin"}`, "enqueue", "--kind", "greet", "--json", "-")
	fromStdin := decode[taskJSON](t, r)
	if compact(t, fromFile.Payload) != `{"name":"file"}` || compact(t, fromStdin.Payload) != `{"name":"stdin"}` || fromFile.Status != "PENDING" {
		t.Fatalf("payloads from a file and stdin: %+v, %+v", fromFile, fromStdin)
	}
	before := time.Now()
	r = s.run(t, "", "enqueue", "--kind", "greet", "--delay", "20m", "--json", "{}")
	delayed := decode[taskJSON](t, r)
	if d := delayed.RunAt.Sub(before); d < 20*time.Minute-time.Second || d > 21*time.Minute {
		t.Fatalf("--delay 20m: run at %s, enqueued at %s", delayed.RunAt, before)
	}

	r = s.run(t, "", "status", "ada")
	for _, want := range []string{"id:", "ada", "status:", "PENDING", "attempts:", "0 of 3", `payload:   {"name":"ada"}`} {
		if r.code != 0 || !strings.Contains(r.stdout, want) {
			t.Fatalf("status: exit %d, stdout lacks %q:\n%s", r.code, want, r.stdout)
		}
	}
	st := decode[taskJSON](t, s.run(t, "", "status", "--json", "ada"))
	if st.ID != "ada" || st.Kind != "greet" || st.MaxAttempts != 3 || compact(t, st.Payload) != `{"name":"ada"}` {
		t.Fatalf("status --json: %+v", st)
	}

	s.run(t, "", "status", "nope").expect(t, 3, `no task with id "nope" in table `+s.table)
	s.run(t, "", "result", "nope").expect(t, 3, `no task with id "nope"`)
	s.run(t, "", "result", "ada").expect(t, 1, "task ada is PENDING: no result yet (use --wait to wait for it)")

	list := decode[[]taskJSON](t, s.run(t, "", "list", "--json"))
	var got []string
	for _, l := range list {
		got = append(got, l.ID)
	}
	slices.Sort(got)
	want := []string{"ada", delayed.ID, fromFile.ID, fromStdin.ID}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("list --json: %v, want %v", got, want)
	}
	if none := s.run(t, "", "list", "--json", "--status", "succeeded"); none.code != 0 || strings.TrimSpace(none.stdout) != "[]" {
		t.Fatalf("empty list --json: exit %d, %q", none.code, none.stdout)
	}
	table := s.run(t, "", "list", "--status", "pending")
	lines := strings.Split(strings.TrimSpace(table.stdout), "\n")
	if table.code != 0 || len(lines) != 5 || !regexp.MustCompile(`^ID\s+KIND\s+QUEUE\s+STATUS\s+ATTEMPTS\s+CREATED\s+ERROR$`).MatchString(lines[0]) {
		t.Fatalf("list table: exit %d\n%s", table.code, table.stdout)
	}

	// Filters: by kind, id prefix and time; a filtered page ends at --limit
	// matches with a cursor that goes on from there.
	if r := s.run(t, "", "enqueue", "--kind", "upper", "--id", "up-1", `{"text":"x"}`); r.code != 0 {
		t.Fatalf("enqueue: %d %s", r.code, r.stderr)
	}
	ids := func(r result) []string {
		t.Helper()
		var got []string
		for _, l := range decode[[]taskJSON](t, r) {
			got = append(got, l.ID)
		}
		return got
	}
	if got := ids(s.run(t, "", "list", "--json", "--kind", "upper")); !slices.Equal(got, []string{"up-1"}) {
		t.Fatalf("list --kind upper: %v", got)
	}
	if got := ids(s.run(t, "", "list", "--json", "--prefix", "ad")); !slices.Equal(got, []string{"ada"}) {
		t.Fatalf("list --prefix ad: %v", got)
	}
	if got := ids(s.run(t, "", "list", "--json", "--since", time.Now().Add(time.Hour).UTC().Format(time.RFC3339))); len(got) != 0 {
		t.Fatalf("list --since in an hour: %v", got)
	}
	if got := ids(s.run(t, "", "list", "--json", "--since", "1h", "--queue", "-")); len(got) != 5 {
		t.Fatalf("list --since 1h --queue -: %v, want all 5", got)
	}
	first := s.run(t, "", "list", "--json", "--kind", "greet", "--limit", "3")
	cursor, ok := strings.CutPrefix(strings.TrimSpace(first.stderr), "next-cursor: ")
	if !ok {
		t.Fatalf("list --kind greet --limit 3: no next-cursor on stderr: %q", first.stderr)
	}
	paged := append(ids(first), ids(s.run(t, "", "list", "--json", "--kind", "greet", "--limit", "3", "--cursor", cursor))...)
	slices.Sort(paged)
	if !slices.Equal(paged, want) {
		t.Fatalf("list --kind greet in pages of 3: %v, want %v", paged, want)
	}
}

func TestCancelAndRetry(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	if r := s.run(t, "", "enqueue", "--kind", "greet", "--id", "later", "--delay", "1h", "{}"); r.code != 0 {
		t.Fatalf("enqueue: %d %s", r.code, r.stderr)
	}
	r := s.run(t, "", "cancel", "later")
	if r.code != 0 || r.stdout != "task later cancelled\n" {
		t.Fatalf("cancel: exit %d, %q %s", r.code, r.stdout, r.stderr)
	}
	s.run(t, "", "cancel", "later").expect(t, 1, "task later already finished as CANCELLED")
	s.run(t, "", "result", "later").expect(t, 5, "task later ended CANCELLED")
	r = s.run(t, "", "retry", "--attempts", "2", "later")
	if r.code != 0 || !strings.Contains(r.stdout, "task later is PENDING again") {
		t.Fatalf("retry: exit %d, %q %s", r.code, r.stdout, r.stderr)
	}
	st := decode[taskJSON](t, s.run(t, "", "status", "--json", "later"))
	if st.Status != "PENDING" || st.MaxAttempts != 2 || len(st.History) != 1 || st.History[0].Status != "CANCELLED" {
		t.Fatalf("after retry: %+v", st)
	}
	s.run(t, "", "retry", "later").expect(t, 1, "not retryable")
	s.run(t, "", "cancel", "nope").expect(t, 3, `no task with id "nope"`)
	s.run(t, "", "retry", "nope").expect(t, 3, `no task with id "nope"`)
}

// Bulk cancel and retry select tasks by status, kind and age from the
// listing; a dry run changes nothing.
func TestBulkCancelAndRetry(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	for i := range 5 {
		if r := s.run(t, "", "enqueue", "--kind", "greet", "--id", fmt.Sprintf("g%d", i), "--delay", "1h", "{}"); r.code != 0 {
			t.Fatalf("enqueue: %d %s", r.code, r.stderr)
		}
	}
	if r := s.run(t, "", "enqueue", "--kind", "upper", "--id", "u", "--delay", "1h", "{}"); r.code != 0 {
		t.Fatalf("enqueue: %d %s", r.code, r.stderr)
	}
	r := s.run(t, "", "cancel", "--kind", "greet", "--since", "1h", "--dry-run")
	if r.code != 0 || len(strings.Fields(r.stdout)) != 5 || !strings.Contains(r.stderr, "dry run: 5 tasks would be cancelled") {
		t.Fatalf("dry run: exit %d, %q %s", r.code, r.stdout, r.stderr)
	}
	if st := decode[taskJSON](t, s.run(t, "", "status", "--json", "g0")); st.Status != "PENDING" {
		t.Fatalf("a dry run changed g0 to %s", st.Status)
	}
	r = s.run(t, "", "cancel", "--status", "pending", "--kind", "greet")
	if r.code != 0 || r.stdout != "5 tasks selected: cancelled 5\n" {
		t.Fatalf("bulk cancel: exit %d, %q %s", r.code, r.stdout, r.stderr)
	}
	if st := decode[taskJSON](t, s.run(t, "", "status", "--json", "u")); st.Status != "PENDING" {
		t.Fatalf("the task of another kind is %s", st.Status)
	}
	r = s.run(t, "", "retry", "--status", "cancelled", "--attempts", "2")
	if r.code != 0 || r.stdout != "5 tasks selected: retried 5\n" {
		t.Fatalf("bulk retry: exit %d, %q %s", r.code, r.stdout, r.stderr)
	}
	if st := decode[taskJSON](t, s.run(t, "", "status", "--json", "g4")); st.Status != "PENDING" || st.MaxAttempts != 2 {
		t.Fatalf("after the bulk retry g4 is %s with %d attempts", st.Status, st.MaxAttempts)
	}
	s.run(t, "", "cancel", "g0", "--kind", "greet").expect(t, 2, "not both")
	s.run(t, "", "cancel").expect(t, 2, "selection flags")
	s.run(t, "", "retry", "--status", "running").expect(t, 2, "want one of FAILED, CANCELLED")
	if r := s.run(t, "", "cancel", "--kind", "none", "--since", "1h"); r.code != 0 || r.stdout != "0 tasks selected: no task selected\n" {
		t.Fatalf("a selection of nothing: exit %d, %q %s", r.code, r.stdout, r.stderr)
	}
}

// pause and resume tag and untag the work queue (leasehold-paused).
func TestPauseAndResume(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	r := s.run(t, "", "pause")
	if r.code != 0 || !strings.Contains(r.stdout, "paused since") || !strings.Contains(r.stdout, s.queues.Work) {
		t.Fatalf("pause: exit %d, %q %s", r.code, r.stdout, r.stderr)
	}
	r = s.run(t, "", "resume")
	if r.code != 0 || !strings.Contains(r.stdout, "is not paused") {
		t.Fatalf("resume: exit %d, %q %s", r.code, r.stdout, r.stderr)
	}
	s.run(t, "", "pause", "no-such-queue").expect(t, 4, "no-such-queue")
}

func TestResultAndWatch(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.startWorker(t)

	ok := strings.TrimSpace(s.run(t, "", "enqueue", "--kind", "greet", `{"name":"ada"}`).stdout)
	bad := strings.TrimSpace(s.run(t, "", "enqueue", "--kind", "greet", "{}").stdout) // no name: fails for good
	slow := strings.TrimSpace(s.run(t, "", "enqueue", "--kind", "sleep", `{"seconds":0.5}`).stdout)

	r := s.run(t, strings.Join([]string{ok, bad}, "\n"), "watch", "--interval", "100ms", slow, "-")
	r.expect(t, 5, "1 of 3 tasks ended FAILED, 0 CANCELLED")
	if !strings.Contains(r.stdout, "SUCCEEDED 2  FAILED 1  CANCELLED 0") || !strings.Contains(r.stderr, "FAILED "+bad+": name is required") {
		t.Fatalf("watch output:\nstdout: %s\nstderr: %s", r.stdout, r.stderr)
	}

	r = s.run(t, "", "result", ok)
	if r.code != 0 || r.stdout != "\"hello, ada\"\n" {
		t.Fatalf("result: exit %d, %q, %s", r.code, r.stdout, r.stderr)
	}
	s.run(t, "", "result", bad).expect(t, 5, "task "+bad+" ended FAILED: name is required")
	if r := s.run(t, "", "watch", ok); r.code != 0 {
		t.Fatalf("watch of a succeeded task: exit %d, %s", r.code, r.stderr)
	}
	s.run(t, "", "watch", "--all").expect(t, 5, "1 of 3 tasks ended FAILED")

	next := strings.TrimSpace(s.run(t, "", "enqueue", "--kind", "upper", `{"text":"abc"}`).stdout)
	r = s.run(t, "", "result", "--wait", "--timeout", awstest.Scale(30*time.Second).String(), next)
	if r.code != 0 || r.stdout != "\"ABC\"\n" {
		t.Fatalf("result --wait: exit %d, %q, %s", r.code, r.stdout, r.stderr)
	}

	later := strings.TrimSpace(s.run(t, "", "enqueue", "--kind", "greet", "--delay", "1h", "{}").stdout)
	s.run(t, "", "watch", "--timeout", "1s", later).expect(t, 1, "timed out after 1s: 1 of 1 tasks have not finished")
	s.run(t, "", "result", "--wait", "--timeout", "1s", later).expect(t, 1, "did not finish within 1s")
	s.run(t, "", "watch", later, "nope").expect(t, 3, `no task with id "nope"`)
}

func TestEnqueueFileReportsBadLines(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	runAt := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Second)
	lines := []string{
		`{"kind":"greet","payload":{"name":"a"},"id":"good-1"}`,
		`{"kind":"greet",`,
		``,
		`{"payload":{}}`,
		`{"kind":"greet","id":"good-2","max_attempts":2,"delay_seconds":3600}`,
		`{"kind":"greet","colour":"red"}`,
		`{"kind":"greet","max_attempts":500}`,
		`{"v":1,"kind":"greet","id":"good-3","run_at":"` + runAt.Format(time.RFC3339) + `"}`,
		`{"kind":"greet","delay_seconds":5,"run_at":"` + runAt.Format(time.RFC3339) + `"}`,
	}
	file := filepath.Join(t.TempDir(), "tasks.jsonl")
	if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := s.run(t, "", "enqueue", "--file", file)
	r.expect(t, 2, "5 of 8 lines of "+file+" were rejected")
	for _, want := range []string{
		file + ":2: empty or truncated JSON",
		file + `:4: "kind" is required`,
		file + `:6: json: unknown field "colour"`,
		file + `:7: "max_attempts" 500 is outside 1..100`,
		file + `:9: "delay_seconds" and "run_at" are exclusive`,
		"enqueued 3 of 8 tasks",
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	if r.stdout != "good-1\ngood-2\ngood-3\n" {
		t.Fatalf("stdout %q, want the three good ids", r.stdout)
	}
	st := decode[taskJSON](t, s.run(t, "", "status", "--json", "good-3"))
	if st.MaxAttempts != 5 || !st.RunAt.Equal(runAt) {
		t.Fatalf("good-3: %+v", st)
	}
}

// --meta sets a task's metadata, alone and on every line of a file (a
// line's own entries win); status shows it; metadata outside the bounds is
// a usage error or a rejected line.
func TestEnqueueMetadata(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.run(t, "", "enqueue", "--kind", "greet", "--id", "m-1", "--meta", "tenant=acme", "--meta", "request=r-42", "{}").expect(t, 0, "")
	st := decode[taskJSON](t, s.run(t, "", "status", "--json", "m-1"))
	if !maps.Equal(st.Metadata, map[string]string{"tenant": "acme", "request": "r-42"}) {
		t.Fatalf("status --json: metadata %v", st.Metadata)
	}
	if r := s.run(t, "", "status", "m-1"); !strings.Contains(r.stdout, "metadata:  request=r-42, tenant=acme") {
		t.Fatalf("status does not show the metadata:\n%s", r.stdout)
	}
	lines := `{"kind":"greet","id":"m-2","metadata":{"tenant":"own"}}` + "\n" + `{"kind":"greet","id":"m-3"}` + "\n" +
		`{"kind":"greet","id":"m-4","metadata":{"bad key":"v"}}` + "\n"
	file := filepath.Join(t.TempDir(), "tasks.jsonl")
	if err := os.WriteFile(file, []byte(lines), 0o600); err != nil {
		t.Fatal(err)
	}
	s.run(t, "", "enqueue", "--file", file, "--meta", "tenant=acme,batch=b1").expect(t, 2, `:3: "metadata" key "bad key"`)
	for id, want := range map[string]map[string]string{
		"m-2": {"tenant": "own", "batch": "b1"},
		"m-3": {"tenant": "acme", "batch": "b1"},
	} {
		if st := decode[taskJSON](t, s.run(t, "", "status", "--json", id)); !maps.Equal(st.Metadata, want) {
			t.Errorf("%s: metadata %v, want %v", id, st.Metadata, want)
		}
	}
	s.run(t, "", "enqueue", "--kind", "greet", "--meta", "a b=c", "{}").expect(t, 2, "metadata key")
}

// The bulk acceptance case: 5,000 tasks from a JSON Lines file, then every
// one of them listed, page by page, none missing and none twice.
func TestBulkEnqueue5000ThenListAll(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	tokens := awstest.Drain(t, s.sqs, s.queues.Work, drainers)

	const n = 5000
	var b strings.Builder
	want := make(map[string]bool, n)
	for i := range n {
		id := fmt.Sprintf("bulk-%05d", i)
		want[id] = true
		fmt.Fprintf(&b, `{"kind":"greet","id":%q,"payload":{"name":"n%d"}}`+"\n", id, i)
	}
	file := filepath.Join(t.TempDir(), "tasks.jsonl")
	if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}

	// Three calls at once rather than the default ten: moto serializes
	// requests, and fewer senders let the drain keep the queue short.
	r := run(t, s.env, "", 10*time.Minute, "enqueue", "--concurrency", "3", "--file", file)
	if r.code != 0 || !strings.Contains(r.stderr, fmt.Sprintf("enqueued %d of %d tasks", n, n)) {
		t.Fatalf("bulk enqueue: exit %d after %s\n%s", r.code, r.took, r.stderr)
	}
	printed := strings.Fields(r.stdout)
	if len(printed) != n {
		t.Fatalf("enqueue printed %d ids, want %d", len(printed), n)
	}
	t.Logf("enqueue --file of %d tasks: %s", n, r.took)

	listStart := time.Now()
	seen := make(map[string]bool, n)
	pages := 0
	// A page of 1,000 reads its items 100 to a BatchGetItem call, each
	// bounded by --call-timeout (10 s by default): on a loaded machine,
	// with moto answering one request at a time while the worker drains
	// the queue, one such call has taken longer. The bound scales with
	// LEASEHOLD_TEST_TIMESCALE, as the test's other waits do.
	args := []string{"list", "--json", "--limit", "1000", "--call-timeout", awstest.Scale(30 * time.Second).String()}
	for cursor := ""; ; pages++ {
		a := args
		if cursor != "" {
			a = append(slices.Clone(args), "--cursor", cursor)
		}
		page := run(t, s.env, "", 5*time.Minute, a...)
		if page.code != 0 {
			t.Fatalf("list page %d: exit %d, %s", pages, page.code, page.stderr)
		}
		for _, task := range decode[[]taskJSON](t, page) {
			if seen[task.ID] {
				t.Fatalf("task %s listed twice", task.ID)
			}
			if !want[task.ID] {
				t.Fatalf("listed %q, which was not enqueued", task.ID)
			}
			seen[task.ID] = true
		}
		m := regexp.MustCompile(`(?m)^next-cursor: (\S+)$`).FindStringSubmatch(page.stderr)
		if m == nil {
			break
		}
		cursor = m[1]
	}
	if len(seen) != n {
		t.Fatalf("listed %d of %d tasks", len(seen), n)
	}
	t.Logf("list --json --limit 1000 of %d tasks: %d pages in %s", n, pages+1, time.Since(listStart))

	deadline := time.After(awstest.Scale(time.Minute))
	for tokens.Load() < n {
		select {
		case <-deadline:
			t.Fatalf("%d dispatch tokens reached the work queue, want %d", tokens.Load(), n)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// enqueue --queue sends a task to a named queue, which a worker serving only
// that queue runs; status shows the queue. A missing queue stores nothing.
func TestEnqueueToANamedQueue(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	other := awstest.NewQueues(t, s.cfg)
	name := other.Work[strings.LastIndex(other.Work, "/")+1:]

	hs := leasehold.NewHandlers()
	examples.Register(hs)
	w, err := leasehold.NewWorker(leasehold.WorkerConfig{
		AWS: s.cfg, Table: s.table, QueueURL: s.queues.Work, QueueURLs: []string{other.Work}, Handlers: hs,
		Logger: slog.New(slog.DiscardHandler), LongPoll: time.Second,
	})
	if err != nil {
		t.Fatalf("NewWorker: %v", err)
	}
	ctx, stop := context.WithCancel(context.WithoutCancel(t.Context()))
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("worker Run: %v", err)
		}
	})

	r := s.run(t, "", "enqueue", "--kind", "greet", "--id", "routed", "--queue", name, `{"name":"queue"}`)
	r.expect(t, 0, "")
	if r := s.run(t, "", "result", "--wait", "--timeout", awstest.Scale(time.Minute).String(), "routed"); r.code != 0 || !strings.Contains(r.stdout, "queue") {
		t.Fatalf("result: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	st := decode[taskJSON](t, s.run(t, "", "status", "--json", "routed"))
	if st.Queue != name || st.Status != "SUCCEEDED" {
		t.Fatalf("status --json: queue %q, status %s; want %s, SUCCEEDED", st.Queue, st.Status, name)
	}
	if r := s.run(t, "", "status", "routed"); !strings.Contains(r.stdout, "queue:") || !strings.Contains(r.stdout, name) {
		t.Fatalf("status does not show the queue:\n%s", r.stdout)
	}
	listed := s.run(t, "", "list", "--status", "succeeded")
	if row := regexp.MustCompile(`(?m)^routed\s+greet\s+(\S+)\s+SUCCEEDED`).FindStringSubmatch(listed.stdout); row == nil || row[1] != name {
		t.Fatalf("list does not show the queue %s:\n%s", name, listed.stdout)
	}

	s.run(t, "", "enqueue", "--kind", "greet", "--id", "nowhere", "--queue", name+"-gone", "{}").expect(t, 4, "SQS queue "+name+"-gone does not exist (region ")
	s.run(t, "", "status", "nowhere").expect(t, 3, `no task with id "nowhere"`)
	s.run(t, "", "enqueue", "--kind", "greet", "--queue", "jobs.fifo", "{}").expect(t, 2, "FIFO")
}

// TestWorkflowCommands runs the workflow commands as a user would: a chain
// with --after, a fan-out shown as a tree and listed by parent, and a
// callback answered by an operator with complete --task.
func TestWorkflowCommands(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.startWorker(t)

	if r := s.run(t, "", "enqueue", "--kind", "upper", "--id", "two", "--after", "one", `{"text":"b"}`); r.code != 0 {
		t.Fatalf("enqueue --after: %d %s", r.code, r.stderr)
	}
	s.run(t, "", "enqueue", "--kind", "upper", "--after-any", "--id", "x", "{}").expect(t, 2, "--after-any needs --after")
	s.run(t, "", "enqueue", "--kind", "upper", "--id", "one", `{"text":"a"}`)
	if r := s.run(t, "", "result", "--wait", "--timeout", awstest.Scale(time.Minute).String(), "two"); r.code != 0 || r.stdout != "\"B\"\n" {
		t.Fatalf("result of two: exit %d %q %s", r.code, r.stdout, r.stderr)
	}
	if r := s.run(t, "", "status", "two"); !strings.Contains(r.stdout, "after:\n  └─ one  SUCCEEDED") {
		t.Fatalf("status two shows no dependency tree:\n%s", r.stdout)
	}

	s.run(t, "", "enqueue", "--kind", "shout", "--id", "fan", `{"texts":["a","b","c"]}`)
	if r := s.run(t, "", "result", "--wait", "--timeout", awstest.Scale(time.Minute).String(), "fan"); r.code != 0 || r.stdout != "[\"A\",\"B\",\"C\"]\n" {
		t.Fatalf("result of fan: exit %d %q %s", r.code, r.stdout, r.stderr)
	}
	r := s.run(t, "", "status", "fan")
	if !strings.Contains(r.stdout, "children:\n  ├─ fan/texts/0  SUCCEEDED\n  ├─ fan/texts/1  SUCCEEDED\n  └─ fan/texts/2  SUCCEEDED") {
		t.Fatalf("status fan shows no children tree:\n%s", r.stdout)
	}
	if r := s.run(t, "", "list", "--parent", "fan"); strings.Count(r.stdout, "SUCCEEDED") != 3 || !strings.Contains(r.stdout, "fan/texts/2") {
		t.Fatalf("list --parent fan:\n%s %s", r.stdout, r.stderr)
	}

	s.run(t, "", "enqueue", "--kind", "approval", "--id", "ok?", `{"timeout_seconds":600}`)
	s.run(t, "", "complete", "--task", "ok?", "{").expect(t, 2, "RESULT is not a JSON document")
	s.run(t, "", "complete", "--wait", "1s").expect(t, 2, "a callback TOKEN, or --task ID")
	if r := s.run(t, "", "complete", "--task", "ok?", "--wait", awstest.Scale(time.Minute).String(), `{"approved":true}`); r.code != 0 || r.stdout != "task ok? PENDING: answer recorded; its handler runs again to read it\n" {
		t.Fatalf("complete --task: exit %d %q %s", r.code, r.stdout, r.stderr)
	}
	if r := s.run(t, "", "result", "--wait", "--timeout", awstest.Scale(time.Minute).String(), "ok?"); r.code != 0 || r.stdout != "{\"approved\":true}\n" {
		t.Fatalf("result of ok? after its answer: exit %d %q %s", r.code, r.stdout, r.stderr)
	}
	s.run(t, "", "complete", "--task", "ok?", `{}`).expect(t, 1, "not waiting for a callback")
	s.run(t, "", "fail", "--task", "ok?", "no").expect(t, 1, "not waiting for a callback")
	s.run(t, "", "fail", "lhcb1.garbage", "no").expect(t, 1, "callback token")
	s.run(t, "", "fail", "--task", "nowhere", "no").expect(t, 3, `no task with id "nowhere"`)
	s.run(t, "", "complete", "--task", "fan").expect(t, 1, "not waiting for a callback")
}

// A task sent as a plain SQS message has no item until a worker takes the
// message: `result --wait` waits for it to appear (up to --timeout), so the
// README's send-message then result --wait does not race the worker.
func TestResultWaitsForATaskNotYetCreated(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	s.run(t, "", "result", "--wait", "--timeout", "2s", "never").
		expect(t, 3, `no task with id "never" in table `+s.table+` (waited 2s for it to appear)`)

	ctx, cancel := context.WithTimeout(t.Context(), awstest.Scale(30*time.Second))
	defer cancel()
	body := `{"v":1,"kind":"upper","id":"sent-plain","payload":{"text":"plain"}}`
	if _, err := s.sqs.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: &s.queues.Work, MessageBody: &body}); err != nil {
		t.Fatalf("SendMessage: %v", err)
	}
	got := make(chan result, 1)
	go func() {
		got <- run(t, s.env, "", 2*time.Minute, "result", "--wait", "--timeout", awstest.Scale(90*time.Second).String(), "sent-plain")
	}()
	// The worker starts only now: until it takes the message there is no
	// item, whenever the command above made its first read.
	s.startWorker(t)
	r := <-got
	if r.code != 0 || r.stdout != "\"PLAIN\"\n" {
		t.Fatalf("result --wait of a task sent as a message: exit %d, %q, %s", r.code, r.stdout, r.stderr)
	}
}

// Missing credentials give one line that says what to set, not the SDK's
// provider chain; a table missing from the region in use names the region
// and the endpoint.
func TestConfigurationErrorsNameWhatToSet(t *testing.T) {
	t.Parallel()
	r := run(t, []string{"AWS_REGION=us-east-1", "AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:1", "AWS_ENDPOINT_URL_SQS=http://127.0.0.1:1"},
		"", time.Minute, "status", "x")
	r.expect(t, 1, `no AWS credentials: set AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY`)
	if strings.Contains(r.stderr, "IMDS") || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
		t.Fatalf("missing credentials: want one line without the SDK's chain, got %q", r.stderr)
	}

	s := newStack(t)
	env := append(slices.Clone(s.env), "AWS_REGION=eu-north-1")
	run(t, env, "", time.Minute, "status", "x").expect(t, 4,
		"DynamoDB table "+s.table+" does not exist (region eu-north-1, endpoint "+os.Getenv("AWS_ENDPOINT_URL_DYNAMODB")+")")
}

// A rare kind among many: `leasehold list --kind rare` reads the listing
// of that kind, so a page of one finds the rare task, the oldest, at once
// and ends the listing; the same list by status alone, page by page of
// one, would need a call per newer task (before the listing by kind, the
// filter stopped after 50 calls with nothing and a cursor). --queue reads
// the listing of its queue the same way.
func TestListByKindFindsARareKind(t *testing.T) {
	t.Parallel()
	s := newStack(t)
	awstest.Drain(t, s.sqs, s.queues.Work, drainers)
	c, err := leasehold.NewClient(leasehold.ClientConfig{AWS: s.cfg, Table: s.table, QueueURL: s.queues.Work})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := c.Enqueue(ctx, leasehold.Submission{Kind: "rare", ID: "rare-1"}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Millisecond) // the rare task is the oldest
	const common = 120
	subs := make([]leasehold.Submission, 0, common)
	for i := range common {
		subs = append(subs, leasehold.Submission{Kind: "common", ID: fmt.Sprintf("common-%03d", i)})
	}
	res, err := c.EnqueueMany(ctx, subs)
	if err != nil {
		t.Fatalf("EnqueueMany: %v", err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("enqueue %s: %v", r.Task.ID, r.Err)
		}
	}

	for _, args := range [][]string{
		{"list", "--kind", "rare", "--limit", "1", "--page-time", "0", "--json"},
		{"list", "--status", "pending", "--kind", "rare", "--limit", "1", "--page-time", "0", "--json"},
	} {
		r := s.run(t, "", args...)
		if r.code != 0 {
			t.Fatalf("%v: exit %d, stderr %s", args, r.code, r.stderr)
		}
		tasks := decode[[]leasehold.TaskInfo](t, r)
		if len(tasks) != 1 || tasks[0].ID != "rare-1" || strings.Contains(r.stderr, "partial page") {
			t.Fatalf("%v: %d tasks %+v, stderr %q; want rare-1 on the first page", args, len(tasks), tasks, r.stderr)
		}
	}
	r := s.run(t, "", "list", "--kind", "nosuchkind", "--limit", "1", "--page-time", "0", "--json")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "[]" || strings.Contains(r.stderr, "next-cursor") {
		t.Fatalf("list --kind nosuchkind: exit %d, stdout %q, stderr %q; want [] and the listing ended", r.code, r.stdout, r.stderr)
	}
	// A bulk selection by kind reads the same listing; the default work
	// queue named by its name is the default queue (it has no listing by
	// queue, so it is filtered), for list and bulk actions alike.
	work := s.queues.Work[strings.LastIndex(s.queues.Work, "/")+1:]
	r = s.run(t, "", "cancel", "--kind", "rare", "--queue", work, "--dry-run")
	if r.code != 0 || strings.TrimSpace(r.stdout) != "rare-1" {
		t.Fatalf("cancel --kind rare --queue %s --dry-run: exit %d, stdout %q, stderr %q; want rare-1", work, r.code, r.stdout, r.stderr)
	}
	r = s.run(t, "", "list", "--kind", "rare", "--queue", work, "--json")
	if tasks := decode[[]leasehold.TaskInfo](t, r); r.code != 0 || len(tasks) != 1 || tasks[0].ID != "rare-1" {
		t.Fatalf("list --kind rare --queue %s: exit %d, %d tasks, stderr %q; want rare-1", work, r.code, len(tasks), r.stderr)
	}
}
