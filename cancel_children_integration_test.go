package leasehold_test

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/awstest"
	"github.com/leasehold/leasehold/internal/durable"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/workflow"
)

// TestCancelledParentsQueuedChildrenNeverRunOnTheStack: a fan-out of 12 is
// cancelled while every child's token is still on the work queue and no
// child has an item. The cancel leaves each child CANCELLED with a reason
// naming the parent, and when the tokens are then taken, none of the
// children runs.
func TestCancelledParentsQueuedChildrenNeverRunOnTheStack(t *testing.T) {
	t.Parallel()
	const n = 12
	e := setupStack(t)
	c := newClientOn(t, e)
	var ran atomic.Int32
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "fan", func(ctx context.Context, _ *leasehold.Task[any]) (any, error) {
		kids := make([]workflow.Child, n)
		for i := range kids {
			kids[i] = workflow.Child{Kind: "kid", Payload: i}
		}
		if _, err := workflow.All(ctx, "kids", kids...); err != nil {
			return nil, err
		}
		return "joined", nil
	})
	leasehold.Handle(hs, "kid", func(_ context.Context, t *leasehold.Task[int]) (int, error) {
		ran.Add(1)
		return t.Payload, nil
	})
	w := e.worker(t, leasehold.WorkerConfig{Handlers: hs})
	ctx, cancel := context.WithTimeout(t.Context(), awstest.Scale(3*time.Minute))
	defer cancel()

	if _, err := c.Enqueue(ctx, leasehold.Submission{Kind: "fan", ID: "p"}); err != nil {
		t.Fatal(err)
	}
	// Only the parent's token is on the queue: run it alone.
	for e.status(t, "p") != lease.StatusWaiting {
		if ctx.Err() != nil {
			t.Fatalf("parent never suspended: %s", e.status(t, "p"))
		}
		if ev := e.receiveSome(t, e.queues.Work, 1, time.Second, 30); len(ev.Records) > 0 {
			e.deliver(t, w, ctx, ev)
		}
	}
	for i := range n {
		if s := e.status(t, durable.ChildIDIn("p", "kids", i)); s != "" {
			t.Fatalf("child %d has an item (%s) before any child token was taken", i, s)
		}
	}

	info, err := c.Cancel(ctx, "p")
	if err != nil || info.Status != leasehold.StatusCancelled {
		t.Fatalf("Cancel(p) = %+v, %v", info, err)
	}
	wantCancelled := func(when string) {
		t.Helper()
		for i := range n {
			id := durable.ChildIDIn("p", "kids", i)
			got := e.get(t, id)
			if got.Status != lease.StatusCancelled || !strings.Contains(got.Error, "parent p") {
				t.Fatalf("%s: %s is %s %q; want CANCELLED with a reason naming p", when, id, got.Status, got.Error)
			}
		}
	}
	wantCancelled("after the cancel")

	// Now the children's tokens are taken.
	e.pump(t, w, 2*time.Minute, func() bool { return e.queueEmpty(t, e.queues.Work) })
	if got := ran.Load(); got != 0 {
		t.Fatalf("%d children of the cancelled parent ran", got)
	}
	wantCancelled("after their tokens were taken")
	if got := e.status(t, "p"); got != lease.StatusCancelled {
		t.Fatalf("parent: %s", got)
	}
}

// queueEmpty reports whether url holds no message, visible, in flight or
// delayed.
func (e *stackEnv) queueEmpty(t *testing.T, url string) bool {
	t.Helper()
	ctx, cancel := call(t)
	defer cancel()
	out, err := e.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(url),
		AttributeNames: []sqstypes.QueueAttributeName{
			sqstypes.QueueAttributeNameApproximateNumberOfMessages,
			sqstypes.QueueAttributeNameApproximateNumberOfMessagesNotVisible,
			sqstypes.QueueAttributeNameApproximateNumberOfMessagesDelayed,
		},
	})
	if err != nil {
		t.Fatalf("queue attributes: %v", err)
	}
	for _, v := range out.Attributes {
		if n, _ := strconv.Atoi(v); n > 0 {
			return false
		}
	}
	return true
}

// TestCancelledMapStopsOnTheStack: a sliding map of 60, 5 at a time, is
// cancelled after 15 of its children ran. The children whose tokens are
// on the queue then are CANCELLED (placeholders naming the parent), none
// runs, no child ends by starting another, and the queue drains with the
// parent CANCELLED.
func TestCancelledMapStopsOnTheStack(t *testing.T) {
	t.Parallel()
	const n, slots = 60, 5
	e := setupStack(t)
	c := newClientOn(t, e)
	var ran atomic.Int32
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "mapcancel", func(ctx context.Context, _ *leasehold.Task[any]) (string, error) {
		res, err := workflow.Map(ctx, "items", n, func(i int) workflow.Child {
			return workflow.Child{Kind: "mapitem", Payload: i}
		}, workflow.MapOptions{MaxConcurrency: slots})
		if err != nil {
			return "", err
		}
		return res.Stopped, nil
	})
	leasehold.Handle(hs, "mapitem", func(_ context.Context, t *leasehold.Task[int]) (int, error) {
		ran.Add(1)
		return t.Payload, nil
	})
	w := e.worker(t, leasehold.WorkerConfig{Handlers: hs})
	ctx, cancel := context.WithTimeout(t.Context(), awstest.Scale(3*time.Minute))
	defer cancel()
	if _, err := c.Enqueue(ctx, leasehold.Submission{Kind: "mapcancel", ID: "mp"}); err != nil {
		t.Fatal(err)
	}
	e.pumpHiding(t, w, 90*time.Second, 5, func() bool { return ran.Load() >= 15 })
	before := ran.Load()
	info, err := c.Cancel(ctx, "mp")
	if err != nil || info.Status != leasehold.StatusCancelled {
		t.Fatalf("Cancel(mp) = %+v, %v", info, err)
	}
	e.pumpHiding(t, w, 90*time.Second, 5, func() bool { return e.queueEmpty(t, e.queues.Work) })
	if got := ran.Load(); got != before {
		t.Errorf("%d children ran, %d of them after the cancel; want none after it", got, got-before)
	}
	placeholders := 0
	for i := range n {
		switch got := e.status(t, durable.ChildIDIn("mp", "items", i)); {
		case got == "", got == lease.StatusSucceeded:
		case got == lease.StatusCancelled:
			placeholders++
		default:
			t.Errorf("child %d is %s after the cancel drained", i, got)
		}
	}
	if placeholders == 0 || placeholders > 2*slots {
		t.Errorf("%d children CANCELLED; want those of the busy slots (1 to %d)", placeholders, 2*slots)
	}
	if got := e.status(t, "mp"); got != lease.StatusCancelled {
		t.Errorf("parent: %s", got)
	}
	t.Logf("%d children ran before the cancel, %d cancelled", before, placeholders)
}
