package lifecycle_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lifecycle"
)

// logBuffer collects JSON log lines from many goroutines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// warnings returns, per message id, the WARN lines with msg.
func (l *logBuffer) warnings(t *testing.T, msg string) map[string]int {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]int{}
	for line := range strings.Lines(l.b.String()) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if rec["level"] == "WARN" && rec["msg"] == msg {
			out[fmt.Sprint(rec["message_id"])]++
		}
	}
	return out
}

// batchEnv runs n slow tasks (m0..m{n-1}, on tasks t0..) as one batch; the
// handlers return when release is closed.
type batchEnv struct {
	*env
	logs    *logBuffer
	n       int
	release chan struct{}
	results chan []lifecycle.Result
}

func startBatch(t *testing.T, n int, queueOf func(i int) string) *batchEnv {
	t.Helper()
	logs := &logBuffer{}
	e := setup(t, func(c *lifecycle.Config) {
		c.Concurrency = n
		c.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	})
	b := &batchEnv{env: e, logs: logs, n: n, release: make(chan struct{}), results: make(chan []lifecycle.Result, 1)}
	e.handlers["slow"] = func(ctx context.Context, task lease.Task) ([]byte, error) {
		select {
		case <-b.release:
			return []byte(`"done"`), nil
		case <-ctx.Done():
			return nil, context.Cause(ctx)
		}
	}
	msgs := make([]lifecycle.Message, n)
	for i := range msgs {
		msgs[i] = msg(fmt.Sprintf("m%d", i), inline(t, "slow", fmt.Sprintf("t%d", i), "", 0))
		if queueOf != nil {
			msgs[i].QueueURL = queueOf(i)
		}
	}
	go func() { b.results <- e.exec.ProcessBatch(context.Background(), nil, msgs) }()
	b.waitRenewers(t)
	return b
}

// waitRenewers waits until every renewer waits for its next renewal.
func (b *batchEnv) waitRenewers(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := b.clock.BlockUntilContext(ctx, b.n); err != nil {
		t.Fatalf("renewers: %v", err)
	}
}

// round advances the clock to the next renewal and waits for every renewer
// to be done with it.
func (b *batchEnv) round(t *testing.T) {
	t.Helper()
	b.clock.Advance(10 * time.Second)
	b.waitRenewers(t)
}

// finish lets the handlers return and checks that every task succeeded.
func (b *batchEnv) finish(t *testing.T) {
	t.Helper()
	close(b.release)
	for i, r := range <-b.results {
		if !r.Ack || r.Outcome != lifecycle.OutcomeSucceeded {
			t.Errorf("m%d: %+v", i, r)
		}
	}
}

// changedHandles counts the recorded visibility changes per receipt handle.
func (f *fakeSQS) changedHandles() map[string]int {
	out := map[string]int{}
	for _, c := range f.visibilityChanges() {
		out[aws.ToString(c.ReceiptHandle)]++
	}
	return out
}

// The running messages of one batch extend their visibility with one
// ChangeMessageVisibilityBatch call per renewal round, whichever renewal
// comes first; every lease is still renewed on its own.
func TestBatchRenewalsShareOneVisibilityCall(t *testing.T) {
	t.Parallel()
	const n, rounds = 4, 3
	b := startBatch(t, n, nil)
	for r := 1; r <= rounds; r++ {
		b.round(t)
		single, batch, sizes := b.sqs.calls()
		if single != 0 || batch != r || sizes[r-1] != n {
			t.Fatalf("round %d: %d single calls, %d batch calls of %v entries; want one batch call of %d per round", r, single, batch, sizes, n)
		}
		for i := range n {
			if want := b.clock.Now().Add(20 * time.Second); !b.get(t, fmt.Sprintf("t%d", i)).LeaseUntil.Equal(want) {
				t.Fatalf("round %d: task t%d's lease not renewed", r, i)
			}
		}
	}
	b.finish(t)
	for rh, k := range b.sqs.changedHandles() {
		if k != rounds {
			t.Errorf("%s extended %d times, want %d", rh, k, rounds)
		}
	}
	for _, c := range b.sqs.visibilityChanges() {
		if c.VisibilityTimeout != 30 || aws.ToString(c.QueueUrl) != workURL {
			t.Errorf("change %+v, want 30 s (lease + margin) on the work queue", c)
		}
	}
}

// A call takes at most ten entries; the messages left over go in the call
// of the next renewal that finds its own message not extended.
func TestBatchRenewalsTakeTenEntriesPerCall(t *testing.T) {
	t.Parallel()
	b := startBatch(t, 12, nil)
	b.round(t)
	_, batch, sizes := b.sqs.calls()
	slices.Sort(sizes)
	if batch != 2 || !slices.Equal(sizes, []int{2, 10}) {
		t.Fatalf("%d calls of %v entries, want two: 10 and 2", batch, sizes)
	}
	b.finish(t)
	if got := len(b.sqs.changedHandles()); got != 12 {
		t.Errorf("%d messages extended, want 12", got)
	}
}

// Messages from different queues go in different calls, each to its queue.
func TestBatchRenewalsCallEachQueue(t *testing.T) {
	t.Parallel()
	other := "https://sqs.test/000000000000/images"
	b := startBatch(t, 4, func(i int) string {
		if i%2 == 1 {
			return other
		}
		return ""
	})
	b.round(t)
	_, batch, sizes := b.sqs.calls()
	if batch != 2 || sizes[0] != 2 || sizes[1] != 2 {
		t.Fatalf("%d calls of %v entries, want two of 2", batch, sizes)
	}
	b.finish(t)
	for _, c := range b.sqs.visibilityChanges() {
		rh, q := aws.ToString(c.ReceiptHandle), aws.ToString(c.QueueUrl)
		if odd := rh == "rh-m1" || rh == "rh-m3"; odd != (q == other) {
			t.Errorf("%s changed on %s", rh, q)
		}
	}
}

// An entry the batch call fails, or leaves out of its answer, is that
// message's failed extension, as a failed single call was: a warning for
// that message only, the lease kept, the task undisturbed, and the message
// tried again with the next round. The other entries of the call landed.
func TestBatchRenewalEntryFailuresAreTheirMessagesOwn(t *testing.T) {
	t.Parallel()
	b := startBatch(t, 3, nil)
	b.sqs.mu.Lock()
	b.sqs.failEntries = map[string]bool{"rh-m0": true}
	b.sqs.omitEntries = map[string]bool{"rh-m1": true}
	b.sqs.mu.Unlock()
	b.round(t)
	if got := b.sqs.changedHandles(); got["rh-m0"] != 0 || got["rh-m1"] != 0 || got["rh-m2"] != 1 {
		t.Fatalf("extended %v after round 1; want only rh-m2", got)
	}
	warned := b.logs.warnings(t, "could not extend message visibility")
	if warned["m0"] != 1 || warned["m1"] != 1 || warned["m2"] != 0 {
		t.Fatalf("warnings per message %v; want one each for m0 and m1", warned)
	}
	for i := range 3 {
		if task := b.get(t, fmt.Sprintf("t%d", i)); !task.LeaseUntil.Equal(b.clock.Now().Add(20 * time.Second)) {
			t.Fatalf("t%d's lease was not renewed", i)
		}
	}

	// The next round tries the two again, in one call with m2.
	b.sqs.mu.Lock()
	b.sqs.failEntries, b.sqs.omitEntries = nil, nil
	b.sqs.mu.Unlock()
	_, before, _ := b.sqs.calls()
	b.round(t)
	_, after, sizes := b.sqs.calls()
	if after != before+1 || sizes[len(sizes)-1] != 3 {
		t.Fatalf("round 2: %d calls, last of %d entries; want one of 3", after-before, sizes[len(sizes)-1])
	}
	if got := b.sqs.changedHandles(); got["rh-m0"] != 1 || got["rh-m1"] != 1 || got["rh-m2"] != 2 {
		t.Fatalf("extended %v after round 2", got)
	}
	b.finish(t)
}

// A batch call that fails as a whole fails every entry: each message warns
// once, and each is extended by the next round.
func TestBatchRenewalCallFailureFailsEveryEntry(t *testing.T) {
	t.Parallel()
	b := startBatch(t, 3, nil)
	b.sqs.mu.Lock()
	b.sqs.failBatch = errors.New("throttled")
	b.sqs.mu.Unlock()
	b.round(t)
	warned := b.logs.warnings(t, "could not extend message visibility")
	for i := range 3 {
		if warned[fmt.Sprintf("m%d", i)] != 1 {
			t.Fatalf("warnings per message %v; want one each", warned)
		}
	}
	b.sqs.mu.Lock()
	b.sqs.failBatch = nil
	b.sqs.mu.Unlock()
	b.round(t)
	if got := b.sqs.changedHandles(); len(got) != 3 {
		t.Fatalf("extended %v after the failed round and a good one; want all 3", got)
	}
	b.finish(t)
}

// A message leaves its batch's renewals only once no call carrying it is in
// flight, so that nothing its execution does with it afterwards is
// overtaken; the call is not cut short when the renewer that made it stops.
func TestBatchRenewalCallInFlightHoldsTheFinish(t *testing.T) {
	t.Parallel()
	logs := &logBuffer{}
	e := setup(t, func(c *lifecycle.Config) { c.Logger = slog.New(slog.NewJSONHandler(logs, nil)) })
	gate := make(chan struct{})
	e.sqs.gate = gate
	releases := map[string]chan struct{}{"t0": make(chan struct{}), "t1": make(chan struct{})}
	e.handlers["slow"] = func(ctx context.Context, task lease.Task) ([]byte, error) {
		<-releases[task.ID]
		return nil, nil
	}
	msgs := []lifecycle.Message{msg("m0", inline(t, "slow", "t0", "", 0)), msg("m1", inline(t, "slow", "t1", "", 0))}
	done := make(chan int, 2)
	go e.exec.ProcessBatchEach(context.Background(), nil, msgs, func(i int, r lifecycle.Result) { done <- i })
	if err := e.clock.BlockUntilContext(t.Context(), 2); err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(10 * time.Second)
	// Both renewals reach the visibility change: one call carrying both
	// messages is held at the gate; the other renewal waits for it.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if c := e.store.Calls(); c.Writes >= 4 { // 2 creates + 2 renewals
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("renewals did not happen")
		}
		time.Sleep(time.Millisecond)
	}
	close(releases["t0"])
	close(releases["t1"])
	select {
	case i := <-done:
		t.Fatalf("m%d finished while a visibility call carrying it was in flight", i)
	case <-time.After(200 * time.Millisecond):
	}
	close(gate)
	<-done
	<-done
	if _, batch, sizes := e.sqs.calls(); batch != 1 || sizes[0] != 2 {
		t.Fatalf("%d batch calls of %v entries, want one of 2", batch, sizes)
	}
	if w := logs.warnings(t, "could not extend message visibility"); len(w) != 0 {
		t.Errorf("the held call was cut short: %v", w)
	}
}
