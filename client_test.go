package leasehold_test

// Integration tests of the Client against the local AWS stack: each test
// has its own table and queues (internal/awstest), and the tests that need
// tasks to run start a worker polling the test's work queue (Worker.Run).

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/examples"
	"github.com/leasehold/leasehold/internal/awstest"
	"github.com/leasehold/leasehold/internal/defaults"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/dynamo"
	"github.com/leasehold/leasehold/internal/lease/query"
	"github.com/leasehold/leasehold/internal/token"
)

// clientEnv is one test's slice of the local stack and a client on it.
type clientEnv struct {
	cfg    aws.Config
	table  string
	queues awstest.Queues
	client *leasehold.Client
	store  *dynamo.Store
	sqs    *sqs.Client
}

func newClientEnv(t *testing.T) *clientEnv {
	t.Helper()
	cfg := awstest.Config(t)
	e := &clientEnv{cfg: cfg, table: awstest.NewTable(t, cfg), queues: awstest.NewQueues(t, cfg), sqs: sqs.NewFromConfig(cfg)}
	c, err := leasehold.NewClient(leasehold.ClientConfig{AWS: cfg, Table: e.table, QueueURL: e.queues.Work})
	if err != nil {
		t.Fatalf("NewClient: %v", err)
	}
	e.client = c
	e.store = dynamo.New(dynamodb.NewFromConfig(cfg), e.table, lease.Options{})
	return e
}

// startWorker runs a worker with the example handlers on the test's work
// queue until the test ends, with cfg's timing.
func (e *clientEnv) startWorker(t *testing.T, cfg leasehold.WorkerConfig) {
	t.Helper()
	hs := leasehold.NewHandlers()
	examples.Register(hs)
	leasehold.Handle(hs, "block", blockUntilCancelled)
	cfg.AWS, cfg.Table, cfg.QueueURL, cfg.DeadLetterQueueURL, cfg.Handlers = e.cfg, e.table, e.queues.Work, e.queues.WorkDLQ, hs
	cfg.Logger = slog.New(slog.DiscardHandler)
	cfg.LongPoll, cfg.InvocationTimeout = time.Second, time.Minute
	w, err := leasehold.NewWorker(cfg)
	if err != nil {
		t.Fatalf("NewWorker: %v", err)
	}
	ctx, stop := context.WithCancel(context.WithoutCancel(t.Context()))
	done := make(chan error, 1)
	go func() {
		done <- w.Run(ctx)
	}()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("worker Run: %v", err)
		}
	})
}

// blockCauses reports, per task id, why a "block" handler's context ended.
var blockCauses sync.Map

// blockUntilCancelled runs until its context ends and records the cause.
func blockUntilCancelled(ctx context.Context, t *leasehold.Task[struct{}]) (string, error) {
	<-ctx.Done()
	blockCauses.Store(t.ID, context.Cause(ctx))
	return "", context.Cause(ctx)
}

// queueCounts reads the visible and the delayed message counts of url.
func queueCounts(t *testing.T, client *sqs.Client, url string) (visible, delayed int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), awstest.Scale(10*time.Second))
	defer cancel()
	out, err := client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(url),
		AttributeNames: []sqstypes.QueueAttributeName{
			sqstypes.QueueAttributeNameApproximateNumberOfMessages,
			sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed,
		},
	})
	if err != nil {
		t.Fatalf("queue attributes: %v", err)
	}
	visible, _ = strconv.Atoi(out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessages)])
	delayed, _ = strconv.Atoi(out.Attributes[string(sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed)])
	return visible, delayed
}

func testCtx(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), awstest.Scale(d))
	t.Cleanup(cancel)
	return ctx
}

var uuidPattern = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestClientEnqueueAndGet(t *testing.T) {
	t.Parallel()
	e := newClientEnv(t)
	ctx := testCtx(t, time.Minute)

	info, err := e.client.Enqueue(ctx, leasehold.Submission{
		Kind:        "greet",
		Payload:     examples.Greeting{Name: "ada"},
		ID:          "greet-ada",
		MaxAttempts: 3,
	})
	if err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	if info.ID != "greet-ada" || info.Status != leasehold.StatusPending || info.MaxAttempts != 3 || info.CreatedAt.IsZero() {
		t.Fatalf("Enqueue returned %+v", info)
	}
	got, err := e.client.Get(ctx, "greet-ada")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	if got.Kind != "greet" || string(got.Payload) != `{"name":"ada"}` || got.Attempt != 0 || got.MaxAttempts != 3 {
		t.Fatalf("Get = %+v", got)
	}
	if visible, _ := queueCounts(t, e.sqs, e.queues.Work); visible != 1 {
		t.Fatalf("work queue holds %d messages, want the task's token", visible)
	}

	// Enqueueing the id, kind and payload again is a no-op that hands back
	// the stored task.
	again, err := e.client.Enqueue(ctx, leasehold.Submission{Kind: "greet", Payload: examples.Greeting{Name: "ada"}, ID: "greet-ada"})
	if !errors.Is(err, leasehold.ErrAlreadyExists) {
		t.Fatalf("second Enqueue: err = %v, want ErrAlreadyExists", err)
	}
	if again.ID != "greet-ada" || !again.CreatedAt.Equal(got.CreatedAt) || string(again.Payload) != `{"name":"ada"}` {
		t.Fatalf("second Enqueue returned %+v, want the stored task", again)
	}

	// Without an id the client picks a random one; raw JSON passes through;
	// no payload stays empty.
	raw, err := e.client.Enqueue(ctx, leasehold.Submission{Kind: "upper", Payload: json.RawMessage(`{"text":"x"}`)})
	if err != nil || !uuidPattern.MatchString(raw.ID) || string(raw.Payload) != `{"text":"x"}` {
		t.Fatalf("Enqueue raw: %+v, %v", raw, err)
	}
	empty, err := e.client.Enqueue(ctx, leasehold.Submission{Kind: "upper"})
	if err != nil || empty.Payload != nil || empty.MaxAttempts != defaults.MaxAttempts {
		t.Fatalf("Enqueue nil payload: %+v, %v", empty, err)
	}

	if _, err := e.client.Get(ctx, "no-such-task"); !errors.Is(err, leasehold.ErrNotFound) {
		t.Fatalf("Get unknown id: %v, want ErrNotFound", err)
	}
}

func TestClientEnqueueRejectsBadSubmissions(t *testing.T) {
	t.Parallel()
	e := newClientEnv(t)
	ctx := testCtx(t, time.Minute)
	cases := []struct {
		name string
		sub  leasehold.Submission
		want error
	}{
		{"no kind", leasehold.Submission{}, leasehold.ErrInvalid},
		{"raw payload that is not JSON", leasehold.Submission{Kind: "k", Payload: json.RawMessage(`{"a":`)}, leasehold.ErrInvalid},
		{"payload that does not encode", leasehold.Submission{Kind: "k", Payload: func() {}}, leasehold.ErrInvalid},
		{"payload over the limit", leasehold.Submission{Kind: "k", Payload: strings.Repeat("x", lease.MaxPayloadBytes)}, leasehold.ErrTooLarge},
		{"zero attempts", leasehold.Submission{Kind: "k", MaxAttempts: -1}, leasehold.ErrInvalid},
		{"too many attempts", leasehold.Submission{Kind: "k", MaxAttempts: 101}, leasehold.ErrInvalid},
		{"negative delay", leasehold.Submission{Kind: "k", Delay: -time.Second}, leasehold.ErrInvalid},
		{"delay and time", leasehold.Submission{Kind: "k", Delay: time.Minute, RunAt: time.Now().Add(time.Hour)}, leasehold.ErrInvalid},
		{"more than a year ahead", leasehold.Submission{Kind: "k", Delay: 400 * 24 * time.Hour}, leasehold.ErrInvalid},
		{"id with a newline", leasehold.Submission{Kind: "k", ID: "a\nb"}, leasehold.ErrInvalid},
		{"id with a bidi override", leasehold.Submission{Kind: "k", ID: "a\u202eb"}, leasehold.ErrInvalid},
		// The SDK would send "a\ufffdb": two different ids would be one.
		{"id not UTF-8", leasehold.Submission{Kind: "k", ID: "a\xffb"}, leasehold.ErrInvalid},
		{"id over the limit", leasehold.Submission{Kind: "k", ID: strings.Repeat("i", lease.MaxIDBytes+1)}, leasehold.ErrInvalid},
		{"wait timeout without dependencies", leasehold.Submission{Kind: "k", WaitTimeout: time.Hour}, leasehold.ErrInvalid},
		{"negative wait timeout", leasehold.Submission{Kind: "k", After: []string{"a"}, WaitTimeout: -time.Hour}, leasehold.ErrInvalid},
		{"wait timeout over a year", leasehold.Submission{Kind: "k", After: []string{"a"}, WaitTimeout: 400 * 24 * time.Hour}, leasehold.ErrInvalid},
	}
	for _, tc := range cases {
		if _, err := e.client.Enqueue(ctx, tc.sub); !errors.Is(err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.want)
		}
	}
	// Too deep is its own error, naming the limit, not "not valid JSON".
	deep := json.RawMessage(strings.Repeat("[", lease.MaxJSONDepth+1) + strings.Repeat("]", lease.MaxJSONDepth+1))
	if _, err := e.client.Enqueue(ctx, leasehold.Submission{Kind: "k", Payload: deep}); !errors.Is(err, leasehold.ErrInvalid) || !strings.Contains(err.Error(), "deeper than 10000 levels") {
		t.Errorf("payload nested %d deep: err = %v, want ErrInvalid naming the depth limit", lease.MaxJSONDepth+1, err)
	}
	for _, id := range []string{"a\xffb", "a\x00b", "a\u2066b"} {
		if _, err := e.client.Get(ctx, id); !errors.Is(err, leasehold.ErrInvalid) {
			t.Errorf("Get(%q): err = %v, want ErrInvalid", id, err)
		}
		if _, err := e.client.Cancel(ctx, id); !errors.Is(err, leasehold.ErrInvalid) {
			t.Errorf("Cancel(%q): err = %v, want ErrInvalid", id, err)
		}
		if _, err := e.client.Retry(ctx, id, 0); !errors.Is(err, leasehold.ErrInvalid) {
			t.Errorf("Retry(%q): err = %v, want ErrInvalid", id, err)
		}
	}
	page, err := e.client.List(ctx, leasehold.ListOptions{})
	if err != nil || len(page.Tasks) != 0 {
		t.Fatalf("rejected submissions left tasks: %+v, %v", page.Tasks, err)
	}
}

// A task due within SQS's 15 minutes gets a delayed token; one due later
// gets none: it waits in the table for the sweep.
func TestClientEnqueueDelays(t *testing.T) {
	t.Parallel()
	e := newClientEnv(t)
	ctx := testCtx(t, time.Minute)
	before := time.Now()

	far, err := e.client.Enqueue(ctx, leasehold.Submission{Kind: "greet", Delay: 20 * time.Minute})
	if err != nil {
		t.Fatalf("Enqueue +20m: %v", err)
	}
	// The table keeps milliseconds.
	if d := far.RunAt.Sub(before.Truncate(time.Millisecond)); d < 20*time.Minute || d > 21*time.Minute {
		t.Fatalf("run at %s, want 20 minutes from %s", far.RunAt, before)
	}
	if visible, delayed := queueCounts(t, e.sqs, e.queues.Work); visible+delayed != 0 {
		t.Fatalf("a task due in 20 minutes sent a token (%d visible, %d delayed)", visible, delayed)
	}

	at := before.Add(5 * time.Minute).Truncate(time.Second)
	near, err := e.client.Enqueue(ctx, leasehold.Submission{Kind: "greet", RunAt: at})
	if err != nil {
		t.Fatalf("Enqueue at +5m: %v", err)
	}
	if !near.RunAt.Equal(at) {
		t.Fatalf("run at %s, want %s", near.RunAt, at)
	}
	if visible, delayed := queueCounts(t, e.sqs, e.queues.Work); visible != 0 || delayed != 1 {
		t.Fatalf("work queue: %d visible, %d delayed; want the one delayed token", visible, delayed)
	}
}

func TestClientEnqueueManyThousands(t *testing.T) {
	t.Parallel()
	e := newClientEnv(t)
	ctx := testCtx(t, 5*time.Minute)
	drained := awstest.Drain(t, e.sqs, e.queues.Work, 2)

	const n = 1500
	subs := make([]leasehold.Submission, n)
	for i := range subs {
		subs[i] = leasehold.Submission{Kind: "greet", ID: fmt.Sprintf("many-%04d", i), Payload: examples.Greeting{Name: strconv.Itoa(i)}}
	}
	subs[7].Kind = ""                               // invalid
	subs[400].Payload = json.RawMessage(`nope`)     // invalid
	subs[1499] = subs[3]                            // a repeat within the batch
	subs[900] = leasehold.Submission{Kind: "greet"} // random id
	var calls, last int
	results, err := e.client.EnqueueMany(ctx, subs, leasehold.OnProgress(func(done, total int) {
		calls++
		if total != n || done < last || done > n {
			t.Errorf("progress %d/%d after %d", done, total, last)
		}
		last = done
	}))
	if err != nil {
		t.Fatalf("EnqueueMany: %v", err)
	}
	if calls < 2 || last != n {
		t.Fatalf("progress: %d calls, last %d; want several, ending at %d", calls, last, n)
	}
	if len(results) != n {
		t.Fatalf("%d results for %d submissions", len(results), n)
	}
	stored := map[string]bool{}
	for i, r := range results {
		switch i {
		case 7, 400:
			if !errors.Is(r.Err, leasehold.ErrInvalid) {
				t.Errorf("result %d: %v, want ErrInvalid", i, r.Err)
			}
			continue
		case 1499:
			if !errors.Is(r.Err, leasehold.ErrAlreadyExists) || r.ID != subs[3].ID {
				t.Errorf("result %d: %+v, want ErrAlreadyExists for %s", i, r, subs[3].ID)
			}
			continue
		case 900:
			if !uuidPattern.MatchString(r.ID) {
				t.Errorf("result 900: id %q is not a random id", r.ID)
			}
		default:
			if r.ID != subs[i].ID {
				t.Errorf("result %d names %q, want %q", i, r.ID, subs[i].ID)
			}
		}
		if r.Err != nil || r.Task.ID != r.ID || r.Task.Status != leasehold.StatusPending {
			t.Errorf("result %d: %+v", i, r)
		}
		stored[r.ID] = true
	}
	if len(stored) != n-3 {
		t.Fatalf("%d tasks stored, want %d", len(stored), n-3)
	}
	listed := listAll(t, e.client, leasehold.ListOptions{Status: leasehold.StatusPending, Limit: query.MaxListLimit})
	if len(listed) != len(stored) {
		t.Fatalf("listed %d tasks, want %d", len(listed), len(stored))
	}
	for _, info := range listed {
		if !stored[info.ID] {
			t.Fatalf("listed %q, which was not enqueued", info.ID)
		}
	}
	// Every stored task got its token (the repeat may get a second one).
	deadline := time.After(awstest.Scale(30 * time.Second))
	for drained.Load() < int64(len(stored)) {
		select {
		case <-deadline:
			t.Fatalf("%d tokens reached the work queue, want %d", drained.Load(), len(stored))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// listAll pages through List and fails on a task listed twice.
func listAll(t *testing.T, c *leasehold.Client, o leasehold.ListOptions) []leasehold.TaskInfo {
	t.Helper()
	ctx := testCtx(t, 2*time.Minute)
	var all []leasehold.TaskInfo
	seen := map[string]bool{}
	for {
		page, err := c.List(ctx, o)
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		if len(page.Tasks) > max(o.Limit, 1) {
			t.Fatalf("page of %d tasks, limit %d", len(page.Tasks), o.Limit)
		}
		for _, info := range page.Tasks {
			if seen[info.ID] {
				t.Fatalf("task %s listed twice", info.ID)
			}
			seen[info.ID] = true
			all = append(all, info)
		}
		if page.Next == "" {
			return all
		}
		o.Cursor = page.Next
	}
}

// seed puts tasks into each status through the store, as workers would.
func (e *clientEnv) seed(t *testing.T) map[leasehold.Status][]string {
	t.Helper()
	ctx := testCtx(t, time.Minute)
	out := map[leasehold.Status][]string{}
	mk := func(id string) lease.Task {
		task, err := e.store.Create(ctx, lease.NewTask{ID: id, Kind: "greet", Payload: []byte(`{"name":"x"}`), MaxAttempts: 2})
		if err != nil {
			t.Fatalf("create %s: %v", id, err)
		}
		return task
	}
	claim := func(id string) lease.Task { return awstest.Claim(t, ctx, e.store, id, "seed") }
	for i := range 3 {
		id := fmt.Sprintf("pending-%d", i)
		mk(id)
		out[leasehold.StatusPending] = append(out[leasehold.StatusPending], id)
	}
	for i := range 2 {
		id := fmt.Sprintf("running-%d", i)
		mk(id)
		claim(id)
		out[leasehold.StatusRunning] = append(out[leasehold.StatusRunning], id)
	}
	for i := range 4 {
		id := fmt.Sprintf("succeeded-%d", i)
		mk(id)
		awstest.Finish(t, ctx, e.store, claim(id).LeaseOf(), []byte(`"done"`))
		out[leasehold.StatusSucceeded] = append(out[leasehold.StatusSucceeded], id)
	}
	for i := range 2 {
		id := fmt.Sprintf("failed-%d", i)
		mk(id)
		awstest.Release(t, ctx, e.store, claim(id).LeaseOf(), lease.Release{Status: lease.StatusFailed, Error: "boom"})
		out[leasehold.StatusFailed] = append(out[leasehold.StatusFailed], id)
	}
	mk("cancelled-0")
	if _, err := e.client.Cancel(ctx, "cancelled-0"); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	out[leasehold.StatusCancelled] = []string{"cancelled-0"}
	return out
}

func ids(tasks []leasehold.TaskInfo) []string {
	out := make([]string, len(tasks))
	for i, t := range tasks {
		out[i] = t.ID
	}
	slices.Sort(out)
	return out
}

func TestClientList(t *testing.T) {
	t.Parallel()
	e := newClientEnv(t)
	want := e.seed(t)
	ctx := testCtx(t, time.Minute)

	for _, s := range leasehold.Statuses() {
		got := listAll(t, e.client, leasehold.ListOptions{Status: s, Limit: 1})
		if w := slices.Sorted(slices.Values(want[s])); !slices.Equal(ids(got), w) {
			t.Errorf("List(%s) = %v, want %v", s, ids(got), w)
		}
		for _, info := range got {
			if info.Status != s || info.Kind != "greet" || info.Payload != nil || info.Result != nil || info.History != nil {
				t.Errorf("List(%s) entry %+v", s, info)
			}
		}
	}

	// Every status, in lifecycle order, pages crossing status boundaries.
	all := listAll(t, e.client, leasehold.ListOptions{Limit: 4})
	var order []leasehold.Status
	for _, info := range all {
		if len(order) == 0 || order[len(order)-1] != info.Status {
			order = append(order, info.Status)
		}
	}
	// (The seed has no WAITING task: workflows are tested elsewhere.)
	seeded := slices.DeleteFunc(leasehold.Statuses(), func(s leasehold.Status) bool { return s == leasehold.StatusWaiting })
	if !slices.Equal(order, seeded) || len(all) != 12 {
		t.Fatalf("listing every status: %d tasks in status order %v", len(all), order)
	}
	page, err := e.client.List(ctx, leasehold.ListOptions{Status: "failed"})
	if err != nil || len(page.Tasks) != 2 || page.Next != "" {
		t.Fatalf("List(failed) with the default limit: %d tasks, next %q, %v", len(page.Tasks), page.Next, err)
	}

	// By kind and by named queue: the listing of that kind or queue, each
	// status in turn, paged; the default work queue, by its name, has no
	// listing of its own.
	namedQueue := e.queues.Intake[strings.LastIndex(e.queues.Intake, "/")+1:] // a named queue
	for _, s := range []leasehold.Submission{
		{Kind: "rare", ID: "rare-1"},
		{Kind: "rare", ID: "rare-2", Queue: namedQueue},
		{Kind: "greet", ID: "named-greet", Queue: namedQueue},
	} {
		if _, err := e.client.Enqueue(ctx, s); err != nil {
			t.Fatalf("Enqueue %s: %v", s.ID, err)
		}
	}
	for _, c := range []struct {
		o    leasehold.ListOptions
		want []string
	}{
		{leasehold.ListOptions{Kind: "rare", Limit: 1}, []string{"rare-1", "rare-2"}},
		{leasehold.ListOptions{Kind: "rare", Status: leasehold.StatusFailed}, nil},
		{leasehold.ListOptions{Queue: namedQueue, Limit: 1}, []string{"named-greet", "rare-2"}},
		{leasehold.ListOptions{Kind: "rare", Queue: namedQueue}, []string{"rare-2"}},
		{leasehold.ListOptions{Kind: "nosuchkind"}, nil},
	} {
		if got := ids(listAll(t, e.client, c.o)); !slices.Equal(got, c.want) {
			t.Errorf("List(%+v) = %v, want %v", c.o, got, c.want)
		}
	}
	workName := e.queues.Work[strings.LastIndex(e.queues.Work, "/")+1:]
	if _, err := e.client.List(ctx, leasehold.ListOptions{Queue: workName}); !errors.Is(err, leasehold.ErrInvalid) {
		t.Errorf("List of the default work queue by its name: %v, want ErrInvalid", err)
	}
	first, err := e.client.List(ctx, leasehold.ListOptions{Kind: "rare", Status: leasehold.StatusPending, Limit: 1})
	if err != nil || first.Next == "" {
		t.Fatalf("List(rare, 1) = %+v, %v; want a page and a cursor", first, err)
	}
	if _, err := e.client.List(ctx, leasehold.ListOptions{Kind: "greet", Status: leasehold.StatusPending, Cursor: first.Next}); !errors.Is(err, leasehold.ErrInvalid) {
		t.Errorf("List(greet) with the cursor of List(rare): %v, want ErrInvalid", err)
	}

	for name, o := range map[string]leasehold.ListOptions{
		"unknown status":    {Status: "DONE"},
		"negative limit":    {Limit: -1},
		"limit too large":   {Limit: query.MaxListLimit + 1},
		"foreign cursor":    {Cursor: "bm90IGEgY3Vyc29y"},
		"cursor not base64": {Cursor: "%%%"},
	} {
		_, err := e.client.List(ctx, o)
		if !errors.Is(err, leasehold.ErrInvalid) {
			t.Errorf("%s: err = %v, want ErrInvalid", name, err)
		} else if strings.HasPrefix(err.Error(), "invalid task") {
			t.Errorf("%s: err = %q blames a task; a list option names none", name, err)
		}
	}
}

func TestClientCancel(t *testing.T) {
	t.Parallel()
	e := newClientEnv(t)
	ctx := testCtx(t, time.Minute)

	if _, err := e.client.Enqueue(ctx, leasehold.Submission{Kind: "greet", ID: "p", Delay: time.Hour}); err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	info, err := e.client.Cancel(ctx, "p")
	if err != nil || info.Status != leasehold.StatusCancelled {
		t.Fatalf("Cancel pending: %+v, %v", info, err)
	}
	if _, err := e.client.Cancel(ctx, "p"); !errors.Is(err, leasehold.ErrFinished) {
		t.Fatalf("Cancel again: %v, want ErrFinished", err)
	}
	if _, err := e.client.Cancel(ctx, "nope"); !errors.Is(err, leasehold.ErrNotFound) {
		t.Fatalf("Cancel unknown: %v, want ErrNotFound", err)
	}

	// A running task is only marked; its worker ends it.
	if _, err := e.store.Create(ctx, lease.NewTask{ID: "r", Kind: "greet", MaxAttempts: 1}); err != nil {
		t.Fatal(err)
	}
	awstest.Claim(t, ctx, e.store, "r", "someone")
	info, err = e.client.Cancel(ctx, "r")
	if err != nil || info.Status != leasehold.StatusRunning || !info.CancelRequested || info.LeaseOwner != "someone" {
		t.Fatalf("Cancel running: %+v, %v", info, err)
	}
}

// Cancel of a running task reaches its handler at the next lease renewal
// and the task ends CANCELLED.
func TestClientCancelRunningTask(t *testing.T) {
	t.Parallel()
	e := newClientEnv(t)
	// A short lease, renewed often (scaled, so a busy machine's late
	// renewal does not lose it): the cancel reaches the handler at a
	// renewal. The block kind waits for its context alone, so the task ends
	// only through the cancel.
	e.startWorker(t, leasehold.WorkerConfig{LeaseDuration: awstest.Scale(2 * time.Second), RenewBefore: awstest.Scale(time.Second)})
	ctx := testCtx(t, time.Minute)

	id := "block-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if _, err := e.client.Enqueue(ctx, leasehold.Submission{Kind: "block", ID: id}); err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	for {
		info, err := e.client.Get(ctx, id)
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		if info.Status == leasehold.StatusRunning {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("task never started: %+v", info)
		case <-time.After(50 * time.Millisecond):
		}
	}
	if _, err := e.client.Cancel(ctx, id); err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	info, err := e.client.Wait(ctx, id)
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if info.Status != leasehold.StatusCancelled {
		t.Fatalf("task ended %s (%s), want CANCELLED", info.Status, info.Error)
	}
	cause, ok := blockCauses.Load(id)
	if !ok || !errors.Is(cause.(error), leasehold.ErrCancelRequested) {
		t.Fatalf("handler's context ended with %v, want ErrCancelRequested", cause)
	}
}

func TestClientRetry(t *testing.T) {
	t.Parallel()
	e := newClientEnv(t)
	e.startWorker(t, leasehold.WorkerConfig{})
	ctx := testCtx(t, 2*time.Minute)

	// Fails on attempt 1 (its only one), succeeds on attempt 2.
	info, err := e.client.Enqueue(ctx, leasehold.Submission{Kind: "flaky", Payload: examples.Flaky{SucceedOnAttempt: 2}, MaxAttempts: 1})
	if err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	failed, err := e.client.Wait(ctx, info.ID)
	if err != nil || failed.Status != leasehold.StatusFailed || failed.Attempt != 1 {
		t.Fatalf("first run: %+v, %v; want FAILED after 1 attempt", failed, err)
	}
	if _, err := e.client.Retry(ctx, info.ID, -1); !errors.Is(err, leasehold.ErrInvalid) {
		t.Fatalf("Retry with 0 extra attempts: %v, want ErrInvalid", err)
	}
	retried, err := e.client.Retry(ctx, info.ID, 2)
	if err != nil || retried.Status != leasehold.StatusPending || retried.MaxAttempts != 3 || retried.Attempt != 1 {
		t.Fatalf("Retry: %+v, %v; want PENDING with 3 attempts, 1 used", retried, err)
	}
	got, err := leasehold.Result[string](ctx, e.client, info.ID)
	if err != nil || got != "succeeded on attempt 2" {
		t.Fatalf("Result after retry: %q, %v", got, err)
	}
	done, err := e.client.Get(ctx, info.ID)
	if err != nil || done.Attempt != 2 || len(done.History) != 2 ||
		done.History[0].Status != leasehold.StatusFailed || done.History[1].Status != leasehold.StatusSucceeded {
		t.Fatalf("after retry: %+v, %v; want attempt 2 with both attempts in the history", done, err)
	}
	if _, err := e.client.Retry(ctx, info.ID, 0); !errors.Is(err, leasehold.ErrNotRetryable) {
		t.Fatalf("Retry of a SUCCEEDED task: %v, want ErrNotRetryable", err)
	}
	if _, err := e.client.Retry(ctx, "nope", 0); !errors.Is(err, leasehold.ErrNotFound) {
		t.Fatalf("Retry unknown: %v, want ErrNotFound", err)
	}
}

func TestClientWaitAndResult(t *testing.T) {
	t.Parallel()
	e := newClientEnv(t)
	e.startWorker(t, leasehold.WorkerConfig{})
	ctx := testCtx(t, 2*time.Minute)

	ok, err := e.client.Enqueue(ctx, leasehold.Submission{Kind: "greet", Payload: examples.Greeting{Name: "ada"}})
	if err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	greeting, err := leasehold.Result[string](ctx, e.client, ok.ID)
	if err != nil || greeting != "hello, ada" {
		t.Fatalf("Result = %q, %v", greeting, err)
	}
	info, err := e.client.Wait(ctx, ok.ID)
	if err != nil || info.Status != leasehold.StatusSucceeded || string(info.Result) != `"hello, ada"` || info.FinishedAt.IsZero() {
		t.Fatalf("Wait = %+v, %v", info, err)
	}
	if _, err := leasehold.Result[int](ctx, e.client, ok.ID); err == nil {
		t.Fatal("Result into the wrong type succeeded")
	}

	bad, err := e.client.Enqueue(ctx, leasehold.Submission{Kind: "greet", Payload: examples.Greeting{}}) // no name: fails for good
	if err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	_, err = leasehold.Result[string](ctx, e.client, bad.ID)
	var te *leasehold.TaskError
	if !errors.As(err, &te) || te.Status != leasehold.StatusFailed || !strings.Contains(te.Message, "name is required") {
		t.Fatalf("Result of a failing task: %v", err)
	}

	later, err := e.client.Enqueue(ctx, leasehold.Submission{Kind: "greet", Payload: examples.Greeting{Name: "x"}, Delay: time.Hour})
	if err != nil {
		t.Fatalf("Enqueue: %v", err)
	}
	// A deadline long enough for a read or two on a loaded emulator; the
	// task is an hour away, so Wait must end with the deadline. When a
	// read landed first, Wait also returns what it saw: PENDING.
	short, cancel := context.WithTimeout(ctx, awstest.Scale(time.Second))
	defer cancel()
	info, err = e.client.Wait(short, later.ID)
	if !errors.Is(err, context.DeadlineExceeded) || (info.ID != "" && info.Status != leasehold.StatusPending) {
		t.Fatalf("Wait past its deadline: %+v, %v", info, err)
	}
	if _, err := e.client.Wait(ctx, "nope"); !errors.Is(err, leasehold.ErrNotFound) {
		t.Fatalf("Wait unknown: %v, want ErrNotFound", err)
	}
}

// closedPort returns a local port nothing listens on.
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

// offlineConfig is an AWS config that needs no stack: static credentials,
// one attempt per call.
func offlineConfig(t *testing.T) aws.Config {
	t.Helper()
	cfg, err := config.LoadDefaultConfig(t.Context(),
		config.WithRegion("us-east-1"),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider("test", "test", "")),
		config.WithRetryMaxAttempts(1))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func TestClientUnreachableEndpoint(t *testing.T) {
	t.Parallel()
	endpoint := "http://" + closedPort(t)
	c, err := leasehold.NewClient(leasehold.ClientConfig{AWS: offlineConfig(t), Table: "t", QueueName: "leasehold-work", Endpoint: endpoint})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t, 30*time.Second)
	start := time.Now()
	_, err = c.Get(ctx, "x")
	var u *leasehold.UnreachableError
	if !errors.As(err, &u) {
		t.Fatalf("Get: %v, want an UnreachableError", err)
	}
	want := "cannot reach DynamoDB at " + endpoint + ": connection refused"
	if u.Error() != want || u.Service != "DynamoDB" || u.Endpoint != endpoint {
		t.Fatalf("error %q, want %q", u.Error(), want)
	}
	_, err = c.Enqueue(ctx, leasehold.Submission{Kind: "greet"})
	if !errors.As(err, &u) || u.Service != "SQS" {
		t.Fatalf("Enqueue: %v, want SQS unreachable", err)
	}
	for name, call := range map[string]func() error{
		"List":   func() error { _, err := c.List(ctx, leasehold.ListOptions{}); return err },
		"Cancel": func() error { _, err := c.Cancel(ctx, "x"); return err },
		"Retry":  func() error { _, err := c.Retry(ctx, "x", 0); return err },
		"Wait":   func() error { _, err := c.Wait(ctx, "x"); return err },
	} {
		if err := call(); !errors.As(err, new(*leasehold.UnreachableError)) {
			t.Errorf("%s: %v, want an UnreachableError", name, err)
		}
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("reporting an unreachable endpoint took %s", took)
	}
}

func TestClientMissingTableAndQueue(t *testing.T) {
	t.Parallel()
	cfg := awstest.Config(t)
	c, err := leasehold.NewClient(leasehold.ClientConfig{AWS: cfg, Table: "no-such-table", QueueName: "no-such-queue"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t, 30*time.Second)
	_, err = c.Get(ctx, "x")
	var m *leasehold.MissingResourceError
	if !errors.As(err, &m) || m.Service != "DynamoDB" || m.Resource != "no-such-table" {
		t.Fatalf("Get: %v, want the missing table", err)
	}
	_, err = c.Enqueue(ctx, leasehold.Submission{Kind: "greet"})
	if !errors.As(err, &m) || m.Service != "SQS" || m.Resource != "no-such-queue" {
		t.Fatalf("Enqueue: %v, want the missing queue", err)
	}
}

func TestNewClientRejectsImpossibleOptions(t *testing.T) {
	t.Parallel()
	cases := map[string]leasehold.ClientConfig{
		"no table":              {},
		"negative call timeout": {Table: "t", CallTimeout: -time.Second},
		"negative attempts":     {Table: "t", MaxAttempts: -1},
		"too many attempts":     {Table: "t", MaxAttempts: 101},
		"negative fan-out":      {Table: "t", EnqueueConcurrency: -1},
		"negative wait poll":    {Table: "t", WaitPoll: -time.Second},
	}
	for name, cfg := range cases {
		if _, err := leasehold.NewClient(cfg); !errors.Is(err, leasehold.ErrConfig) {
			t.Errorf("%s: %v, want ErrConfig", name, err)
		}
	}
	c, err := leasehold.NewClient(leasehold.ClientConfig{AWS: offlineConfig(t), Table: "t"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Enqueue(t.Context(), leasehold.Submission{Kind: "greet"}); !errors.Is(err, leasehold.ErrConfig) {
		t.Fatalf("Enqueue without a work queue: %v, want ErrConfig", err)
	}
}

// An endpoint that accepts connections but never answers is reported as
// unreachable once the call timeout passes.
func TestClientEndpointThatNeverAnswers(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var (
		conns sync.WaitGroup
		mu    sync.Mutex
		held  []net.Conn // open, never answered
	)
	conns.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
		}
	})
	t.Cleanup(func() {
		l.Close()
		conns.Wait()
		for _, c := range held {
			c.Close()
		}
	})
	endpoint := "http://" + l.Addr().String()
	c, err := leasehold.NewClient(leasehold.ClientConfig{AWS: offlineConfig(t), Table: "t", Endpoint: endpoint, CallTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Get(testCtx(t, 30*time.Second), "x")
	var u *leasehold.UnreachableError
	if !errors.As(err, &u) || u.Error() != "cannot reach DynamoDB at "+endpoint+": no answer within 300ms" {
		t.Fatalf("Get: %v, want no answer within the call timeout", err)
	}
}

// An id works like an idempotency key: the same kind and payload is a
// duplicate (ErrAlreadyExists), anything else a conflict (ErrConflict) that
// leaves the stored task alone and sends nothing.
func TestClientEnqueueIDConflict(t *testing.T) {
	t.Parallel()
	e := newClientEnv(t)
	ctx := testCtx(t, time.Minute)
	id := "conflict-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	first, err := e.client.Enqueue(ctx, leasehold.Submission{Kind: "greet", Payload: map[string]any{"name": "ada", "n": 1}, ID: id})
	if err != nil {
		t.Fatal(err)
	}
	dup, err := e.client.Enqueue(ctx, leasehold.Submission{Kind: "greet", Payload: json.RawMessage(` {"n": 1, "name": "ada"} `), ID: id})
	if !errors.Is(err, leasehold.ErrAlreadyExists) || errors.Is(err, leasehold.ErrConflict) || dup.ID != id {
		t.Fatalf("duplicate: %+v, %v", dup, err)
	}
	for _, c := range []struct {
		kind    string
		payload any
		field   string
	}{
		{"greet", map[string]any{"name": "bob", "n": 1}, "payload"},
		{"greet", nil, "payload"},
		{"upper", map[string]any{"name": "ada", "n": 1}, "kind"},
	} {
		got, err := e.client.Enqueue(ctx, leasehold.Submission{Kind: c.kind, Payload: c.payload, ID: id})
		var ce *leasehold.ConflictError
		if !errors.As(err, &ce) || !errors.Is(err, leasehold.ErrConflict) || errors.Is(err, leasehold.ErrAlreadyExists) ||
			ce.Field != c.field || ce.TaskID != id || ce.Status != leasehold.StatusPending {
			t.Fatalf("%s %v: err %v, want a conflict on %s", c.kind, c.payload, err, c.field)
		}
		if got.ID != id || got.Kind != "greet" || compactJSON(t, got.Payload) != `{"n":1,"name":"ada"}` {
			t.Fatalf("conflict returned %+v, want the stored task", got)
		}
	}
	stored, err := e.client.Get(ctx, id)
	if err != nil || stored.Kind != first.Kind || compactJSON(t, stored.Payload) != `{"n":1,"name":"ada"}` {
		t.Fatalf("stored task changed: %+v, %v", stored, err)
	}
}

func compactJSON(t *testing.T, raw []byte) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		t.Fatalf("compact %s: %v", raw, err)
	}
	return b.String()
}

// A task with dependencies is stored with its wait's deadline, and its token
// (sent before the create) carries it, so a worker that creates the task
// from the token uses the same one.
func TestClientEnqueueWaitTimeout(t *testing.T) {
	t.Parallel()
	e := newClientEnv(t)
	ctx := testCtx(t, time.Minute)
	before := time.Now()
	hour, err := e.client.Enqueue(ctx, leasehold.Submission{Kind: "upper", ID: "dep-hour", After: []string{"root"}, WaitTimeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	week, err := e.client.Enqueue(ctx, leasehold.Submission{Kind: "upper", ID: "dep-week", After: []string{"root"}})
	if err != nil {
		t.Fatal(err)
	}
	after := time.Now()
	for _, c := range []struct {
		info leasehold.TaskInfo
		d    time.Duration
	}{{hour, time.Hour}, {week, 7 * 24 * time.Hour}} {
		got, err := e.client.Get(ctx, c.info.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != leasehold.StatusWaiting || got.WaitUntil.Before(before.Add(c.d).Truncate(time.Millisecond)) || got.WaitUntil.After(after.Add(c.d)) {
			t.Errorf("%s: %s until %s, want WAITING until %s after the enqueue", got.ID, got.Status, got.WaitUntil, c.d)
		}
	}
	msgs := awstest.ReceiveN(t, e.sqs, e.queues.Work, 2, 2*time.Minute, 60, nil)
	for _, m := range msgs.Records {
		tok, err := token.Decode(m.Body)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]time.Duration{"dep-hour": time.Hour, "dep-week": 7 * 24 * time.Hour}[tok.ID]
		if tok.WaitTimeout < want-time.Minute || tok.WaitTimeout > want {
			t.Errorf("token of %s carries wait timeout %s, want about %s", tok.ID, tok.WaitTimeout, want)
		}
	}
}
