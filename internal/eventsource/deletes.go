package eventsource

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// deleteWindow is the longest a processed message waits for others to
// share its DeleteMessageBatch. Deletes go out ten to a call, across
// batches and pollers, as soon as ten are waiting, and the rest at the
// latest one window later: a message acknowledged early (Ack) and the
// successes of a batch's end alike. Lambda's event source mapping deletes
// once per batch; this deletes at most that often, and no poller waits for
// a delete before it receives again, unless the deletes fall behind.
const deleteWindow = 200 * time.Millisecond

// maxDeleteCalls caps the DeleteMessageBatch calls one Runner keeps in
// flight, whatever its pollers.
const maxDeleteCalls = 128

// deleteCalls returns how many DeleteMessageBatch calls a Runner with
// pollers pollers keeps in flight at most: two a poller, at least four.
// A poller hands over at most ten messages a receive round trip (15-20 ms
// on SQS), so two calls a poller keep up with a delete round trip up to
// about twice the receive's.
func deleteCalls(pollers int) int { return min(max(2*pollers, 4), maxDeleteCalls) }

// deletes batches a Runner's deletes and sends them concurrently. add
// queues messages; run, owned by Run, sends them until stop is closed, then
// sends what is left and joins every call it started.
//
// Both the calls in flight (deleteCalls) and the messages waiting for one
// (ten a call: one more round of calls) are bounded. When the waiting ones
// reach the bound, add blocks: the batch that handled them does not end,
// so its poller, which holds the batch it received ahead until then,
// receives nothing more. A handled message therefore waits at most about
// two delete round trips and one deleteWindow for its delete, however slow
// the deletes are against the rate of receiving, rather than queue up until
// its visibility timeout runs out and it is delivered again.
type deletes struct {
	r     *Runner
	limit int // most messages waiting for a call (an add larger alone may exceed it)

	mu   sync.Mutex
	room sync.Cond // broadcast when wait shrinks
	wait []events.SQSMessage

	full  chan struct{} // ten or more are waiting
	slots chan struct{} // one token per call in flight
	calls sync.WaitGroup
}

func newDeletes(r *Runner) *deletes {
	calls := deleteCalls(r.cfg.Pollers)
	d := &deletes{
		r: r, limit: calls * receiveLimit,
		full: make(chan struct{}, 1), slots: make(chan struct{}, calls),
	}
	d.room.L = &d.mu
	return d
}

// add queues msgs for deletion. It blocks while the waiting messages and
// msgs together exceed the bound, unless none are waiting; run always makes
// room, so add returns once run has sent enough.
func (d *deletes) add(msgs []events.SQSMessage) {
	if len(msgs) == 0 {
		return
	}
	d.mu.Lock()
	for len(d.wait) > 0 && len(d.wait)+len(msgs) > d.limit {
		d.room.Wait()
	}
	d.wait = append(d.wait, msgs...)
	n := len(d.wait)
	d.mu.Unlock()
	if n >= receiveLimit {
		select {
		case d.full <- struct{}{}:
		default:
		}
	}
}

// run sends the queued deletes: whole calls of ten as they fill, everything
// every deleteWindow, and everything once stop is closed; then it waits for
// its calls. ctx bounds no delete (each call has its own timeout); it
// carries values only.
func (d *deletes) run(ctx context.Context, stop <-chan struct{}) {
	defer d.calls.Wait()
	tick := time.NewTicker(deleteWindow)
	defer tick.Stop()
	for {
		select {
		case <-d.full:
			d.send(ctx, false)
		case <-tick.C:
			d.send(ctx, true)
		case <-stop:
			d.send(ctx, true)
			return
		}
	}
}

// send starts a call for each ten queued messages, and for the rest too if
// all is set, each once a call slot is free. The messages stay queued (and
// count against add's bound) until their call starts.
func (d *deletes) send(ctx context.Context, all bool) {
	for {
		d.slots <- struct{}{}
		d.mu.Lock()
		n := min(len(d.wait), receiveLimit)
		if n == 0 || (!all && n < receiveLimit) {
			d.mu.Unlock()
			<-d.slots
			return
		}
		chunk := slices.Clone(d.wait[:n])
		d.wait = append(d.wait[:0], d.wait[n:]...)
		d.room.Broadcast()
		d.mu.Unlock()
		d.calls.Go(func() {
			defer func() { <-d.slots }()
			d.r.deleteMessages(ctx, chunk, d.r.log)
		})
	}
}
