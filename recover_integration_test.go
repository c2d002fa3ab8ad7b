package leasehold_test

// Recovery by Worker.Run alone, against the local AWS stack: no dispatch
// function, no intake, no other process. One task's message is lost before
// any worker saw it; another task's holder dies mid-run. The worker's own
// sweep must bring both back within the documented bound.

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/awstest"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/dynamo"
)

func TestRunRecoversLostMessagesAndDeadHolders(t *testing.T) {
	t.Parallel()
	e := setupStack(t)
	const (
		leaseFor = 2 * time.Second
		renew    = time.Second
		skew     = 500 * time.Millisecond
		grace    = time.Second
		every    = 500 * time.Millisecond
	)
	// slack covers what the bound leaves out: one sweep's run time, the
	// receive, the claim and the handler on the emulator. It scales with
	// LEASEHOLD_TEST_TIMESCALE (a busy machine is slower, not wrong); the
	// lease, grace and sweep period are what is tested and do not.
	slack := awstest.Scale(6 * time.Second)
	// The store that plays the lost sender and the dead holder has the
	// worker's timing, so it files the tasks in the sweep index alike.
	store := dynamo.New(dynamodb.NewFromConfig(e.cfg), e.table, lease.Options{
		LeaseDuration: leaseFor, Skew: skew, DispatchGrace: grace,
	})
	hs := leasehold.NewHandlers()
	var (
		mu  sync.Mutex
		ran = map[string]int{}
	)
	leasehold.Handle(hs, "note", func(_ context.Context, task *leasehold.Task[string]) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		ran[task.ID]++
		return "noted " + task.Payload, nil
	})
	w := e.worker(t, leasehold.WorkerConfig{Handlers: hs, LeaseDuration: leaseFor, RenewBefore: renew, ClockSkew: skew, DispatchGrace: grace,
		SweepEvery: every, LongPoll: time.Second})

	ctx, cancel := call(t)
	defer cancel()
	start := time.Now()
	// A PENDING task due now whose token was never sent.
	if _, err := store.Create(ctx, lease.NewTask{ID: "lost-message", Kind: "note", Payload: []byte(`"a"`), MaxAttempts: 3}); err != nil {
		t.Fatal(err)
	}
	// A RUNNING task whose holder claimed it and then died: no renewal, no
	// finish, no message anywhere. It was stored PENDING first, so it has a
	// sweep entry; the claim left it there, due while the lease is still
	// live, so the sweep re-arms it before it dispatches it. (A task created
	// RUNNING from an inline token has no entry: its own message brings it
	// back, see docs/running.md.)
	if _, err := store.Create(ctx, lease.NewTask{ID: "dead-holder", Kind: "note", Payload: []byte(`"b"`), MaxAttempts: 3}); err != nil {
		t.Fatal(err)
	}
	held, err := store.Claim(ctx, "dead-holder", "gone-worker")
	if err != nil {
		t.Fatal(err)
	}
	// The documented bounds: sweep-index time plus one period, plus slack.
	bounds := map[string]time.Duration{
		"lost-message": grace + every + slack,
		"dead-holder":  held.LeaseUntil.Sub(start) + skew + grace + every + slack,
	}

	runCtx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- w.Run(runCtx)
	}()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run after stop: %v", err)
		}
	}()

	for id, bound := range bounds {
		deadline := start.Add(bound)
		for {
			task := e.get(t, id)
			if task.Status == lease.StatusSucceeded {
				t.Logf("%s recovered after %s (bound %s)", id, time.Since(start).Round(time.Millisecond), bound)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s not recovered within %s: %s, attempt %d", id, bound, task.Status, task.Attempt)
			}
			time.Sleep(100 * time.Millisecond) // poll interval, not a pass criterion
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if ran["lost-message"] != 1 || ran["dead-holder"] != 1 {
		t.Errorf("handler runs %v, want one each", ran)
	}
	if got := e.get(t, "dead-holder"); got.Attempt != 2 || got.Fence != 2 {
		t.Errorf("dead-holder: attempt %d, fence %d; want the takeover's 2 and 2", got.Attempt, got.Fence)
	}
}

// The control: with no sweep (SweepEvery < 0) nothing dispatches a task whose message
// was lost, so the recovery above is the sweep's doing. The window is the
// bound of the test above.
func TestRunWithoutSweepLeavesLostTasksAlone(t *testing.T) {
	t.Parallel()
	e := setupStack(t)
	const grace, every = time.Second, 500 * time.Millisecond
	store := dynamo.New(dynamodb.NewFromConfig(e.cfg), e.table, lease.Options{DispatchGrace: grace})
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "note", func(_ context.Context, task *leasehold.Task[string]) (string, error) { return task.Payload, nil })
	w := e.worker(t, leasehold.WorkerConfig{Handlers: hs, DispatchGrace: grace, SweepEvery: -1, LongPoll: time.Second})
	ctx, cancel := call(t)
	defer cancel()
	if _, err := store.Create(ctx, lease.NewTask{ID: "lost-message", Kind: "note", Payload: []byte(`"a"`), MaxAttempts: 3}); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithTimeout(t.Context(), grace+every+6*time.Second)
	defer stop()
	if err := w.Run(runCtx); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := e.get(t, "lost-message"); got.Status != lease.StatusPending || got.Attempt != 0 {
		t.Fatalf("without a sweep the task became %s (attempt %d)", got.Status, got.Attempt)
	}
}
