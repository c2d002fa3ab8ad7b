package queues

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/leasehold/leasehold/internal/defaults"
)

// PausedTag is the queue tag that pauses a queue (`leasehold pause`): its
// value is when it was paused (RFC 3339). Worker.Run receives nothing from
// a queue that has it, and the worker on Lambda (HandleSQS) hands the
// messages of such a queue back unrun. The tag lives with the queue, so
// every worker of every process and every Lambda container sees the same
// state, no table item is needed, and whoever pauses needs only the tag
// calls: no power over the event source mappings.
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

// PauseCheck answers "is the queue paused?" for the workers of one queue,
// reading its tags at most once per Every (one ListQueueTags call, shared
// by the pollers and batches that ask). A failed read counts as not paused:
// a worker that cannot read tags keeps working, and says why once.
type PauseCheck struct {
	Client TagLister
	URL    string
	Every  time.Duration
	// CallTimeout bounds the read (zero: defaults.CallTimeout).
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
	cctx, cancel := context.WithTimeout(ctx, cmp.Or(p.CallTimeout, defaults.CallTimeout))
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

// MaxPauseChecks bounds the queues a PauseChecks keeps: a worker serves a
// few queues, but on Lambda any queue mapped to the function can bring a
// record, so the set must not grow without bound.
const MaxPauseChecks = 64

// PauseChecks is a PauseCheck per queue URL, made when the queue is first
// asked about, all with the same client and timing: each queue's tags are
// read at most once per Every, however many pollers, batches or messages
// ask. It keeps at most MaxPauseChecks queues; asking about one more drops
// the one asked about least recently (which is read again if it is asked
// about later). Safe for concurrent use.
type PauseChecks struct {
	Client      TagLister
	Every       time.Duration
	CallTimeout time.Duration
	// OnError is told of a failed read of a queue's tags (once until a
	// read of that queue succeeds).
	OnError func(url string, err error)

	mu     sync.Mutex
	checks map[string]*pauseEntry
	asked  uint64 // counts the asks, to order them
}

// pauseEntry is one queue's check and the number of the last ask about it.
type pauseEntry struct {
	check *PauseCheck
	asked uint64
}

// Paused reports whether the queue at url is paused, as last read (read
// now when that was Every or longer ago).
func (s *PauseChecks) Paused(ctx context.Context, url string) bool {
	return s.check(url).Paused(ctx)
}

// check returns url's PauseCheck, made and kept if it is new.
func (s *PauseChecks) check(url string) *PauseCheck {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asked++
	if e, ok := s.checks[url]; ok {
		e.asked = s.asked
		return e.check
	}
	if s.checks == nil {
		s.checks = map[string]*pauseEntry{}
	}
	if len(s.checks) >= MaxPauseChecks {
		var oldest string
		for u, e := range s.checks {
			if oldest == "" || e.asked < s.checks[oldest].asked {
				oldest = u
			}
		}
		delete(s.checks, oldest)
	}
	c := &PauseCheck{Client: s.Client, URL: url, Every: s.Every, CallTimeout: s.CallTimeout}
	if s.OnError != nil {
		c.OnError = func(err error) { s.OnError(url, err) }
	}
	s.checks[url] = &pauseEntry{check: c, asked: s.asked}
	return c
}
