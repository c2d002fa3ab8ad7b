package leasehold_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/awstest"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/queues"
)

// syncBuffer is a log sink the test reads while the worker writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) contains(sub string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Contains(s.b.String(), sub)
}

// A paused queue (its leasehold-paused tag) gets no receive from Run: its
// tasks stay queued, none runs, nothing is lost; once resumed, they all
// run.
func TestPausedQueueIsNotReceivedFromOnTheStack(t *testing.T) {
	t.Parallel()
	e := setupStack(t)
	ctx := t.Context()
	if err := queues.SetPaused(ctx, e.sqs, e.queues.Work, true, time.Now()); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		e.send(t, e.queues.Work, fmt.Sprintf(`{"v":1,"kind":"greet","id":"held-%d","payload":{"name":"x"}}`, i))
	}
	var logs syncBuffer
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "greet", func(context.Context, *leasehold.Task[map[string]string]) (string, error) { return "hi", nil })
	runWorker(t, e.worker(t, leasehold.WorkerConfig{Handlers: hs, LongPoll: time.Second, Logger: slog.New(slog.NewTextHandler(&logs, nil))}))
	waitFor(t, 30*time.Second, func() bool { return logs.contains("queue paused") })
	// Paused, and it has looked: still nothing received.
	if n := visible(t, e); n != 3 {
		t.Fatalf("%d messages visible while paused, want the 3 sent", n)
	}
	for i := range 3 {
		if s := e.status(t, fmt.Sprintf("held-%d", i)); s != "" {
			t.Fatalf("held-%d is %s while its queue is paused", i, s)
		}
	}
	resumeAndRun(t, e, "held-%d", 3)
	if !logs.contains("queue resumed") {
		t.Error("no log line said the queue resumed")
	}
}

// visible is the work queue's ApproximateNumberOfMessages.
func visible(t *testing.T, e *stackEnv) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), awstest.Scale(10*time.Second))
	defer cancel()
	out, err := e.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(e.queues.Work),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameApproximateNumberOfMessages}})
	if err != nil {
		t.Fatal(err)
	}
	var n int
	fmt.Sscan(out.Attributes[string(types.QueueAttributeNameApproximateNumberOfMessages)], &n)
	return n
}

// A queue paused while a worker's long poll is in flight: what that poll
// brings is handed back unrun, and runs once the queue is resumed.
func TestPauseStopsTasksAPollInFlightBringsOnTheStack(t *testing.T) {
	t.Parallel()
	e := setupStack(t)
	ctx := t.Context()
	var logs syncBuffer
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "greet", func(context.Context, *leasehold.Task[map[string]string]) (string, error) { return "hi", nil })
	runWorker(t, e.worker(t, leasehold.WorkerConfig{Handlers: hs, LongPoll: 10 * time.Second, Logger: slog.New(slog.NewTextHandler(&logs, nil))}))
	e.send(t, e.queues.Work, `{"v":1,"kind":"greet","id":"before-pause","payload":{"name":"x"}}`)
	waitFor(t, 60*time.Second, func() bool { return e.status(t, "before-pause") == lease.StatusSucceeded })
	// The worker's pollers are in their long polls. Pause, and let the
	// pause check's cached answer (at most pauseCheckEvery old) expire, so
	// that the next look at it reads the tag.
	if err := queues.SetPaused(ctx, e.sqs, e.queues.Work, true, time.Now()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	for i := range 3 {
		e.send(t, e.queues.Work, fmt.Sprintf(`{"v":1,"kind":"greet","id":"in-flight-%d","payload":{"name":"x"}}`, i))
	}
	// Whether a poll in flight took them (and handed them back) or not, they
	// end up visible on the queue and none runs.
	notStarted := func() {
		for i := range 3 {
			if s := e.status(t, fmt.Sprintf("in-flight-%d", i)); s != "" {
				t.Fatalf("in-flight-%d is %s while its queue is paused", i, s)
			}
		}
	}
	waitFor(t, 60*time.Second, func() bool {
		notStarted()
		return logs.contains("queue paused") && visible(t, e) == 3
	})
	notStarted()
	if !logs.contains("handing back messages received before the pause") {
		t.Log("no poll in flight took the messages this time; the unit tests cover the hand-back")
	}
	resumeAndRun(t, e, "in-flight-%d", 3)
}

// resumeAndRun resumes the work queue and waits until the n tasks named by
// format (with 0..n-1) have succeeded.
func resumeAndRun(t *testing.T, e *stackEnv, format string, n int) {
	t.Helper()
	if err := queues.SetPaused(t.Context(), e.sqs, e.queues.Work, false, time.Now()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, func() bool {
		for i := range n {
			if e.status(t, fmt.Sprintf(format, i)) != lease.StatusSucceeded {
				return false
			}
		}
		return true
	})
}
