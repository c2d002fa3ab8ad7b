package dispatch_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/dispatch"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/leasemem"
)

// SweepLoop on a fake clock: a task whose token was lost and a task whose
// holder died are each dispatched by the first sweep at or after their
// sweep-index time, so within that time plus one period; two processes
// sweeping the same table send one token per task per grace, not two.
func TestSweepLoopRecoversWithinTheBound(t *testing.T) {
	t.Parallel()
	const (
		leaseFor = 20 * time.Second
		skew     = 2 * time.Second
		every    = time.Minute
	)
	e := setupUnit(t)
	store := leasemem.New(lease.Options{Clock: e.clock, LeaseDuration: leaseFor, Skew: skew, DispatchGrace: grace})
	second, err := dispatch.New(dispatch.Config{Store: store, SQS: e.sqs, WorkQueueURL: workQueue, DispatchGrace: grace, Clock: e.clock})
	if err != nil {
		t.Fatal(err)
	}
	first, err := dispatch.New(dispatch.Config{Store: store, SQS: e.sqs, WorkQueueURL: workQueue, DispatchGrace: grace, Clock: e.clock})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	lost, err := store.Create(ctx, lease.NewTask{ID: "lost", Kind: "k", MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(7 * time.Second) // the holder claims a little later
	// A task stored PENDING (so in the sweep index) and claimed by a holder
	// that dies at once. The claim leaves its entry at run_at + grace, when
	// the lease is still within its skew and grace: the sweep then re-arms
	// it, and dispatches it at lease expiry + skew + grace.
	created, err := store.Create(ctx, lease.NewTask{ID: "held", Kind: "k", MaxAttempts: 3})
	if err != nil {
		t.Fatal(err)
	}
	held, err := store.Claim(ctx, "held", "dies-now")
	if err != nil {
		t.Fatal(err)
	}
	if !held.DispatchAt.Equal(created.RunAt.Add(grace)) {
		t.Fatalf("claimed task filed for %s, want its entry's %s", held.DispatchAt, created.RunAt.Add(grace))
	}
	due := map[string]time.Time{
		"lost": lost.RunAt.Add(grace),                // run_at + grace
		"held": held.LeaseUntil.Add(skew).Add(grace), // lease expiry + skew + grace
	}
	if !lost.DispatchAt.Equal(due["lost"]) {
		t.Fatalf("lost filed for %s, want %s", lost.DispatchAt, due["lost"])
	}

	loopCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { first.SweepLoop(loopCtx, every) })
	wg.Go(func() { second.SweepLoop(loopCtx, every) })
	defer func() {
		stop()
		wg.Wait()
	}()

	sentAt := map[string][]time.Time{}
	end := due["held"].Add(every)
	for {
		// Both loops have swept and wait for their next period.
		if err := e.clock.BlockUntilContext(ctx, 2); err != nil {
			t.Fatal(err)
		}
		now := e.clock.Now()
		for _, tok := range e.sqs.take() {
			sentAt[tok.ID] = append(sentAt[tok.ID], now)
		}
		if !now.Before(end) {
			break
		}
		e.clock.Advance(every)
	}
	for id, at := range due {
		sends := sentAt[id]
		if len(sends) == 0 {
			t.Fatalf("%s: never dispatched (due at %s)", id, at)
		}
		// Unclaimed, a task gets a token once per grace, however many
		// processes sweep.
		for i := 1; i < len(sends); i++ {
			if sends[i].Sub(sends[i-1]) < grace {
				t.Fatalf("%s: tokens at %v, closer than the grace %s", id, sends, grace)
			}
		}
		if sends[0].Before(at) || sends[0].After(at.Add(every)) {
			t.Errorf("%s: dispatched at %s, want within [%s, %s]", id, sends[0], at, at.Add(every))
		}
	}
	// The claim the token brings takes the dead holder's task over.
	if _, err := store.Claim(ctx, "held", "w2"); err != nil {
		t.Fatalf("claim of the recovered task: %v", err)
	}
}
