package lifecycle_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/leasehold/leasehold/internal/durable"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lifecycle"
)

// A step's short delay between tries that would run past the handler's
// deadline is not waited out in the process (the deadline would end the
// attempt mid-wait): the step records the next try's time and snoozes the
// task instead.
func TestStepDelayPastTheDeadlineSnoozes(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	tries := 0
	e.handlers["flaky"] = func(ctx context.Context, task lease.Task) ([]byte, error) {
		return durable.StepPolicyOf(ctx, "s", durable.OpStep, durable.StepPolicy{MaxAttempts: 2, Initial: 4 * time.Second},
			func(context.Context) ([]byte, error) { tries++; return nil, errors.New("down") })
	}
	// The handler's deadline is 12s less the 5s margin away: a 4s wait
	// and as long again do not fit.
	ctx, cancel := clockwork.WithDeadline(t.Context(), e.clock, epoch.Add(12*time.Second))
	defer cancel()
	done := e.processAsync(ctx, msg("m1", inline(t, "flaky", "f1", "", 3)))
	res := make(chan lifecycle.Result, 1)
	go func() { res <- done() }()
	select {
	case r := <-res:
		if r.Outcome != lifecycle.OutcomeSnoozed {
			t.Fatalf("outcome %s, want snoozed", r.Outcome)
		}
	case <-time.After(10 * time.Second): // a guard: the fake clock never ends a wait by itself
		t.Fatal("the step waited in the process past the handler's deadline")
	}
	got := e.get(t, "f1")
	if tries != 1 || got.Status != lease.StatusPending || len(got.Steps) != 1 || got.Steps[0].Name != "s#retry1" || !got.RunAt.Equal(epoch.Add(4*time.Second)) {
		t.Fatalf("after %d tries: %s steps %+v run at %s, want PENDING with s#retry1 at +4s", tries, got.Status, got.Steps, got.RunAt)
	}
}
