package leasehold

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/jonboulle/clockwork"

	"github.com/leasehold/leasehold/internal/defaults"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/leasemem"
)

// memClientSQS is recordingSQS with the lookup a client makes.
type memClientSQS struct{ recordingSQS }

func (*memClientSQS) GetQueueUrl(_ context.Context, in *sqs.GetQueueUrlInput, _ ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error) {
	return &sqs.GetQueueUrlOutput{QueueUrl: aws.String("https://sqs.test/" + aws.ToString(in.QueueName))}, nil
}

func memClient(store *leasemem.Store, clock clockwork.Clock) *Client {
	return &Client{store: store, sqs: &memClientSQS{}, table: "mem", queueURL: "https://sqs.test/work",
		opts: clientOptions{callTimeout: time.Second, maxAttempts: defaults.MaxAttempts, clock: clock}}
}

// A parent cancelled while it waits: every child that has not ended is
// cancelled, including those whose token is still on the queue (no item
// yet: a placeholder naming the parent), and a task that merely holds a
// child's id is left alone.
func TestCancelReachesChildrenWithoutItems(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	clock := clockwork.NewFakeClockAt(time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC))
	store := leasemem.New(lease.Options{Clock: clock})
	c := memClient(store, clock)

	if _, err := store.Create(ctx, lease.NewTask{ID: "p", Kind: "fan", MaxAttempts: 3}); err != nil {
		t.Fatal(err)
	}
	p, err := store.Claim(ctx, "p", "w1")
	if err != nil {
		t.Fatal(err)
	}
	// p/4 is another task's id (created before the parent spawned).
	if _, err := store.Create(ctx, lease.NewTask{ID: "p/4", Kind: "other", MaxAttempts: 1}); err != nil {
		t.Fatal(err)
	}
	kids := []string{"p/0", "p/1", "p/2", "p/3", "p/4"}
	if _, err := store.Suspend(ctx, p.LeaseOf(), lease.Wait{Mode: lease.WaitChildren, For: kids}); err != nil {
		t.Fatal(err)
	}
	// p/0 ended and told the parent; p/1 runs on some worker; p/2 and p/3
	// have no item: their tokens are still queued.
	c0, err := store.CreateClaimed(ctx, lease.NewTask{ID: "p/0", Kind: "kid", MaxAttempts: 1, Parent: "p"}, "w2")
	if err != nil {
		t.Fatal(err)
	}
	c0, err = store.Finish(ctx, c0.LeaseOf(), []byte(`0`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Notify(ctx, lease.Waiter{ID: "p", Mode: lease.WaitChildren}, c0); err != nil {
		t.Fatal(err)
	}
	if _, err := store.CreateClaimed(ctx, lease.NewTask{ID: "p/1", Kind: "kid", MaxAttempts: 1, Parent: "p"}, "w3"); err != nil {
		t.Fatal(err)
	}

	info, err := c.Cancel(ctx, "p")
	if err != nil || info.Status != StatusCancelled {
		t.Fatalf("Cancel(p) = %+v, %v", info, err)
	}
	get := func(id string) lease.Task {
		t.Helper()
		got, err := store.Get(ctx, id)
		if err != nil {
			t.Fatalf("get %s: %v", id, err)
		}
		return got
	}
	if got := get("p/0"); got.Status != lease.StatusSucceeded {
		t.Errorf("p/0 (ended before) is %s", got.Status)
	}
	if got := get("p/1"); got.Status != lease.StatusRunning || !got.CancelRequested {
		t.Errorf("p/1 (running): %s, cancel requested %v; want the flag set", got.Status, got.CancelRequested)
	}
	for _, id := range []string{"p/2", "p/3"} {
		got, err := store.Get(ctx, id)
		if err != nil {
			t.Errorf("%s (token still queued): %v; want a CANCELLED placeholder", id, err)
			continue
		}
		if got.Status != lease.StatusCancelled || got.Parent != "p" || !strings.Contains(got.Error, "parent p") {
			t.Errorf("%s: %s %q parent %q; want CANCELLED with a reason naming p", id, got.Status, got.Error, got.Parent)
		}
	}
	if got := get("p/4"); got.Status != lease.StatusPending {
		t.Errorf("p/4, another task holding a child's id, was touched: %s %q", got.Status, got.Error)
	}
}

// A child created just before the cancel reaches it is running: it is
// flagged, never left to run on; one whose item the cancel wrote first is
// never created.
func TestCancelRaceWithChildCreate(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	clock := clockwork.NewFakeClockAt(time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC))
	store := leasemem.New(lease.Options{Clock: clock})
	c := memClient(store, clock)
	if _, err := store.Create(ctx, lease.NewTask{ID: "q", Kind: "fan", MaxAttempts: 3}); err != nil {
		t.Fatal(err)
	}
	q, err := store.Claim(ctx, "q", "w1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Suspend(ctx, q.LeaseOf(), lease.Wait{Mode: lease.WaitChildren, For: []string{"q/0", "q/1"}}); err != nil {
		t.Fatal(err)
	}
	racer := &raceStore{Store: store, before: "q/0", create: func() {
		// q/0's token is taken between the cancel's read and its write.
		if _, err := store.CreateClaimed(ctx, lease.NewTask{ID: "q/0", Kind: "kid", MaxAttempts: 1, Parent: "q"}, "w2"); err != nil {
			t.Error(err)
		}
	}}
	c.store = racer
	if _, err := c.Cancel(ctx, "q"); err != nil {
		t.Fatal(err)
	}
	if got, _ := store.Get(ctx, "q/0"); got.Status != lease.StatusRunning || !got.CancelRequested {
		t.Errorf("q/0 created in the race: %s, flag %v; want RUNNING with the cancel flag", got.Status, got.CancelRequested)
	}
	if got, _ := store.Get(ctx, "q/1"); got.Status != lease.StatusCancelled {
		t.Errorf("q/1: %s, want CANCELLED", got.Status)
	}
	// q/1's token comes now: the child is not created, let alone run.
	if _, err := store.CreateClaimed(ctx, lease.NewTask{ID: "q/1", Kind: "kid", MaxAttempts: 1, Parent: "q"}, "w3"); err == nil {
		t.Fatal("q/1 created after its parent's cancel")
	}
}

// raceStore runs create once, just before the first CreateCancelled of id
// before.
type raceStore struct {
	*leasemem.Store
	before string
	create func()
}

func (r *raceStore) CreateCancelled(ctx context.Context, id, parent, reason string) (lease.Task, error) {
	if id == r.before && r.create != nil {
		r.create()
		r.create = nil
	}
	return r.Store.CreateCancelled(ctx, id, parent, reason)
}

// suspendingStore suspends the parent for its children just before the
// client's cancel write (the worker's suspension lands between the client's
// read and its write), and fails the first placeholder write.
type suspendingStore struct {
	*leasemem.Store
	suspend func()
	failed  bool
}

func (s *suspendingStore) RequestCancel(ctx context.Context, id string) (lease.Task, error) {
	if s.suspend != nil {
		s.suspend()
		s.suspend = nil
	}
	return s.Store.RequestCancel(ctx, id)
}

func (s *suspendingStore) CreateCancelled(ctx context.Context, id, parent, reason string) (lease.Task, error) {
	if !s.failed {
		s.failed = true
		return lease.Task{}, fmt.Errorf("cancel child %s: %w: throttled", id, lease.ErrBackend)
	}
	return s.Store.CreateCancelled(ctx, id, parent, reason)
}

// A parent read RUNNING (or PENDING) suspends for its children before the
// cancel's write, which then ends it at once; the cancel of its children
// fails. The cancel reports the failure, and its repeat, finding the parent
// CANCELLED, cancels the children left (it was ErrFinished at once, and a
// child whose token was still queued then ran).
func TestRepeatedCancelFinishesTheChildrenOfAnEndedParent(t *testing.T) {
	t.Parallel()
	for _, read := range []lease.Status{lease.StatusRunning, lease.StatusPending} {
		t.Run(string(read), func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			clock := clockwork.NewFakeClockAt(time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC))
			store := leasemem.New(lease.Options{Clock: clock})
			c := memClient(store, clock)
			if _, err := store.Create(ctx, lease.NewTask{ID: "p", Kind: "fan", MaxAttempts: 3}); err != nil {
				t.Fatal(err)
			}
			claim := func() lease.Task {
				p, err := store.Claim(ctx, "p", "w1")
				if err != nil {
					t.Fatal(err)
				}
				return p
			}
			var p lease.Task
			if read == lease.StatusRunning {
				p = claim()
			}
			c.store = &suspendingStore{Store: store, suspend: func() {
				if read == lease.StatusPending {
					p = claim()
				}
				if _, err := store.Suspend(ctx, p.LeaseOf(), lease.Wait{Mode: lease.WaitChildren, For: []string{"p/0", "p/1"}}); err != nil {
					t.Error(err)
				}
			}}
			if _, err := c.Cancel(ctx, "p"); err == nil || errors.Is(err, ErrFinished) {
				t.Fatalf("cancel whose children's cancel failed: %v, want the failure", err)
			}
			if got, _ := store.Get(ctx, "p"); got.Status != lease.StatusCancelled {
				t.Fatalf("parent: %s, want CANCELLED (the cancel's write ended it)", got.Status)
			}
			if _, err := c.Cancel(ctx, "p"); !errors.Is(err, ErrFinished) {
				t.Fatalf("repeated cancel: %v, want ErrFinished", err)
			}
			for _, id := range []string{"p/0", "p/1"} {
				got, err := store.Get(ctx, id)
				if err != nil || got.Status != lease.StatusCancelled || got.Parent != "p" {
					t.Fatalf("%s after the repeated cancel: %s parent %q, %v; want a CANCELLED placeholder naming p", id, got.Status, got.Parent, err)
				}
			}
			// p/0's token, still queued, comes now: the child is not created.
			if _, err := store.CreateClaimed(ctx, lease.NewTask{ID: "p/0", Kind: "kid", MaxAttempts: 1, Parent: "p"}, "w2"); !errors.Is(err, lease.ErrAlreadyExists) {
				t.Fatalf("p/0 created after its parent's cancel: %v", err)
			}
		})
	}
}
