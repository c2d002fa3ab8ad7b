package queues

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

// PausedTag is the queue tag that pauses a queue (`leasehold pause`): its
// value is when it was paused (RFC 3339). Worker.Run receives nothing from
// a queue that has it; on Lambda, pausing also disables the queue's event
// source mappings. The tag lives with the queue, so every worker of every
// process sees the same state, and no table item is needed.
const PausedTag = "leasehold-paused"

// TagLister is the call a pause check makes; *sqs.Client satisfies it.
type TagLister interface {
	ListQueueTags(ctx context.Context, params *sqs.ListQueueTagsInput, optFns ...func(*sqs.Options)) (*sqs.ListQueueTagsOutput, error)
}

// Tagger adds the calls that pause and resume a queue.
type Tagger interface {
	TagLister
	TagQueue(ctx context.Context, params *sqs.TagQueueInput, optFns ...func(*sqs.Options)) (*sqs.TagQueueOutput, error)
	UntagQueue(ctx context.Context, params *sqs.UntagQueueInput, optFns ...func(*sqs.Options)) (*sqs.UntagQueueOutput, error)
}

// PausedSince reports whether the queue at url is paused, and since when.
func PausedSince(ctx context.Context, c TagLister, url string) (bool, time.Time, error) {
	out, err := c.ListQueueTags(ctx, &sqs.ListQueueTagsInput{QueueUrl: aws.String(url)})
	if err != nil {
		return false, time.Time{}, fmt.Errorf("read the tags of %s: %w", url, err)
	}
	v, ok := out.Tags[PausedTag]
	if !ok {
		return false, time.Time{}, nil
	}
	at, _ := time.Parse(time.RFC3339, v) // a hand-made tag still pauses
	return true, at, nil
}

// SetPaused pauses (tags) or resumes (untags) the queue at url.
func SetPaused(ctx context.Context, c Tagger, url string, paused bool, now time.Time) error {
	var err error
	if paused {
		_, err = c.TagQueue(ctx, &sqs.TagQueueInput{QueueUrl: aws.String(url), Tags: map[string]string{PausedTag: now.UTC().Format(time.RFC3339)}})
	} else {
		_, err = c.UntagQueue(ctx, &sqs.UntagQueueInput{QueueUrl: aws.String(url), TagKeys: []string{PausedTag}})
	}
	if err != nil {
		return fmt.Errorf("tag %s: %w", url, err)
	}
	return nil
}

// PauseCheck answers "is the queue paused?" for the pollers of one queue,
// reading its tags at most once per Every (one ListQueueTags call, shared
// by the pollers). A failed read counts as not paused: a worker that cannot
// read tags keeps working, and says why once.
type PauseCheck struct {
	Client      TagLister
	URL         string
	Every       time.Duration
	CallTimeout time.Duration
	// OnError is told of a failed read (once until a read succeeds).
	OnError func(error)

	mu      sync.Mutex
	checked time.Time
	paused  bool
	failing bool
}

// Paused reports whether the queue is paused, as last read.
func (p *PauseCheck) Paused(ctx context.Context) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.checked.IsZero() && time.Since(p.checked) < p.Every {
		return p.paused
	}
	cctx, cancel := context.WithTimeout(ctx, p.CallTimeout)
	paused, _, err := PausedSince(cctx, p.Client, p.URL)
	cancel()
	p.checked = time.Now()
	switch {
	case err != nil && !p.failing:
		p.failing = true
		if p.OnError != nil {
			p.OnError(err)
		}
	case err == nil:
		p.failing = false
	}
	p.paused = paused && err == nil
	return p.paused
}
