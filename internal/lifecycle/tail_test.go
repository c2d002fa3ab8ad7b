package lifecycle_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/leasehold/leasehold/internal/durable"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lifecycle"
)

// slowTail is a store whose tail reads take step of the fake clock each,
// while slow is set: a long history read on a loaded table.
type slowTail struct {
	lease.Store
	clock *clockwork.FakeClock
	step  time.Duration
	slow  atomic.Bool
	reads atomic.Int32
}

func (s *slowTail) ReadSteps(ctx context.Context, id string, from, n int) ([]lease.Step, error) {
	if s.slow.Load() {
		s.reads.Add(1)
		s.clock.Advance(s.step)
	}
	return s.Store.ReadSteps(ctx, id, from, n)
}

// A history read longer than the lease (3 pages of 8s against a lease of
// 20s) renews the lease on the way, so the run that follows still trusts
// it: its replay takes the recorded results and its new step runs.
func TestLongHistoryReadRenewsTheLease(t *testing.T) {
	t.Parallel()
	var st *slowTail
	e := setup(t, func(c *lifecycle.Config) {
		st = &slowTail{Store: c.Store, clock: c.Clock.(*clockwork.FakeClock), step: 8 * time.Second}
		c.Store = st
	})
	const n = 300
	var runs, after, handler atomic.Int32
	e.handlers["long"] = func(ctx context.Context, _ lease.Task) ([]byte, error) {
		first := handler.Add(1) == 1
		for i := range n {
			if _, err := durable.StepOf(ctx, fmt.Sprint("s", i), func(context.Context) ([]byte, error) {
				runs.Add(1)
				return []byte(fmt.Sprint(i)), nil
			}); err != nil {
				return nil, err
			}
		}
		if first {
			return nil, errors.New("fail after the steps: the retry replays them")
		}
		return durable.StepOf(ctx, "after", func(context.Context) ([]byte, error) {
			after.Add(1)
			return []byte(`"ok"`), nil
		})
	}
	body := inline(t, "long", "long", "", 3)
	e.exec.Process(t.Context(), nil, msg("long", body))
	if got := e.get(t, "long"); got.Status != lease.StatusPending || !got.Spilled {
		t.Fatalf("after the first run: %s, spilled %v; want PENDING and spilled", got.Status, got.Spilled)
	}
	e.clock.Advance(time.Hour) // past the retry's backoff
	st.slow.Store(true)
	e.exec.Process(t.Context(), nil, msg("long", body))
	got := e.get(t, "long")
	if got.Status != lease.StatusSucceeded || runs.Load() != n || after.Load() != 1 {
		t.Fatalf("task %s %q; %d step functions ran, the new one %d times; want SUCCEEDED, %d and once",
			got.Status, got.Error, runs.Load(), after.Load(), n)
	}
	if reads := st.reads.Load(); reads != 3 {
		t.Fatalf("%d tail reads, want 3 (200 operations of the tail: 100, 100, then a short page)", reads)
	}
}
