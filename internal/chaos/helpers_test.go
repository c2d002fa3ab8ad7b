package chaos_test

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/leasehold/leasehold/internal/awstest"
	"github.com/leasehold/leasehold/internal/chaos"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/dynamo"
	"github.com/leasehold/leasehold/internal/lease/limiter"
	"github.com/leasehold/leasehold/internal/lease/mapstate"
	"github.com/leasehold/leasehold/internal/lease/query"
)

// buildWorker compiles chaosworker into the run's directory.
func buildWorker(t *testing.T, p params) string {
	t.Helper()
	bin := filepath.Join(p.dir, "chaosworker")
	args := []string{"build", "-o", bin}
	if p.workerRace {
		args = append(args, "-race")
	}
	args = append(args, "./chaosworker")
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, goTool(), args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("chaos: go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return bin
}

// goTool is the go command of the toolchain running the test.
func goTool() string {
	if root := os.Getenv("GOROOT"); root != "" {
		if p := filepath.Join(root, "bin", "go"); fileExists(p) {
			return p
		}
	}
	return "go"
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// workerEnv is the environment of every worker: the test's own, with the AWS
// endpoints replaced by the proxies and the worker settings of the run.
func workerEnv(p params, endpoint map[string]string, table string, q awstest.Queues) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "AWS_ENDPOINT_URL") || strings.HasPrefix(k, "LEASEHOLD_") || strings.HasPrefix(k, "CHAOS_") {
			continue
		}
		env = append(env, kv)
	}
	up := func(name string) string { return endpoint[strings.TrimRight(os.Getenv(name), "/")] }
	env = append(env,
		"AWS_ENDPOINT_URL_DYNAMODB="+up("AWS_ENDPOINT_URL_DYNAMODB"),
		"AWS_ENDPOINT_URL_SQS="+up("AWS_ENDPOINT_URL_SQS"),
		"AWS_EC2_METADATA_DISABLED=true",
		"LEASEHOLD_TABLE="+table,
		"LEASEHOLD_WORK_QUEUE_URL="+q.Work,
		"LEASEHOLD_WORK_DLQ_URL="+q.WorkDLQ,
		"LEASEHOLD_LEASE_DURATION="+leaseDuration.String(),
		"LEASEHOLD_RENEW_BEFORE="+renewBefore.String(),
		"LEASEHOLD_CLOCK_SKEW="+clockSkew.String(),
		"LEASEHOLD_CONCURRENCY=8",
		"LEASEHOLD_POLLERS=2",
		"LEASEHOLD_INVOCATION_TIMEOUT="+p.invocationTimeout.String(),
		"LEASEHOLD_DEADLINE_MARGIN=3s",
		"GORACE=halt_on_error=0",
		fmt.Sprintf("CHAOS_EXIT_AFTER_FINISH=%g", p.exitAfterFinish),
		"CHAOS_DOOMED="+doomedFile(p),
	)
	if os.Getenv("AWS_REGION") == "" {
		env = append(env, "AWS_REGION=us-east-1")
	}
	if os.Getenv("AWS_ACCESS_KEY_ID") == "" {
		env = append(env, "AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test")
	}
	return env
}

// doomedFile is the file that lists, one id a line, the children whose
// holder the test froze: the worker that takes one over exits right after
// its finish write (chaosworker's CHAOS_DOOMED).
func doomedFile(p params) string { return filepath.Join(p.dir, "doomed.txt") }

// plan is what the test sends.
type plan struct {
	valid      []string // ids of the valid tasks
	singles    []string // those of them sent as single inline tasks (listed)
	malformed  []string // bodies that docs/tokens.md sends to the DLQ
	duplicates int
	messages   []string // every body, in sending order
	workflows  workflowPlan
}

// malformedKinds are the bad messages of docs/tokens.md, each made unique
// by %d so that its copy on the DLQ can be matched.
var malformedKinds = []string{
	`{"v":1,"kind":"chaos","id":"bad-json-%d","payload":{"n":`, // not JSON
	`["not-an-object-%d"]`, // not an object
	`{"v":1,"kind":"chaos","id":"trailing-%d"} {"trailing":true}`, // trailing data
	`{"kind":"chaos","id":"no-version-%d"}`,                       // missing v
	`{"v":2,"kind":"chaos","id":"wrong-version-%d"}`,              // v other than 1
	`{"v":1,"payload":{"neither":"kind nor id %d"}}`,              // neither kind nor id
	`{"v":1,"kind":"chaos","id":"unknown-field-%d","paylod":{}}`,  // unknown field
	`{"v":1,"id":"no-such-task-%d"}`,                              // reference to a missing task
	`not json at all %d`,
}

func makePlan(p params) plan {
	rng := rand.New(rand.NewPCG(p.seed, p.seed^42))
	var pl plan
	var first, dups []string
	for i := range p.tasks {
		id := fmt.Sprintf("c%05d", i)
		work := 10 + rng.IntN(290) // tens to hundreds of ms
		if rng.IntN(10) == 0 {
			// longer than a renewal period: renewed at least once
			work = 2200 + rng.IntN(1800)
		}
		body := fmt.Sprintf(`{"v":1,"kind":"chaos","id":%q,"payload":{"n":%d,"work_ms":%d},"max_attempts":100}`, id, i, work)
		pl.valid = append(pl.valid, id)
		pl.singles = append(pl.singles, id)
		first = append(first, body)
		if i%p.dupEvery == p.dupEvery/2 {
			dups = append(dups, body)
		}
	}
	if p.workflows {
		pl.workflows = makeWorkflows(p, rng)
		pl.valid = append(pl.valid, pl.workflows.valid...)
		first = append(first, pl.workflows.bodies...)
	}
	copies := max(1, p.tasks/200)
	for c := range copies {
		for _, k := range malformedKinds {
			body := fmt.Sprintf(k, c)
			pl.malformed = append(pl.malformed, body)
			first = append(first, body)
		}
	}
	rng.Shuffle(len(first), func(i, j int) { first[i], first[j] = first[j], first[i] })
	pl.duplicates = len(dups)
	pl.messages = append(first, dups...) // duplicates come after their originals
	return pl
}

// sendAll sends bodies with SendMessageBatch, ten at a time, retrying the
// entries SQS reports as failed a bounded number of times.
func sendAll(t *testing.T, client *sqs.Client, queueURL string, bodies []string) {
	t.Helper()
	if err := sendBodies(t.Context(), t.Logf, client, queueURL, bodies); err != nil {
		t.Fatal(err)
	}
}

// sendBodies is sendAll for any goroutine: it returns the error.
func sendBodies(ctx context.Context, logf func(string, ...any), client *sqs.Client, queueURL string, bodies []string) error {
	for start := 0; start < len(bodies); start += 10 {
		pending := map[string]string{}
		for i, b := range bodies[start:min(start+10, len(bodies))] {
			pending[fmt.Sprintf("e%d", i)] = b
		}
		for try := 0; len(pending) > 0; try++ {
			if try == 5 {
				return fmt.Errorf("chaos: %d messages not sent after %d tries", len(pending), try)
			}
			entries := make([]sqstypes.SendMessageBatchRequestEntry, 0, len(pending))
			for id, b := range pending {
				entries = append(entries, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(id), MessageBody: aws.String(b)})
			}
			cctx, cancel := context.WithTimeout(ctx, callTimeout)
			out, err := client.SendMessageBatch(cctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(queueURL), Entries: entries})
			cancel()
			if err != nil {
				logf("chaos: send batch (try %d): %v", try+1, err)
				time.Sleep(time.Second)
				continue
			}
			for _, ok := range out.Successful {
				delete(pending, aws.ToString(ok.Id))
			}
		}
	}
	return nil
}

// scan reads every item of table (consistent reads), page by page.
func scan(t *testing.T, client *dynamodb.Client, table string, projection string) []map[string]ddbtypes.AttributeValue {
	t.Helper()
	var items []map[string]ddbtypes.AttributeValue
	in := &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)}
	if projection != "" {
		in.ProjectionExpression = aws.String(projection)
		in.ExpressionAttributeNames = map[string]string{"#s": "status"}
	}
	for page := 0; ; page++ {
		if page == 10000 {
			t.Fatal("chaos: scan does not end")
		}
		ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
		out, err := client.Scan(ctx, in)
		cancel()
		if err != nil {
			t.Fatalf("chaos: scan %s: %v", table, err)
		}
		items = append(items, out.Items...)
		if len(out.LastEvaluatedKey) == 0 {
			return items
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// waitTerminal polls the table until every valid task is terminal, no valid
// task's status has changed for p.stall, or p.bound has passed. A child of a parent in
// cancelled (child -> parent) that has no record while its parent is
// CANCELLED counts as ended: a cancel may leave such a child uncreated.
func waitTerminal(t *testing.T, client *dynamodb.Client, table string, valid []string, cancelled map[string]string, p params) {
	t.Helper()
	start := time.Now()
	lastChange, lastLog := start, start
	var prev uint64
	for {
		status := map[string]lease.Status{}
		for _, it := range scan(t, client, table, "id, #s") {
			id, _ := it["id"].(*ddbtypes.AttributeValueMemberS)
			st, _ := it["status"].(*ddbtypes.AttributeValueMemberS)
			if id != nil && st != nil {
				status[id.Value] = lease.Status(st.Value)
			}
		}
		terminal := 0
		seen := fnv.New64a() // what every valid task's status is now
		for _, id := range valid {
			st, ok := status[id]
			parent, isChild := cancelled[id]
			if st.Terminal() || (!ok && isChild && status[parent] == lease.StatusCancelled) {
				terminal++
			}
			_, _ = seen.Write([]byte(st + "\x00"))
		}
		now := time.Now()
		// Progress is any valid task changing status, not only one ending:
		// a task that waits, wakes or is held again is moving.
		if sum := seen.Sum64(); sum != prev {
			prev, lastChange = sum, now
		}
		switch {
		case terminal == len(valid):
			t.Logf("chaos: all %d tasks terminal after %s", terminal, now.Sub(start).Round(time.Second))
			return
		case now.Sub(lastChange) > p.stall:
			t.Logf("chaos: %d of %d tasks terminal; no progress for %s: ending the run", terminal, len(valid), p.stall)
			return
		case now.Sub(start) > p.bound:
			t.Logf("chaos: %d of %d tasks terminal at the bound %s: ending the run", terminal, len(valid), p.bound)
			return
		}
		if now.Sub(lastLog) >= 15*time.Second {
			lastLog = now
			t.Logf("chaos: %d of %d tasks terminal after %s", terminal, len(valid), now.Sub(start).Round(time.Second))
		}
		select {
		case <-t.Context().Done():
			return
		case <-time.After(2 * time.Second):
		}
	}
}

// scanRecords reads every task record.
func scanRecords(t *testing.T, client *dynamodb.Client, table string) map[string]lease.Task {
	t.Helper()
	out := map[string]lease.Task{}
	for _, it := range scan(t, client, table, "") {
		if id, _ := it["id"].(*ddbtypes.AttributeValueMemberS); id != nil && (query.IsListingID(id.Value) || limiter.IsRateWindowID(id.Value) || limiter.IsSlotsID(id.Value) || mapstate.IsID(id.Value) || lease.CheckID(id.Value) != nil) {
			// A batch listing entry, a rate window, a slot set, or an item
			// whose id no task may have (a control character: a spilled
			// history's operation, a sliding map's group or page), not a
			// task.
			continue
		}
		task, err := dynamo.TaskFromItem(it)
		if err != nil {
			t.Fatalf("chaos: decode task record: %v", err)
		}
		out[task.ID] = task
	}
	return out
}

// drainDLQBound bounds drainDLQ.
const drainDLQBound = 2 * time.Minute

// drainDLQ receives everything on the dead-letter queue (hiding it, not
// deleting it), until three receives in a row come back empty after at
// least want messages, or a bound passes.
func drainDLQ(t *testing.T, client *sqs.Client, url string, want int) []chaos.DeadLetter {
	t.Helper()
	var out []chaos.DeadLetter
	deadline := time.Now().Add(drainDLQBound)
	// A sweep cut short (its worker killed or stopped) leaves the dead
	// letters it held hidden for their hold (30 s): wait until none is.
	for hidden := -1; hidden != 0 && time.Now().Before(deadline.Add(-90*time.Second)); {
		ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
		a, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
			QueueUrl: aws.String(url), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible},
		})
		cancel()
		if err != nil {
			t.Logf("chaos: DLQ attributes: %v", err)
		} else if n, err := strconv.Atoi(a.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible)]); err == nil {
			hidden = n
		}
		if hidden != 0 {
			time.Sleep(time.Second)
		}
	}
	for empty := 0; empty < 3 || (len(out) < want && time.Now().Before(deadline.Add(-90*time.Second))); {
		if time.Now().After(deadline) {
			t.Logf("chaos: DLQ drain stopped at its bound with %d messages", len(out))
			break
		}
		// Hidden for longer than the drain's bound, so each is counted
		// once; awstest.Receive waits out a lost answer's hidden messages.
		msgs := awstest.Receive(t, client, &sqs.ReceiveMessageInput{
			QueueUrl:              aws.String(url),
			MaxNumberOfMessages:   10,
			WaitTimeSeconds:       1,
			VisibilityTimeout:     int32(drainDLQBound/time.Second) + 30,
			MessageAttributeNames: []string{"All"},
		})
		if len(msgs) == 0 {
			empty++
			continue
		}
		empty = 0
		for _, m := range msgs {
			d := chaos.DeadLetter{Body: aws.ToString(m.Body)}
			if a, ok := m.MessageAttributes["leasehold-reason"]; ok {
				d.Reason = aws.ToString(a.StringValue)
			}
			out = append(out, d)
		}
	}
	return out
}

// listings counts, per task id, how often leasehold's List shows it across
// every status: the listing check (each single task listed once, none
// twice) runs on the table as the workers left it, batch listing entries
// and all. Pages of 100, each call allowed 30 s: moto answers a batch read
// of a large table slowly. An error is returned, to be reported with the
// rest of the run's findings.
func listings(ctx context.Context, client *dynamodb.Client, table string) (map[string]int, error) {
	store := dynamo.New(client, table, lease.Options{CallTimeout: 30 * time.Second})
	seen := map[string]int{}
	for _, status := range lease.Statuses {
		cursor := ""
		for page := 0; ; page++ {
			if page == 100000 {
				return seen, fmt.Errorf("List(%s) does not end", status)
			}
			tasks, next, err := store.List(ctx, status, 100, cursor)
			if err != nil {
				return seen, err
			}
			for _, task := range tasks {
				seen[task.ID]++
			}
			if next == "" {
				break
			}
			cursor = next
		}
	}
	return seen, nil
}
