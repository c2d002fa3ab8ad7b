package scaffold_test

// The README of a generated project is tested as internal/doctest tests
// leasehold's own docs: its ```sh blocks run in order, in one bash with
// `set -euo pipefail`, in the project's directory, against the local stack;
// a block that cannot run here follows a `<!-- doctest: skip REASON -->`
// line, and a skip without a reason fails.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/leasehold/leasehold/internal/awstest"
	"github.com/leasehold/leasehold/internal/lease/dynamo"
)

type readmeBlock struct {
	line int
	code string
	skip string
}

var (
	shFence    = regexp.MustCompile("^```(sh|bash)\\s*$")
	closeFence = regexp.MustCompile("^```\\s*$")
	skipLine   = regexp.MustCompile(`^<!--\s*doctest:\s*skip\b\s*(.*?)\s*-->\s*$`)
)

// readmeBlocks returns the shell blocks of a README, in order.
func readmeBlocks(t *testing.T, text string) []readmeBlock {
	t.Helper()
	var (
		out   []readmeBlock
		cur   *readmeBlock
		body  strings.Builder
		prev  string
		other bool
		n     int
	)
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		n++
		line := sc.Text()
		switch {
		case cur != nil:
			if closeFence.MatchString(line) {
				cur.code = body.String()
				out = append(out, *cur)
				cur = nil
				body.Reset()
				continue
			}
			body.WriteString(line + "\n")
		case other:
			if closeFence.MatchString(line) {
				other, prev = false, ""
			}
		case shFence.MatchString(line):
			cur = &readmeBlock{line: n}
			if m := skipLine.FindStringSubmatch(prev); m != nil {
				if cur.skip = m[1]; cur.skip == "" {
					t.Errorf("README.md:%d: <!-- doctest: skip --> needs a reason", n)
				}
			}
			prev = ""
		case strings.HasPrefix(line, "```"):
			other, prev = true, ""
		case strings.TrimSpace(line) != "":
			prev = line
		}
	}
	if cur != nil {
		t.Fatalf("README.md:%d: unterminated code block", cur.line)
	}
	return out
}

// namedState describes what the README's tasks left in the stack's named
// table and queues, for a failure to say where a task stopped: each resize
// task's record, and the depth of each queue (visible, hidden).
func namedState(t *testing.T) string {
	cfg := awstest.Config(t)
	ctx, cancel := context.WithTimeout(context.Background(), awstest.Scale(30*time.Second))
	defer cancel()
	var b strings.Builder
	out, err := dynamodb.NewFromConfig(cfg).Scan(ctx, &dynamodb.ScanInput{TableName: aws.String("leasehold-tasks"),
		FilterExpression: aws.String("#kind = :kind"), ExpressionAttributeNames: map[string]string{"#kind": "kind"},
		ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":kind": &ddbtypes.AttributeValueMemberS{Value: "resize"}}})
	if err != nil {
		fmt.Fprintf(&b, "scan leasehold-tasks: %v\n", err)
	} else {
		for _, item := range out.Items {
			task, err := dynamo.TaskFromItem(item)
			if err != nil {
				fmt.Fprintf(&b, "a resize task: %v\n", err)
				continue
			}
			fmt.Fprintf(&b, "task %s: %s attempt %d/%d run_at %s unknown_kind_since %s error %q history %d\n", task.ID, task.Status,
				task.Attempt, task.MaxAttempts, task.RunAt.Format(time.RFC3339Nano), task.UnknownKindSince.Format(time.RFC3339), task.Error, len(task.History))
		}
		fmt.Fprintf(&b, "%d resize tasks in leasehold-tasks\n", len(out.Items))
	}
	q := sqs.NewFromConfig(cfg)
	for _, name := range []string{"leasehold-work", "leasehold-work-dlq", "leasehold-intake", "leasehold-intake-dlq"} {
		u, err := q.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(name)})
		if err != nil {
			fmt.Fprintf(&b, "queue %s: %v\n", name, err)
			continue
		}
		a, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: u.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{
			sqstypes.QueueAttributeNameApproximateNumberOfMessages, sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible}})
		if err != nil {
			fmt.Fprintf(&b, "queue %s: %v\n", name, err)
			continue
		}
		fmt.Fprintf(&b, "queue %s: %s visible, %s hidden\n", name, a.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)],
			a.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible)])
	}
	return b.String()
}

func TestInitProjectReadmeSnippets(t *testing.T) {
	t.Parallel()
	dir := initProject(t)
	awstest.Config(t) // skips (or fails under LEASEHOLD_REQUIRE_STACK=1) without a stack
	// The project's make demo and make test run its worker on the stack's
	// named queues, as the doc test's README worker does.
	awstest.LockNamedResources(t)
	raw, err := os.ReadFile(filepath.Join(dir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := readmeBlocks(t, string(raw))
	var script strings.Builder
	script.WriteString("set -euo pipefail\n")
	ran := 0
	for i, b := range blocks {
		if b.skip != "" {
			t.Logf("README.md:%d: skipped: %s", b.line, b.skip)
			continue
		}
		fmt.Fprintf(&script, "echo '>>> README block %d (README.md:%d)' >&2\n", i, b.line)
		script.WriteString(b.code)
		ran++
	}
	// make demo and make test; the eval before them.
	if ran < 3 {
		t.Fatalf("%d README blocks ran, want at least 3 (the stack's environment, make demo, make test)", ran)
	}
	ctx, cancel := context.WithTimeout(t.Context(), awstest.Scale(10*time.Minute))
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script.String())
	cmd.Dir = dir
	cmd.Env = awstest.FreshShellEnv(t) // a fresh shell: the README's first block points it at the stack
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	if err := cmd.Run(); err != nil {
		// make demo's worker (and intake dispatcher) logs to .bin/worker.log:
		// its last lines say why a task did not end.
		var wlog string
		if b, rerr := os.ReadFile(filepath.Join(dir, ".bin", "worker.log")); rerr == nil {
			wlog = string(b[max(0, len(b)-8<<10):])
		}
		t.Fatalf("the README's snippets failed after %s: %v\n--- stderr (the last marker names the block):\n%s\n--- stdout:\n%s\n--- .bin/worker.log (its end):\n%s\n--- the named resources:\n%s",
			time.Since(start).Round(time.Second), err, stderr.String(), stdout.String(), wlog, namedState(t))
	}
	t.Logf("%d README blocks ran in %s; the named resources after them:\n%s", ran, time.Since(start).Round(time.Second), namedState(t))
	// make demo prints both results: the enqueued task's and the intake
	// submission's.
	for _, want := range []string{`"url":"s3://pics/cat.png?w=64"`, "to the intake queue", `"url":"s3://pics/dog.png?w=32"`} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("the README's snippets did not print %s:\n%s", want, stdout.String())
		}
	}
}
