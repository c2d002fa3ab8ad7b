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
		if _, ok := workflow.Children(ctx); ok {
			return "joined", nil
		}
		kids := make([]workflow.Child, n)
		for i := range kids {
			kids[i] = workflow.Child{Kind: "kid", Payload: i}
		}
		return nil, workflow.AwaitChildren(kids...)
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
		if s := e.status(t, durable.ChildID("p", i)); s != "" {
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
			id := durable.ChildID("p", i)
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
