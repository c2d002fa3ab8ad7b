package eventsource

import (
	"context"
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
// a delete before it receives again.
const deleteWindow = 200 * time.Millisecond

// deletes batches a Runner's deletes. add queues messages; run, owned by
// Run, sends them until stop is closed, then sends what is left.
type deletes struct {
	r    *Runner
	mu   sync.Mutex
	wait []events.SQSMessage
	full chan struct{} // ten or more are waiting
}

func newDeletes(r *Runner) *deletes {
	return &deletes{r: r, full: make(chan struct{}, 1)}
}

// add queues msgs for deletion.
func (d *deletes) add(msgs []events.SQSMessage) {
	if len(msgs) == 0 {
		return
	}
	d.mu.Lock()
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
// every deleteWindow, and everything once stop is closed. ctx bounds no
// delete (each call has its own timeout); it carries values only.
func (d *deletes) run(ctx context.Context, stop <-chan struct{}) {
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

// send deletes the queued messages: all of them, or only whole calls' worth.
func (d *deletes) send(ctx context.Context, all bool) {
	d.mu.Lock()
	n := len(d.wait)
	if !all {
		n -= n % receiveLimit
	}
	msgs := d.wait[:n:n]
	d.wait = append([]events.SQSMessage(nil), d.wait[n:]...)
	d.mu.Unlock()
	d.r.deleteMessages(ctx, msgs, d.r.log)
}
