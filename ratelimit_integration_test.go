package leasehold_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/awstest"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/dynamo"
	"github.com/leasehold/leasehold/internal/lease/limiter"
	"github.com/leasehold/leasehold/settings"
)

// TestRateLimitAcrossWorkersOnTheStack runs three worker processes on one
// queue with LEASEHOLD_RATE_LIMITS=2/s and sends them 16 tasks at once:
// every task succeeds at its first attempt (a task held back uses none),
// no message is left, no rate window of the table counts more than 2
// starts, and the starts spread over at least 8 windows, which three
// unlimited workers would not need for 16 quick tasks. The workers' logs
// show tokens held back.
func TestRateLimitAcrossWorkersOnTheStack(t *testing.T) {
	t.Parallel()
	e := setupStack(t)
	const tasks, perSecond = 16, 2
	var ids []string
	for i := range tasks {
		id := fmt.Sprintf("limited-%d", i)
		ids = append(ids, id)
		e.send(t, e.queues.Work, `{"v":1,"kind":"greet","id":"`+id+`","payload":{"name":"rate"},"max_attempts":1}`)
	}
	var children []*runnerChild
	for i := range 3 {
		children = append(children, startRunnerChild(t, e, fmt.Sprintf("limited-%d", i),
			settings.EnvRateLimits+"="+strconv.Itoa(perSecond)+"/s"))
	}
	waitUntil(t, 180*time.Second, func() bool {
		for _, id := range ids {
			if e.status(t, id) != lease.StatusSucceeded {
				return false
			}
		}
		return true
	})
	held := 0
	for _, c := range children {
		c.signal(t, syscall.SIGTERM)
		c.stop(t, 60*time.Second)
		logs, err := os.ReadFile(c.log)
		if err != nil {
			t.Fatal(err)
		}
		held += strings.Count(string(logs), "rate limit reached")
	}
	for _, id := range ids {
		if got := e.get(t, id); got.Attempt != 1 {
			t.Errorf("task %s succeeded at attempt %d; a held task must use no attempt", id, got.Attempt)
		}
	}
	if held == 0 {
		t.Error("no worker logged a token held back by the rate limit")
	}

	windows := e.rateWindows(t)
	total := 0
	for id, starts := range windows {
		if starts > perSecond {
			t.Errorf("rate window %q counted %d starts, limit %d", id, starts, perSecond)
		}
		total += starts
	}
	if total < tasks || len(windows) < tasks/perSecond {
		t.Errorf("%d starts in %d windows; want at least %d starts over at least %d windows", total, len(windows), tasks, tasks/perSecond)
	}
	t.Logf("%d tasks: %d starts counted in %d one-second windows, %d holds logged", tasks, total, len(windows), held)
	e.wantNoLiveToken(t, e.queues.Work)
}

// rateWindows reads every rate window of e's table: its id and its count.
func (e *stackEnv) rateWindows(t *testing.T) map[string]int {
	t.Helper()
	return awstest.RateWindows(t, dynamodb.NewFromConfig(e.cfg), e.table)
}

// TestKindConcurrencyAcrossWorkersOnTheStack runs three worker processes
// with LEASEHOLD_KIND_CONCURRENCY=announced-sleep=2 and sends them 8 tasks
// of a second and a half each: every task succeeds at its first attempt
// (a held task uses none), the handlers' spans, on the clock the processes
// share, never overlap more than 2 at once (without the limit the three
// workers run up to 8), the limit is reached, holds are logged, the slot
// set is empty at the end, and no message is left.
func TestKindConcurrencyAcrossWorkersOnTheStack(t *testing.T) {
	t.Parallel()
	e := setupStack(t)
	const tasks, limit = 8, 2
	var ids []string
	for i := range tasks {
		id := fmt.Sprintf("bounded-%d", i)
		ids = append(ids, id)
		e.send(t, e.queues.Work, `{"v":1,"kind":"announced-sleep","id":"`+id+`","payload":{"seconds":1.5},"max_attempts":1}`)
	}
	var children []*runnerChild
	for i := range 3 {
		children = append(children, startRunnerChild(t, e, fmt.Sprintf("bounded-%d", i),
			settings.EnvKindConcurrency+"=announced-sleep="+strconv.Itoa(limit)))
	}
	waitUntil(t, 240*time.Second, func() bool {
		for _, id := range ids {
			if e.status(t, id) != lease.StatusSucceeded {
				return false
			}
		}
		return true
	})
	type span struct{ start, end int64 }
	var spans []span
	held := 0
	for _, c := range children {
		c.signal(t, syscall.SIGTERM)
		for _, l := range c.stop(t, 60*time.Second) {
			f := strings.Fields(l)
			if len(f) != 4 || f[0] != "span" {
				continue
			}
			start, err1 := strconv.ParseInt(f[2], 10, 64)
			end, err2 := strconv.ParseInt(f[3], 10, 64)
			if err1 != nil || err2 != nil {
				t.Fatalf("bad span line %q", l)
			}
			spans = append(spans, span{start, end})
		}
		logs, err := os.ReadFile(c.log)
		if err != nil {
			t.Fatal(err)
		}
		held += strings.Count(string(logs), "concurrency limit reached")
	}
	for _, id := range ids {
		if got := e.get(t, id); got.Attempt != 1 {
			t.Errorf("task %s succeeded at attempt %d; a held task must use no attempt", id, got.Attempt)
		}
	}
	if len(spans) != tasks {
		t.Fatalf("%d handler spans, want %d", len(spans), tasks)
	}
	most := 0
	for _, s := range spans { // the overlap at each start
		n := 0
		for _, o := range spans {
			if o.start <= s.start && s.start < o.end {
				n++
			}
		}
		most = max(most, n)
	}
	if most > limit || most < limit {
		t.Errorf("at most %d handlers ran at once; want exactly the limit %d", most, limit)
	}
	if held == 0 {
		t.Error("no worker logged a task held back by the concurrency limit")
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	out, err := dynamodb.NewFromConfig(e.cfg).GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(e.table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{dynamo.AttrID: &types.AttributeValueMemberS{Value: limiter.SlotsID("announced-sleep")}}})
	if err != nil {
		t.Fatal(err)
	}
	if h, _ := out.Item[limiter.AttrHolders].(*types.AttributeValueMemberM); h == nil || len(h.Value) != 0 {
		t.Errorf("the slot set at the end: %v; want it empty", out.Item[limiter.AttrHolders])
	}
	t.Logf("%d tasks of 1.5 s: at most %d at once, %d holds logged", tasks, most, held)
	e.wantNoLiveToken(t, e.queues.Work)
}

// TestKindConcurrencySlotOfAKilledWorkerIsFreedOnTheStack: a worker
// process is killed (SIGKILL) while it runs the only slot of a kind, its
// slot held until its invocation's deadline 15 minutes away. Another
// worker takes the task over once its lease has run out, finds the set
// full, sees that the slot's attempt is lost (its task was claimed again),
// gives the slot back and runs the task, and then a second task of the
// kind, within minutes rather than the 15 the slot's own time would take.
func TestKindConcurrencySlotOfAKilledWorkerIsFreedOnTheStack(t *testing.T) {
	t.Parallel()
	e := setupStack(t)
	env := []string{settings.EnvKindConcurrency + "=announced-sleep=1", settings.EnvInvocationTimeout + "=15m"}
	first := startRunnerChild(t, e, "slot-killed", env...)
	e.send(t, e.queues.Work, `{"v":1,"kind":"announced-sleep","id":"slot-orphan","payload":{"seconds":2},"max_attempts":3}`)
	for l := first.next(t, 120*time.Second); l != "started slot-orphan 1"; l = first.next(t, 120*time.Second) {
	}
	first.signal(t, syscall.SIGKILL)
	for range first.lines { // its output ends as it dies
	}
	_ = first.cmd.Wait() // killed: an error, as meant

	slotsKey := map[string]types.AttributeValue{dynamo.AttrID: &types.AttributeValueMemberS{Value: limiter.SlotsID("announced-sleep")}}
	holders := func() map[string]types.AttributeValue {
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		out, err := dynamodb.NewFromConfig(e.cfg).GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(e.table), ConsistentRead: aws.Bool(true), Key: slotsKey})
		if err != nil {
			t.Fatal(err)
		}
		h, _ := out.Item[limiter.AttrHolders].(*types.AttributeValueMemberM)
		if h == nil {
			t.Fatalf("no slot set: %v", out.Item)
		}
		return h.Value
	}
	h := holders()
	n, _ := h["slot-orphan@1"].(*types.AttributeValueMemberN)
	if len(h) != 1 || n == nil {
		t.Fatalf("the killed worker's slot: %v, want slot-orphan@1", h)
	}
	// The premise: the slot's own time (the invocation's deadline) is far
	// beyond this test's budget, so only finding its attempt lost frees it.
	if ms, err := strconv.ParseInt(n.Value, 10, 64); err != nil || time.Until(time.UnixMilli(ms)) < 10*time.Minute {
		t.Fatalf("the killed worker's slot is held until %s (%v); want about 15 minutes from now", n.Value, err)
	}

	second := startRunnerChild(t, e, "slot-taker", env...)
	e.send(t, e.queues.Work, `{"v":1,"kind":"announced-sleep","id":"slot-next","payload":{"seconds":1},"max_attempts":3}`)
	waitUntil(t, 180*time.Second, func() bool {
		return e.status(t, "slot-orphan") == lease.StatusSucceeded && e.status(t, "slot-next") == lease.StatusSucceeded
	})
	second.signal(t, syscall.SIGTERM)
	second.stop(t, 60*time.Second)
	logs, err := os.ReadFile(second.log)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(logs), "gave back concurrency slots of lost attempts") {
		t.Error("the second worker did not log the lost slot it gave back")
	}
	if got := e.get(t, "slot-orphan"); got.Attempt != 2 {
		t.Errorf("slot-orphan succeeded at attempt %d; want 2 (the killed one, then the takeover)", got.Attempt)
	}
	if h := holders(); len(h) != 0 {
		t.Errorf("the slot set at the end: %v; want it empty", h)
	}
	e.wantNoLiveToken(t, e.queues.Work)
}

// TestRateLimitSpendsNothingOnBogusTokensOnTheStack floods a queue limited
// to 5 starts a minute with references to tasks that do not exist (anyone
// who can send to the queue can send them), then sends a real task: the
// bogus tokens spend no start, so the real task starts at once, in the
// same window, and the table's rate windows count exactly its one start.
func TestRateLimitSpendsNothingOnBogusTokensOnTheStack(t *testing.T) {
	t.Parallel()
	e := setupStack(t)
	h := leasehold.NewHandlers()
	leasehold.Handle(h, "greet", func(_ context.Context, task *leasehold.Task[struct{}]) (string, error) { return "hi", nil })
	w := e.worker(t, leasehold.WorkerConfig{Handlers: h,
		RateLimits: map[string]settings.RateLimit{"": {Starts: 5, Per: time.Minute}}})
	for i := range 8 {
		e.send(t, e.queues.Work, fmt.Sprintf(`{"v":1,"id":"no-such-task-%d"}`, i))
	}
	e.pump(t, w, 60*time.Second, func() bool { return e.queueEmpty(t, e.queues.Work) })
	if got := e.rateWindows(t); len(got) != 0 {
		t.Fatalf("8 references to missing tasks spent starts: %v", got)
	}
	e.send(t, e.queues.Work, `{"v":1,"kind":"greet","id":"real","payload":{}}`)
	e.pump(t, w, 60*time.Second, func() bool { return e.status(t, "real") == lease.StatusSucceeded })
	if got := e.get(t, "real"); got.Attempt != 1 || got.Snoozes != 0 {
		t.Errorf("the real task succeeded at attempt %d after %d hand-backs; want its first attempt, never held", got.Attempt, got.Snoozes)
	}
	total := 0
	for _, n := range e.rateWindows(t) {
		total += n
	}
	if total != 1 {
		t.Errorf("the rate windows counted %d starts, want the real task's 1", total)
	}
}
