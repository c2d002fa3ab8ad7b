package lifecycle_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/jonboulle/clockwork"
	"go.uber.org/goleak"

	"github.com/leasehold/leasehold/internal/durable"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/leasemem"
	"github.com/leasehold/leasehold/internal/lifecycle"
	"github.com/leasehold/leasehold/internal/token"
)

// The package's tests also check the executions' transitions
// (transitionsChecked). The integration tests' SDK clients keep idle keep-alive connections to the
// stack; their transport goroutines belong to net/http, not to lifecycle.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(transitionsChecked{m},
		goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
	)
}

var epoch = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// fakeSQS records the calls the lifecycle makes.
type fakeSQS struct {
	mu         sync.Mutex
	visibility []sqs.ChangeMessageVisibilityInput // single calls and batch entries alike
	// batchCalls counts ChangeMessageVisibilityBatch calls, batchSizes
	// their entries; singleCalls counts ChangeMessageVisibility calls.
	batchCalls  int
	batchSizes  []int
	singleCalls int
	// failEntries fails the batch entries of these receipt handles;
	// failBatch fails whole batch calls; omitEntries leaves these
	// handles out of the answer.
	failEntries map[string]bool
	omitEntries map[string]bool
	failBatch   error
	// gate, when set, holds every batch call until it is closed (or the
	// call's context ends).
	gate     chan struct{}
	sent     []sqs.SendMessageInput
	batches  []int    // bytes of each SendMessageBatch call
	deleted  []string // receipt handles
	failSend bool
	// sendBatchesOK, when positive, fails every SendMessageBatch call
	// after that many.
	sendBatchesOK int
	goneURL       string        // a queue deleted since its URL was looked up
	changed       chan struct{} // one tick per call
}

func newFakeSQS() *fakeSQS { return &fakeSQS{changed: make(chan struct{}, 1000)} }

func (f *fakeSQS) ChangeMessageVisibility(_ context.Context, in *sqs.ChangeMessageVisibilityInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error) {
	f.mu.Lock()
	f.visibility = append(f.visibility, *in)
	f.singleCalls++
	f.mu.Unlock()
	f.changed <- struct{}{}
	return &sqs.ChangeMessageVisibilityOutput{}, nil
}

// ChangeMessageVisibilityBatch records each entry that succeeds as a change
// and ticks changed once per call.
func (f *fakeSQS) ChangeMessageVisibilityBatch(ctx context.Context, in *sqs.ChangeMessageVisibilityBatchInput, _ ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error) {
	defer func() { f.changed <- struct{}{} }()
	f.mu.Lock()
	gate := f.gate
	f.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.batchCalls++
	f.batchSizes = append(f.batchSizes, len(in.Entries))
	if f.failBatch != nil {
		return nil, f.failBatch
	}
	out := &sqs.ChangeMessageVisibilityBatchOutput{}
	for _, e := range in.Entries {
		rh := aws.ToString(e.ReceiptHandle)
		switch {
		case f.omitEntries[rh]:
		case f.failEntries[rh]:
			out.Failed = append(out.Failed, sqstypes.BatchResultErrorEntry{
				Id: e.Id, Code: aws.String("ReceiptHandleIsInvalid"), Message: aws.String("The receipt handle is not valid."), SenderFault: true,
			})
		default:
			f.visibility = append(f.visibility, sqs.ChangeMessageVisibilityInput{
				QueueUrl: in.QueueUrl, ReceiptHandle: e.ReceiptHandle, VisibilityTimeout: e.VisibilityTimeout,
			})
			out.Successful = append(out.Successful, sqstypes.ChangeMessageVisibilityBatchResultEntry{Id: e.Id})
		}
	}
	return out, nil
}

func (f *fakeSQS) calls() (single, batch int, sizes []int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.singleCalls, f.batchCalls, slices.Clone(f.batchSizes)
}

func (f *fakeSQS) SendMessage(_ context.Context, in *sqs.SendMessageInput, _ ...func(*sqs.Options)) (*sqs.SendMessageOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failSend {
		return nil, errors.New("send refused")
	}
	if f.goneURL != "" && aws.ToString(in.QueueUrl) == f.goneURL {
		return nil, &sqstypes.QueueDoesNotExist{Message: aws.String("The specified queue does not exist.")}
	}
	f.sent = append(f.sent, *in)
	return &sqs.SendMessageOutput{MessageId: aws.String(fmt.Sprintf("sent-%d", len(f.sent)))}, nil
}

// SendMessageBatch records each entry as a sent message.
func (f *fakeSQS) SendMessageBatch(ctx context.Context, in *sqs.SendMessageBatchInput, _ ...func(*sqs.Options)) (*sqs.SendMessageBatchOutput, error) {
	size := 0
	for _, e := range in.Entries {
		size += len(aws.ToString(e.MessageBody))
	}
	f.mu.Lock()
	f.batches = append(f.batches, size)
	refuse := f.sendBatchesOK > 0 && len(f.batches) > f.sendBatchesOK
	f.mu.Unlock()
	if refuse {
		return nil, errors.New("send batch: throttled")
	}
	out := &sqs.SendMessageBatchOutput{}
	for _, e := range in.Entries {
		if _, err := f.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: in.QueueUrl, MessageBody: e.MessageBody, DelaySeconds: e.DelaySeconds}); err != nil {
			return nil, err
		}
		out.Successful = append(out.Successful, sqstypes.SendMessageBatchResultEntry{Id: e.Id})
	}
	return out, nil
}

func (f *fakeSQS) DeleteMessage(_ context.Context, in *sqs.DeleteMessageInput, _ ...func(*sqs.Options)) (*sqs.DeleteMessageOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deleted = append(f.deleted, aws.ToString(in.ReceiptHandle))
	return &sqs.DeleteMessageOutput{}, nil
}

func (f *fakeSQS) deletedHandles() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.deleted...)
}

func (f *fakeSQS) sentTo(url string) []sqs.SendMessageInput {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []sqs.SendMessageInput
	for _, s := range f.sent {
		if aws.ToString(s.QueueUrl) == url {
			out = append(out, s)
		}
	}
	return out
}

func (f *fakeSQS) visibilityChanges() []sqs.ChangeMessageVisibilityInput {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]sqs.ChangeMessageVisibilityInput(nil), f.visibility...)
}

// failingRenewals makes every Renew fail as a backend error would.
type failingRenewals struct{ lease.Store }

func (failingRenewals) Renew(context.Context, lease.Lease) (lease.Task, error) {
	return lease.Task{}, fmt.Errorf("renew: %w: throttled", lease.ErrBackend)
}

const (
	workURL = "https://sqs.test/000000000000/work"
	dlqURL  = "https://sqs.test/000000000000/work-dlq"
)

type env struct {
	clock    *clockwork.FakeClock
	store    *leasemem.Store
	sqs      *fakeSQS
	handlers map[string]lifecycle.Handler
	exec     *lifecycle.Executor
	// cfg is the configuration exec was built from (another executes
	// beside it on the same store and queues).
	cfg lifecycle.Config
}

func setup(t *testing.T, tweak func(*lifecycle.Config)) *env {
	t.Helper()
	e := &env{
		clock:    clockwork.NewFakeClockAt(epoch),
		sqs:      newFakeSQS(),
		handlers: map[string]lifecycle.Handler{},
	}
	e.store = leasemem.New(lease.Options{Clock: e.clock, LeaseDuration: 20 * time.Second, Skew: 2 * time.Second})
	cfg := lifecycle.Config{
		Store:         e.store,
		SQS:           e.sqs,
		QueueURL:      workURL,
		DeadLetterURL: dlqURL,
		Handlers: func(kind string) (lifecycle.Handler, bool) {
			h, ok := e.handlers[kind]
			return h, ok
		},
		Owner:         "w1",
		LeaseDuration: 20 * time.Second,
		RenewBefore:   10 * time.Second,
		Clock:         e.clock,
		Logger:        slog.New(slog.DiscardHandler),
	}
	if tweak != nil {
		tweak(&cfg)
	}
	exec, err := lifecycle.New(cfg)
	if err != nil {
		t.Fatalf("lifecycle.New: %v", err)
	}
	e.exec, e.cfg = exec, cfg
	return e
}

// another builds a second worker on e's store, queues and handlers, with
// tweak applied to e's configuration.
func (e *env) another(t *testing.T, tweak func(*lifecycle.Config)) *lifecycle.Executor {
	t.Helper()
	cfg := e.cfg
	tweak(&cfg)
	exec, err := lifecycle.New(cfg)
	if err != nil {
		t.Fatalf("lifecycle.New: %v", err)
	}
	return exec
}

func inline(t *testing.T, kind, id string, payload string, maxAttempts int) string {
	t.Helper()
	var raw json.RawMessage
	if payload != "" {
		raw = json.RawMessage(payload)
	}
	body, err := token.Inline(kind, id, raw, maxAttempts)
	if err != nil {
		t.Fatalf("token.Inline: %v", err)
	}
	return body
}

func msg(id, body string) lifecycle.Message {
	return lifecycle.Message{ID: id, ReceiptHandle: "rh-" + id, Body: body, ReceiveCount: 1}
}

// processAsync runs Process in a goroutine; the returned func waits for it.
func (e *env) processAsync(ctx context.Context, m lifecycle.Message) func() lifecycle.Result {
	done := make(chan lifecycle.Result, 1)
	go func() { done <- e.exec.Process(ctx, nil, m) }()
	return func() lifecycle.Result { return <-done }
}

func (e *env) get(t *testing.T, id string) lease.Task {
	t.Helper()
	task, err := e.store.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	return task
}

func TestInlineTaskSucceedsWithTwoWrites(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	var seen lease.Task
	e.handlers["echo"] = func(_ context.Context, task lease.Task) ([]byte, error) {
		seen = task
		return task.Payload, nil
	}
	res := e.exec.Process(t.Context(), nil, msg("m1", inline(t, "echo", "", `{"n":1}`, 0)))
	if !res.Ack || res.Outcome != lifecycle.OutcomeSucceeded {
		t.Fatalf("result = %+v, want acked success", res)
	}
	if seen.ID != "m1" || seen.Attempt != 1 || seen.Fence != 1 || seen.MaxAttempts != lifecycle.DefaultMaxAttempts {
		t.Errorf("handler saw %+v; want id from message id, attempt 1, fence 1, default max attempts", seen)
	}
	got := e.get(t, "m1")
	if got.Status != lease.StatusSucceeded || string(got.Result) != `{"n":1}` {
		t.Errorf("stored %s %q", got.Status, got.Result)
	}
	if c := e.store.Calls(); c.Writes != 2 || c.Reads != 1 { // the read is this test's Get
		t.Errorf("store calls = %+v, want 2 writes by the worker and only the test's read", c)
	}
}

func TestLongTaskRenewsLeaseAndVisibility(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	release := make(chan struct{})
	e.handlers["slow"] = func(ctx context.Context, task lease.Task) ([]byte, error) {
		select {
		case <-release:
			return []byte(`"done"`), nil
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
	wait := e.processAsync(t.Context(), msg("m1", inline(t, "slow", "long", "", 0)))
	// Run for 3x the 20s lease: a renewal every 10s.
	for i := range 6 {
		if err := e.clock.BlockUntilContext(t.Context(), 1); err != nil {
			t.Fatal(err)
		}
		e.clock.Advance(10 * time.Second)
		<-e.sqs.changed
		task := e.get(t, "long")
		if want := e.clock.Now().Add(20 * time.Second); !task.LeaseUntil.Equal(want) {
			t.Fatalf("renewal %d: lease until %s, want %s", i+1, task.LeaseUntil, want)
		}
	}
	close(release)
	res := wait()
	if !res.Ack || res.Outcome != lifecycle.OutcomeSucceeded {
		t.Fatalf("result = %+v", res)
	}
	changes := e.sqs.visibilityChanges()
	if len(changes) != 6 {
		t.Fatalf("visibility changed %d times, want 6", len(changes))
	}
	for _, c := range changes {
		if c.VisibilityTimeout != 30 || aws.ToString(c.ReceiptHandle) != "rh-m1" {
			t.Errorf("visibility change %+v, want 30s (lease + margin) on rh-m1", c)
		}
	}
	if got := e.get(t, "long"); got.Status != lease.StatusSucceeded || got.Attempt != 1 || got.Fence != 1 {
		t.Errorf("stored %+v", got)
	}
}

func TestTakenOverWorkerCannotFinish(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *lifecycle.Config) { c.Store = failingRenewals{c.Store} })
	proceed := make(chan struct{})
	started := make(chan struct{})
	cancelled := make(chan error, 1)
	e.handlers["k"] = func(ctx context.Context, task lease.Task) ([]byte, error) {
		close(started)
		<-ctx.Done()
		cancelled <- context.Cause(ctx)
		<-proceed // finish anyway, after the new holder did
		return []byte(`"stale"`), nil
	}
	wait := e.processAsync(t.Context(), msg("m1", inline(t, "k", "t1", "", 3)))
	// Renewals fail; once the lease runs out locally the handler is told.
	<-started
	// First renewal at 10s, retries every 2.5s, the lease runs out at 20s.
	for range 8 {
		if err := e.clock.BlockUntilContext(t.Context(), 1); err != nil {
			t.Fatal(err)
		}
		e.clock.Advance(2500 * time.Millisecond)
	}
	cause := <-cancelled
	if !errors.Is(cause, lifecycle.ErrLeaseLost) {
		t.Fatalf("handler cause = %v, want ErrLeaseLost", cause)
	}
	// Another worker takes over after expiry + skew and finishes first.
	e.clock.Advance(3 * time.Second)
	other, err := e.store.Claim(t.Context(), "t1", "w2")
	if err != nil {
		t.Fatalf("takeover: %v", err)
	}
	if _, err := e.store.Finish(t.Context(), other.LeaseOf(), []byte(`"fresh"`)); err != nil {
		t.Fatalf("new holder finish: %v", err)
	}
	close(proceed)
	res := wait()
	if res.Outcome != lifecycle.OutcomeLeaseLost || !res.Ack {
		t.Errorf("old holder result = %+v, want lease lost, acked", res)
	}
	if sent := e.sqs.sentTo(workURL); len(sent) != 0 {
		t.Errorf("tokens sent for a finished task: %+v", sent)
	}
	if got := e.get(t, "t1"); string(got.Result) != `"fresh"` || got.Fence != 2 {
		t.Errorf("stored result %s fence %d, want the new holder's", got.Result, got.Fence)
	}
}

func TestFailingHandlerBacksOffThenFails(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	calls := 0
	e.handlers["flaky"] = func(context.Context, lease.Task) ([]byte, error) {
		calls++
		return nil, fmt.Errorf("boom %d", calls)
	}
	body := inline(t, "flaky", "f1", "", 4)
	var delays []int32
	for attempt := 1; ; attempt++ {
		before := len(e.sqs.sentTo(workURL))
		res := e.exec.Process(t.Context(), nil, msg(fmt.Sprintf("m%d", attempt), body))
		if !res.Ack {
			t.Fatalf("attempt %d not acked: %+v", attempt, res)
		}
		task := e.get(t, "f1")
		if task.Status == lease.StatusFailed {
			if attempt != 4 || res.Outcome != lifecycle.OutcomeFailed {
				t.Fatalf("failed after attempt %d with %s, want 4", attempt, res.Outcome)
			}
			if task.Error != "boom 4" || len(task.History) != 4 {
				t.Errorf("error %q, history %d entries", task.Error, len(task.History))
			}
			break
		}
		sent := e.sqs.sentTo(workURL)
		if len(sent) != before+1 || task.Status != lease.StatusPending {
			t.Fatalf("attempt %d: %d tokens sent, status %s", attempt, len(sent)-before, task.Status)
		}
		next := sent[before]
		delays = append(delays, next.DelaySeconds)
		if want := token.Ref("f1"); aws.ToString(next.MessageBody) != want {
			t.Fatalf("re-sent body %q, want %q", aws.ToString(next.MessageBody), want)
		}
		// A copy arriving before the backoff has passed does not run the
		// handler; it is sent again with the time still to wait.
		if res := e.exec.Process(t.Context(), nil, msg("early", aws.ToString(next.MessageBody))); !res.Ack {
			t.Fatalf("early token not handled: %+v", res)
		}
		if calls != attempt {
			t.Fatalf("handler ran before its backoff was over")
		}
		if again := e.sqs.sentTo(workURL); len(again) != before+2 || again[before+1].DelaySeconds != next.DelaySeconds {
			t.Fatalf("early token re-sent as %+v", again[before+1:])
		}
		e.clock.Advance(time.Duration(next.DelaySeconds) * time.Second)
		body = aws.ToString(next.MessageBody)
	}
	for i := 1; i < len(delays); i++ {
		if delays[i] < delays[i-1] {
			t.Errorf("delays shrink: %v", delays)
		}
	}
	if delays[len(delays)-1] <= delays[0] {
		t.Errorf("delays do not grow: %v", delays)
	}
}

func TestPanicIsRecordedAsFailure(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	e.handlers["p"] = func(context.Context, lease.Task) ([]byte, error) { panic("kaboom") }
	res := e.exec.Process(t.Context(), nil, msg("m1", inline(t, "p", "p1", "", 1)))
	got := e.get(t, "p1")
	if !res.Ack || got.Status != lease.StatusFailed || !strings.Contains(got.Error, "kaboom") {
		t.Errorf("result %+v, stored %s %q", res, got.Status, got.Error)
	}
}

func TestDeadlineReleasesLeaseForImmediateRetry(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *lifecycle.Config) {
		c.LeaseDuration, c.RenewBefore = 60*time.Second, 20*time.Second
	})
	e.store = nil // the config captured it; use the executor's store through Get below
	cfgStore := e.exec.Config().Store
	causes := make(chan error, 2)
	e.handlers["stuck"] = func(ctx context.Context, task lease.Task) ([]byte, error) {
		if task.Attempt > 1 {
			return []byte(`"second time lucky"`), nil
		}
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return nil, ctx.Err()
	}
	ctx, cancel := clockwork.WithDeadline(t.Context(), e.clock, epoch.Add(30*time.Second))
	defer cancel()
	wait := e.processAsync(ctx, msg("m1", inline(t, "stuck", "d1", "", 3)))
	if err := e.clock.BlockUntilContext(t.Context(), 3); err != nil { // renewer, deadline, ctx
		t.Fatal(err)
	}
	e.clock.Advance(25 * time.Second) // deadline 30s minus the 5s margin
	if cause := <-causes; !errors.Is(cause, lifecycle.ErrDeadline) {
		t.Fatalf("cause = %v, want ErrDeadline", cause)
	}
	res := wait()
	if !res.Ack || res.Outcome != lifecycle.OutcomeReleased {
		t.Fatalf("result = %+v", res)
	}
	task, err := cfgStore.Get(t.Context(), "d1")
	if err != nil || task.Status != lease.StatusPending || task.LeaseOwner != "" || !task.RunAt.Equal(e.clock.Now()) {
		t.Fatalf("after deadline: %+v %v, want PENDING now without a lease", task, err)
	}
	sent := e.sqs.sentTo(workURL)
	if len(sent) != 1 || sent[0].DelaySeconds != 0 {
		t.Fatalf("tokens sent %+v, want one without delay", sent)
	}
	// The next attempt starts at once, without waiting for the lease to expire.
	res = e.exec.Process(t.Context(), nil, msg("m2", aws.ToString(sent[0].MessageBody)))
	if res.Outcome != lifecycle.OutcomeSucceeded {
		t.Fatalf("next attempt = %+v", res)
	}
}

func TestLeasedTaskHidesMessage(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	if _, err := e.store.CreateClaimed(t.Context(), lease.NewTask{ID: "busy", Kind: "k", MaxAttempts: 3}, "elsewhere"); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(5 * time.Second)
	res := e.exec.Process(t.Context(), nil, msg("m1", token.Ref("busy")))
	if res.Ack {
		t.Fatal("message for a leased task acked")
	}
	changes := e.sqs.visibilityChanges()
	// remaining until takeover = 20s lease - 5s + 2s skew = 17s, plus a 10s margin
	if len(changes) != 1 || changes[0].VisibilityTimeout != 27 {
		t.Fatalf("visibility changes %+v, want one of 27s", changes)
	}
}

func TestFinishedTaskDuplicateIsAcked(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	runs := 0
	e.handlers["once"] = func(context.Context, lease.Task) ([]byte, error) { runs++; return nil, nil }
	body := inline(t, "once", "o1", "", 0)
	for i := range 2 {
		if res := e.exec.Process(t.Context(), nil, msg("m1", body)); !res.Ack {
			t.Fatalf("delivery %d not acked: %+v", i+1, res)
		}
	}
	if runs != 1 {
		t.Errorf("handler ran %d times, want 1", runs)
	}
}

func TestExpiredLastAttemptFails(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	if _, err := e.store.CreateClaimed(t.Context(), lease.NewTask{ID: "x1", Kind: "k", MaxAttempts: 1}, "crashed"); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(23 * time.Second)
	res := e.exec.Process(t.Context(), nil, msg("m1", token.Ref("x1")))
	got := e.get(t, "x1")
	if !res.Ack || got.Status != lease.StatusFailed || !strings.Contains(got.Error, "expired") {
		t.Errorf("result %+v, stored %s %q", res, got.Status, got.Error)
	}
}

func TestCancelRequestedBeforeTakeoverIsHonoured(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	if _, err := e.store.CreateClaimed(t.Context(), lease.NewTask{ID: "c1", Kind: "k", MaxAttempts: 3}, "vanished"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.RequestCancel(t.Context(), "c1"); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(23 * time.Second)
	ran := false
	e.handlers["k"] = func(context.Context, lease.Task) ([]byte, error) { ran = true; return nil, nil }
	res := e.exec.Process(t.Context(), nil, msg("m1", token.Ref("c1")))
	if got := e.get(t, "c1"); ran || !res.Ack || got.Status != lease.StatusCancelled {
		t.Errorf("ran=%v result %+v status %s; want CANCELLED without running", ran, res, got.Status)
	}
}

func TestCancelRequestedWhileRunningCancelsHandler(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	started := make(chan struct{})
	causes := make(chan error, 1)
	e.handlers["k"] = func(ctx context.Context, task lease.Task) ([]byte, error) {
		close(started)
		<-ctx.Done()
		causes <- context.Cause(ctx)
		return nil, ctx.Err()
	}
	wait := e.processAsync(t.Context(), msg("m1", inline(t, "k", "c2", "", 3)))
	<-started
	if _, err := e.store.RequestCancel(t.Context(), "c2"); err != nil {
		t.Fatal(err)
	}
	if err := e.clock.BlockUntilContext(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(10 * time.Second) // one renewal period
	if cause := <-causes; !errors.Is(cause, lifecycle.ErrCancelRequested) {
		t.Fatalf("cause = %v", cause)
	}
	res := wait()
	if got := e.get(t, "c2"); res.Outcome != lifecycle.OutcomeCancelled || got.Status != lease.StatusCancelled {
		t.Errorf("result %+v, status %s", res, got.Status)
	}
}

// A cancel that lands while the handler runs, after its last renewal (here
// before the first), meets a handler that asks to run again: a snooze of a
// day, or an error retried after a backoff. The flag dooms the task, so the
// worker ends it CANCELLED at once instead of leaving it PENDING until its
// next claim, a day later (issue 33), and sends no token for the next run.
func TestCancelAfterTheLastRenewalEndsATaskReleasedToRunAgain(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
	}{
		{"snooze", &durable.SnoozeError{Delay: 24 * time.Hour}},
		{"retry", errors.New("transient")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, nil)
			id := "late-cancel-" + tc.name
			e.handlers["k"] = func(ctx context.Context, task lease.Task) ([]byte, error) {
				if _, err := e.store.RequestCancel(context.WithoutCancel(ctx), task.ID); err != nil {
					t.Errorf("RequestCancel: %v", err)
				}
				return nil, tc.err
			}
			res := e.exec.Process(t.Context(), nil, msg("m1", inline(t, "k", id, "", 3)))
			got := e.get(t, id)
			if !res.Ack || res.Outcome != lifecycle.OutcomeCancelled || got.Status != lease.StatusCancelled || !got.CancelRequested {
				t.Fatalf("result %+v, task %s flag %t; want acked, cancelled, CANCELLED with the flag", res, got.Status, got.CancelRequested)
			}
			if sent := e.sqs.sentTo(workURL); len(sent) != 0 {
				t.Errorf("%d tokens sent for a cancelled task, want none", len(sent))
			}
		})
	}
}

// flaglessGets is the store as a worker's read made before a cancel saw
// it: Get leaves the cancel flag out.
type flaglessGets struct{ *leasemem.Store }

func (s flaglessGets) Get(ctx context.Context, id string) (lease.Task, error) {
	t, err := s.Store.Get(ctx, id)
	t.CancelRequested = false
	return t, err
}

// A callback wait whose deadline passed, read before a cancel flagged it:
// the timeout's write makes the task PENDING again (after a backoff) and
// finds the flag, so the worker cancels it at once (issue 33).
func TestCancelAfterTheReadEndsATimedOutCallbackWait(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *lifecycle.Config) { c.Store = flaglessGets{c.Store.(*leasemem.Store)} })
	ctx := t.Context()
	held, err := e.store.CreateClaimed(ctx, lease.NewTask{ID: "cb1", Kind: "k", MaxAttempts: 3}, "w0")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.RequestCancel(ctx, "cb1"); err != nil { // flags the running attempt
		t.Fatal(err)
	}
	if _, err := e.store.Suspend(ctx, held.LeaseOf(), lease.Wait{Mode: lease.WaitCallback, Until: e.clock.Now().Add(time.Minute), Nonce: "n1"}); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(2 * time.Minute)
	res := e.exec.Process(ctx, nil, msg("m1", token.Wake("cb1")))
	got := e.get(t, "cb1")
	if !res.Ack || res.Outcome != lifecycle.OutcomeCancelled || got.Status != lease.StatusCancelled {
		t.Fatalf("result %+v, task %s; want acked, cancelled, CANCELLED", res, got.Status)
	}
}

func TestBadInputIsRecordedNotRetried(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	e.handlers["ok"] = func(context.Context, lease.Task) ([]byte, error) { return []byte(`1`), nil }
	big := `{"blob":"` + strings.Repeat("x", lease.MaxPayloadBytes) + `"}`
	cases := []struct {
		name, body string
		onTask     bool // recorded as a FAILED task rather than dead-lettered
		reason     string
	}{
		{"malformed JSON", `{"v":1,`, false, "malformed"},
		{"not an object", `[1,2]`, false, "malformed"},
		{"unknown version", `{"v":7,"kind":"ok"}`, false, "version 7"},
		{"missing version", `{"kind":"ok"}`, false, `"v"`},
		{"missing kind and id", `{"v":1}`, false, "missing field"},
		{"misspelt field", `{"v":1,"kind":"ok","paylod":{}}`, false, "paylod"},
		{"unknown task", token.Ref("nope"), false, "not found"},
		{"id with a control character", `{"v":1,"id":"a\u001bb"}`, false, `"id" contains U+001B`},
		{"inline id with a bidi override", `{"v":1,"kind":"ok","id":"a\u202eb"}`, false, `"id" contains U+202E`},
		{"oversize payload", `{"v":1,"kind":"ok","id":"big","payload":` + big + `}`, true, "payload is"},
	}
	msgs := make([]lifecycle.Message, 0, len(cases)+1)
	for i, c := range cases {
		msgs = append(msgs, msg(fmt.Sprintf("bad%d", i), c.body))
	}
	msgs = append(msgs, msg("good", inline(t, "ok", "", "", 0)))
	results := e.exec.ProcessBatch(t.Context(), nil, msgs)
	dead := e.sqs.sentTo(dlqURL)
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := results[i]
			if !r.Ack {
				t.Errorf("not acked (would be retried): %+v", r)
			}
			if !strings.Contains(r.Reason, c.reason) {
				t.Errorf("reason %q, want it to mention %q", r.Reason, c.reason)
			}
			if c.onTask {
				id := map[string]string{"oversize payload": "big"}[c.name]
				got := e.get(t, id)
				if got.Status != lease.StatusFailed || !strings.Contains(got.Error, c.reason) || len(got.Payload) != 0 && c.name == "oversize payload" {
					t.Errorf("task %s: %s %q", id, got.Status, got.Error)
				}
				// The task is recorded without its payload, so the body
				// must also go to the dead-letter queue: it is not lost.
				if !strings.Contains(got.Error, "dead-letter queue") {
					t.Errorf("task %s: error %q does not say where the body went", id, got.Error)
				}
			}
			found := false
			for _, d := range dead {
				if aws.ToString(d.MessageBody) == c.body {
					found = true
					if !strings.Contains(aws.ToString(d.MessageAttributes[lifecycle.AttrReason].StringValue), c.reason) {
						t.Errorf("dead-letter reason %q", aws.ToString(d.MessageAttributes[lifecycle.AttrReason].StringValue))
					}
				}
			}
			if !found {
				t.Errorf("not forwarded to the dead-letter queue")
			}
		})
	}
	if last := results[len(results)-1]; !last.Ack || last.Outcome != lifecycle.OutcomeSucceeded {
		t.Errorf("good message: %+v", last)
	}
}

func TestConfigRejectsImpossibleTiming(t *testing.T) {
	t.Parallel()
	base := func() lifecycle.Config {
		return lifecycle.Config{
			Store: leasemem.New(lease.Options{}), SQS: newFakeSQS(), QueueURL: workURL, Owner: "w",
			Handlers: func(string) (lifecycle.Handler, bool) { return nil, false },
		}
	}
	cases := []struct {
		name  string
		tweak func(*lifecycle.Config)
	}{
		{"lease shorter than twice the renewal", func(c *lifecycle.Config) { c.LeaseDuration, c.RenewBefore = 15*time.Second, 10*time.Second }},
		{"negative max attempts", func(c *lifecycle.Config) { c.DefaultMaxAttempts = -1 }},
		{"no store", func(c *lifecycle.Config) { c.Store = nil }},
		{"no queue", func(c *lifecycle.Config) { c.QueueURL = "" }},
		{"lease beyond SQS visibility", func(c *lifecycle.Config) { c.LeaseDuration, c.RenewBefore = 13*time.Hour, time.Hour }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cfg := base()
			c.tweak(&cfg)
			if _, err := lifecycle.New(cfg); !errors.Is(err, lifecycle.ErrConfig) {
				t.Errorf("New = %v, want ErrConfig", err)
			}
		})
	}
	if _, err := lifecycle.New(base()); err != nil {
		t.Errorf("defaults rejected: %v", err)
	}
}
