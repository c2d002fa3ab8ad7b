package lifecycle_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lifecycle"
	"github.com/leasehold/leasehold/internal/token"
)

// pauseHoldBounds is the range a paused queue's message is held for on
// its count-th receive: [h/2, h], h = 10 s doubled count-1 times, at most
// 15 minutes (docs/operations.md, "Pausing a queue").
func pauseHoldBounds(count int) (lo, hi int32) {
	h := min(10*time.Second<<(min(max(count, 1), 10)-1), 15*time.Minute)
	return int32(h / 2 / time.Second), int32(h / time.Second)
}

// The messages of a paused queue are handed back unrun: no handler runs,
// nothing is written (no task created, no attempt used, no listing entry),
// none is acknowledged, and each is hidden for the first hold. A message
// of another queue in the same batch runs.
func TestPausedQueueHandsItsTokensBackUnrun(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ran := map[string]bool{}
	e.handlers["echo"] = func(_ context.Context, task lease.Task) ([]byte, error) {
		ran[task.ID] = true
		return task.Payload, nil
	}
	if _, err := e.store.Create(t.Context(), lease.NewTask{ID: "stored", Kind: "echo", MaxAttempts: 3}); err != nil {
		t.Fatal(err)
	}
	writes := e.store.Calls().Writes
	msgs := []lifecycle.Message{
		msg("inline-1", inline(t, "echo", "", `{}`, 0)),
		msg("inline-2", inline(t, "echo", "", `{}`, 0)),
		msg("ref", token.Ref("stored")),
		msg("wake", token.Wake("stored")),
	}
	for i := range msgs {
		msgs[i].Paused = true
	}
	other := msg("other", inline(t, "echo", "", `{}`, 0))
	other.QueueURL, other.Queue = "https://sqs.test/000000000000/reports", "reports"
	results := e.exec.ProcessBatch(t.Context(), nil, append(msgs, other))

	for i, m := range msgs {
		res := results[i]
		if res.Ack || !res.Held || !strings.Contains(res.Reason, "queue work is paused") {
			t.Errorf("%s: %+v; want held back, not acknowledged, with the pause as the reason", m.ID, res)
		}
	}
	if res := results[len(msgs)]; !res.Ack || res.Outcome != lifecycle.OutcomeSucceeded || !ran["other"] {
		t.Errorf("a message of a queue that is not paused: %+v, ran %v", res, ran)
	}
	if ran["inline-1"] || ran["inline-2"] || ran["stored"] {
		t.Errorf("handlers ran for a paused queue: %v", ran)
	}
	for _, id := range []string{"inline-1", "inline-2"} {
		if _, err := e.store.Get(t.Context(), id); !errors.Is(err, lease.ErrNotFound) {
			t.Errorf("held inline token %s: its task was written (%v)", id, err)
		}
	}
	if got := e.get(t, "stored"); got.Status != lease.StatusPending || got.Attempt != 0 {
		t.Errorf("a held stored task is %s at attempt %d; want PENDING, no attempt used", got.Status, got.Attempt)
	}
	// The message of the other queue: its create-and-claim and its finish.
	if w := e.store.Calls().Writes - writes; w != 2 {
		t.Errorf("%d writes; want only the 2 of the other queue's task (nothing for the paused queue's, not even a listing entry)", w)
	}
	lo, hi := pauseHoldBounds(1)
	hidden := map[string]int32{}
	for _, v := range e.sqs.visibilityChanges() {
		if aws.ToString(v.QueueUrl) == workURL {
			hidden[aws.ToString(v.ReceiptHandle)] = v.VisibilityTimeout
		}
	}
	for _, m := range msgs {
		if s, ok := hidden[m.ReceiptHandle]; !ok || s < lo || s > hi {
			t.Errorf("%s hidden for %ds (%t); want %d..%ds", m.ID, s, ok, lo, hi)
		}
	}
	if sent := e.sqs.sentTo(workURL); len(sent) != 0 {
		t.Errorf("%d tokens sent for a paused queue's first receives", len(sent))
	}
}

// A backlog paused for long is received again and again, each time held
// longer; at ReplaceAtReceiveCount its token is replaced by a fresh one,
// delayed by the longest hold, and the message deleted, so it never
// reaches the queue's maxReceiveCount and its dead-letter queue. The
// fresh token starts again from the first hold, and its task still runs
// once the queue is resumed.
func TestPausedBacklogIsReplacedBeforeMaxReceiveCount(t *testing.T) {
	t.Parallel()
	e := setup(t, nil)
	ran := 0
	e.handlers["echo"] = func(_ context.Context, task lease.Task) ([]byte, error) {
		ran++
		return task.Payload, nil
	}
	body := inline(t, "echo", "", `{"n":1}`, 0)
	var prev int32
	replacedAt := 0
	for count := 1; count < lifecycle.DefaultMaxReceiveCount; count++ {
		m := msg("backlog", body)
		m.ReceiptHandle = "rh-" + strings.Repeat("I", count)
		m.ReceiveCount, m.Paused = count, true
		res := e.exec.Process(t.Context(), nil, m)
		if !res.Held || ran != 0 {
			t.Fatalf("receive %d: %+v, ran %d; want held back unrun", count, res, ran)
		}
		if res.Ack {
			replacedAt = count
			break
		}
		changes := e.sqs.visibilityChanges()
		last := changes[len(changes)-1]
		lo, hi := pauseHoldBounds(count)
		if aws.ToString(last.ReceiptHandle) != m.ReceiptHandle || last.VisibilityTimeout < lo || last.VisibilityTimeout > hi || last.VisibilityTimeout < prev {
			t.Fatalf("receive %d: hidden %+v; want %d..%ds, no shorter than the hold before (%ds)", count, last, lo, hi, prev)
		}
		prev = last.VisibilityTimeout
		e.clock.Advance(time.Duration(prev) * time.Second)
	}
	if replacedAt != lifecycle.DefaultReplaceAtReceiveCount {
		t.Fatalf("replaced at receive %d; want %d, below maxReceiveCount %d", replacedAt, lifecycle.DefaultReplaceAtReceiveCount, lifecycle.DefaultMaxReceiveCount)
	}
	sent := e.sqs.sentTo(workURL)
	lo, hi := pauseHoldBounds(replacedAt)
	if len(sent) != 1 || sent[0].DelaySeconds < lo || sent[0].DelaySeconds > hi || hi != 900 {
		t.Fatalf("sent %+v; want one fresh token delayed %d..%ds (at most SQS's 15 minutes)", sent, lo, hi)
	}
	fresh, err := token.Decode(aws.ToString(sent[0].MessageBody))
	if err != nil || fresh.ID != "backlog" || fresh.Kind != "echo" || string(fresh.Payload) != `{"n":1}` {
		t.Fatalf("the fresh token is %+v (%v); want the inline task with its id made explicit", fresh, err)
	}
	if d := e.sqs.deletedHandles(); len(d) != 1 || d[0] != "rh-"+strings.Repeat("I", replacedAt) {
		t.Fatalf("deleted %v; want the replaced message at once", d)
	}

	// The fresh token's first receive, still paused: the first hold again.
	m := msg("fresh", aws.ToString(sent[0].MessageBody))
	m.Paused = true
	if res := e.exec.Process(t.Context(), nil, m); res.Ack || !res.Held {
		t.Fatalf("the fresh token while paused: %+v", res)
	}
	// Resumed: it runs, once.
	m.Paused, m.ReceiveCount = false, 2
	if res := e.exec.Process(t.Context(), nil, m); !res.Ack || res.Outcome != lifecycle.OutcomeSucceeded || ran != 1 {
		t.Fatalf("after the resume: %+v, ran %d; want it run once", res, ran)
	}
	if got := e.get(t, "backlog"); got.Status != lease.StatusSucceeded || got.Attempt != 1 {
		t.Errorf("the task is %s at attempt %d; want SUCCEEDED at its first attempt", got.Status, got.Attempt)
	}
}
