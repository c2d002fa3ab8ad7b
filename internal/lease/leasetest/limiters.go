package leasetest

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/limiter"
	"github.com/leasehold/leasehold/internal/lease/query"
)

// A rate window allows limit starts and refuses the rest, also when many
// take at once; another window, or another key, counts on its own; bad
// arguments are refused; and a window is no task: List and Due see none.
func testRateWindows(t *testing.T, a *adminEnv) {
	key := a.id()
	window := a.now().Truncate(time.Second)
	for _, bad := range []struct {
		key   string
		per   time.Duration
		limit int
	}{{"", time.Second, 1}, {key, 0, 1}, {key, 1500 * time.Millisecond, 1}, {key, time.Second, 0}} {
		if _, err := a.admin.TakeStart(a.ctx, bad.key, window, bad.per, bad.limit); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("TakeStart(%q, %s, %d) = %v, want ErrInvalid", bad.key, bad.per, bad.limit, err)
		}
	}

	const limit, takers = 5, 16
	if got := allowedAtOnce(t, "TakeStart", takers, func() (bool, error) {
		return a.admin.TakeStart(a.ctx, key, window, time.Second, limit)
	}); got != limit {
		t.Fatalf("%d takers at once allowed %d starts, want the limit %d", takers, got, limit)
	}
	if ok, err := a.admin.TakeStart(a.ctx, key, window, time.Second, limit); err != nil || ok {
		t.Fatalf("a start over the limit = %t, %v; want refused", ok, err)
	}
	if ok, err := a.admin.TakeStart(a.ctx, key, window, time.Second, limit+1); err != nil || !ok {
		t.Fatalf("a start under a raised limit = %t, %v; want allowed", ok, err)
	}
	for name, take := range map[string]func() (bool, error){
		"the next window": func() (bool, error) { return a.admin.TakeStart(a.ctx, key, window.Add(time.Second), time.Second, 1) },
		"another key":     func() (bool, error) { return a.admin.TakeStart(a.ctx, key+"-other", window, time.Second, 1) },
	} {
		if ok, err := take(); err != nil || !ok {
			t.Errorf("%s's first start = %t, %v; want allowed", name, ok, err)
		}
	}

	for _, st := range []lease.Status{lease.StatusPending, lease.StatusRunning, lease.StatusSucceeded, lease.StatusFailed} {
		if got := a.listAll(st, 10); len(got) != 0 {
			t.Errorf("List(%s) of a table with rate windows and no task = %d items", st, len(got))
		}
	}
	for _, shard := range lease.Shards() {
		due, err := a.admin.Due(a.ctx, shard, a.now().Add(24*time.Hour), query.MaxDueLimit)
		if err != nil {
			t.Fatal(err)
		}
		if len(due) != 0 {
			t.Errorf("Due(%s) of a table with rate windows and no task = %v", shard, due)
		}
	}
}

// A redrive count allows limit redrives of its dead letter and refuses the
// rest, also when many take at once; a raised limit allows one more;
// another key counts on its own; bad arguments are refused; and a count is
// no task: List and Due see none.
func testRedriveCounts(t *testing.T, a *adminEnv) {
	key := a.id()
	for _, bad := range []struct {
		key   string
		limit int
	}{{"", 1}, {key, 0}} {
		if _, err := a.admin.TakeRedrive(a.ctx, bad.key, bad.limit); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("TakeRedrive(%q, %d) = %v, want ErrInvalid", bad.key, bad.limit, err)
		}
	}

	const limit, takers = 3, 8
	if got := allowedAtOnce(t, "TakeRedrive", takers, func() (bool, error) {
		return a.admin.TakeRedrive(a.ctx, key, limit)
	}); got != limit {
		t.Fatalf("%d takers at once allowed %d redrives, want the limit %d", takers, got, limit)
	}
	// A day later the count is still there (it is kept for days).
	a.clock.Advance(24 * time.Hour)
	if ok, err := a.admin.TakeRedrive(a.ctx, key, limit); err != nil || ok {
		t.Fatalf("a redrive over the limit = %t, %v; want refused", ok, err)
	}
	if ok, err := a.admin.TakeRedrive(a.ctx, key, limit+1); err != nil || !ok {
		t.Fatalf("a redrive under a raised limit = %t, %v; want allowed", ok, err)
	}
	if ok, err := a.admin.TakeRedrive(a.ctx, key+"-other", 1); err != nil || !ok {
		t.Errorf("another key's first redrive = %t, %v; want allowed", ok, err)
	}

	for _, st := range []lease.Status{lease.StatusPending, lease.StatusRunning, lease.StatusSucceeded, lease.StatusFailed} {
		if got := a.listAll(st, 10); len(got) != 0 {
			t.Errorf("List(%s) of a table with redrive counts and no task = %d items", st, len(got))
		}
	}
	for _, shard := range lease.Shards() {
		due, err := a.admin.Due(a.ctx, shard, a.now().Add(24*time.Hour), query.MaxDueLimit)
		if err != nil {
			t.Fatal(err)
		}
		if len(due) != 0 {
			t.Errorf("Due(%s) of a table with redrive counts and no task = %v", shard, due)
		}
	}
}

// A slot set gives max holders a slot each, also when many take at once,
// and refuses the rest; a holder taking again keeps its slot; a release
// frees one; a holder whose time passed by more than the skew loses its
// slot to a new one, but not before; sets of other keys are apart; bad
// arguments are refused; and a set is no task: List and Due see none.
func testSlots(t *testing.T, a *adminEnv) {
	key := a.id()
	until := a.now().Add(time.Minute)
	for _, bad := range []struct {
		key, holder string
		max         int
		until       time.Time
	}{{"", "h", 1, until}, {key, "", 1, until}, {key, "h", 0, until}, {key, "h", limiter.MaxSlots + 1, until}, {key, "h", 1, time.Time{}}} {
		if _, err := a.admin.AcquireSlot(a.ctx, bad.key, bad.holder, bad.max, bad.until); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("AcquireSlot(%q, %q, %d, %v) = %v, want ErrInvalid", bad.key, bad.holder, bad.max, bad.until, err)
		}
	}

	const max, takers = 3, 12
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		holder []string
		errs   = make(chan error, takers)
	)
	for i := range takers {
		wg.Go(func() {
			h := limiter.SlotHolder(fmt.Sprintf("task-%d", i), 1)
			ok, err := a.admin.AcquireSlot(a.ctx, key, h, max, until)
			if err != nil {
				errs <- err
				return
			}
			if ok {
				mu.Lock()
				holder = append(holder, h)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("AcquireSlot: %v", err)
	}
	if len(holder) != max {
		t.Fatalf("%d takers at once got %d slots, want %d", takers, len(holder), max)
	}
	take := func(h string, want bool) {
		t.Helper()
		if ok, err := a.admin.AcquireSlot(a.ctx, key, h, max, a.now().Add(time.Minute)); err != nil || ok != want {
			t.Fatalf("AcquireSlot(%s) = %t, %v; want %t", h, ok, err, want)
		}
	}
	take("late@1", false)
	take(holder[0], true) // a holder taking again keeps its slot (until a minute from now)
	if err := a.admin.ReleaseSlot(a.ctx, key, holder[0]); err != nil {
		t.Fatal(err)
	}
	if err := a.admin.ReleaseSlot(a.ctx, key, "never@1"); err != nil {
		t.Fatalf("releasing a slot never held: %v", err)
	}
	take("late@1", true)
	take("later@1", false)
	if ok, err := a.admin.AcquireSlot(a.ctx, key+"-other", "later@1", 1, until); err != nil || !ok {
		t.Fatalf("another key's first slot = %t, %v", ok, err)
	}

	// The holders' time passes; within the skew they keep their slots,
	// past it a new holder takes one. (holder[0] was released; holder[1],
	// holder[2] and late@1 hold until a minute from the first takes.)
	a.clock.Advance(time.Minute + a.opts.Skew/2)
	take("later@1", false)
	a.clock.Advance(a.opts.Skew)
	take("later@1", true)
	take("latest@1", true) // the other expired ones made room too
	take("last@1", true)
	take("over@1", false)

	if err := a.admin.ReleaseSlot(a.ctx, a.id(), "h@1"); err != nil {
		t.Fatalf("releasing a slot of a key never used: %v", err)
	}
	for _, st := range []lease.Status{lease.StatusPending, lease.StatusRunning, lease.StatusSucceeded, lease.StatusFailed} {
		if got := a.listAll(st, 10); len(got) != 0 {
			t.Errorf("List(%s) of a table with slot sets and no task = %d items", st, len(got))
		}
	}
	for _, shard := range lease.Shards() {
		due, err := a.admin.Due(a.ctx, shard, a.now().Add(24*time.Hour), query.MaxDueLimit)
		if err != nil {
			t.Fatal(err)
		}
		if len(due) != 0 {
			t.Errorf("Due(%s) of a table with slot sets and no task = %v", shard, due)
		}
	}
}

// testLostSlots: FreeLostSlots gives back the slots of attempts that are
// over or lost, among the oldest holders it checks (earliest time first),
// and keeps those of attempts that still hold their task's lease, whatever
// the slots' own times.
func testLostSlots(t *testing.T, a *adminEnv) {
	key := a.id()
	far := a.now().Add(time.Hour) // no slot's time passes here
	take := func(h string, until time.Time, want bool) {
		t.Helper()
		if ok, err := a.admin.AcquireSlot(a.ctx, key, h, 3, until); err != nil || ok != want {
			t.Fatalf("AcquireSlot(%s) = %t, %v; want %t", h, ok, err, want)
		}
	}
	free := func(checks, want int) {
		t.Helper()
		if n, err := a.admin.FreeLostSlots(a.ctx, key, checks); err != nil || n != want {
			t.Fatalf("FreeLostSlots(%d) = %d, %v; want %d", checks, n, err, want)
		}
	}
	if _, err := a.admin.FreeLostSlots(a.ctx, key, 0); !errors.Is(err, lease.ErrInvalid) {
		t.Errorf("FreeLostSlots with no check: %v, want ErrInvalid", err)
	}
	free(2, 0) // no set yet

	live := a.createClaimed(a.newTask(), "w1")
	done := a.createClaimed(a.newTask(), "w2")
	take(limiter.SlotHolder(done.ID, done.Fence), far, true)
	take(limiter.SlotHolder(a.id(), 1), far.Add(time.Minute), true) // a task that is not there
	take(limiter.SlotHolder(live.ID, live.Fence), far.Add(2*time.Minute), true)
	take(limiter.SlotHolder(a.id(), 1), far, false) // full
	free(4, 1)                                      // the missing task's
	a.finish(done, nil)
	take(limiter.SlotHolder(a.id(), 1), far.Add(time.Minute), true)
	free(1, 1) // the finished attempt's, the oldest
	free(1, 1) // the missing task's, the next
	free(4, 0) // the live one's stays
	take(limiter.SlotHolder(a.id(), 1), far, true)

	// The live attempt's lease runs out: within the skew it keeps its
	// slot, past it the slot is given back.
	a.clock.Advance(leaseFor + a.opts.Skew/2)
	free(4, 1) // the missing task's, not the live one's yet
	a.clock.Advance(a.opts.Skew)
	free(4, 1)
	free(4, 0)

	// A task claimed again: the old attempt's slot is lost, the new one's
	// is not.
	again, err := a.store.Claim(a.ctx, live.ID, "w3")
	if err != nil || again.Fence != live.Fence+1 {
		t.Fatalf("claim after the lease ran out: fence %d, %v", again.Fence, err)
	}
	take(limiter.SlotHolder(live.ID, live.Fence), far, true) // a late taker of the old attempt
	take(limiter.SlotHolder(again.ID, again.Fence), far, true)
	free(4, 1)
	free(4, 0)
}

// allowedAtOnce runs take from takers goroutines at once and returns how
// many it allowed; an error fails the test, named by op.
func allowedAtOnce(t *testing.T, op string, takers int, take func() (bool, error)) int {
	t.Helper()
	var (
		wg      sync.WaitGroup
		allowed atomic.Int32
		errs    = make(chan error, takers)
	)
	for range takers {
		wg.Go(func() {
			ok, err := take()
			if err != nil {
				errs <- err
				return
			}
			if ok {
				allowed.Add(1)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("%s: %v", op, err)
	}
	return int(allowed.Load())
}
