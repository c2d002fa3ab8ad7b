package admin

import (
	"context"
	"time"

	"github.com/leasehold/leasehold/internal/queues"
)

// PauseReport is what Pause did.
type PauseReport struct {
	QueueURL string
	// Paused is the queue's state now; Since when it was paused.
	Paused bool
	Since  time.Time
}

// Pause pauses (paused) or resumes the queue at url: it sets or removes
// the queue's pause tag (queues.PausedTag), the one pause mechanism on
// Lambda and off it. Every worker reads the tag at most 2 s old: under
// Worker.Run it receives nothing from a paused queue, and on Lambda
// (HandleSQS) it hands the queue's messages back unrun, to come back
// later; the messages stay queued, nothing is lost, and running tasks
// finish. It needs only sqs:TagQueue, sqs:UntagQueue and sqs:ListQueueTags
// on the queue (the template's PauseQueuesPolicy), no power over the
// Lambda event source mappings.
func (a *Admin) Pause(ctx context.Context, url string, paused bool) (PauseReport, error) {
	r := PauseReport{QueueURL: url}
	cctx, cancel := context.WithTimeout(ctx, a.callTimeout)
	err := queues.SetPaused(cctx, a.sqs, url, paused, time.Now().UTC())
	cancel()
	if err != nil {
		return r, a.queueErr(err, url, "pause")
	}
	r.Paused, r.Since = a.Paused(ctx, url)
	return r, nil
}

// Paused reports whether the queue at url is paused, and since when; a
// queue whose tags cannot be read reads as not paused.
func (a *Admin) Paused(ctx context.Context, url string) (bool, time.Time) {
	cctx, cancel := context.WithTimeout(ctx, a.callTimeout)
	defer cancel()
	p, since, err := queues.PausedSince(cctx, a.sqs, url)
	return p && err == nil, since
}
