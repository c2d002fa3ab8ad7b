package lifecycle

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
)

// maxVisibilityEntries is the most entries one ChangeMessageVisibilityBatch
// call takes.
const maxVisibilityEntries = 10

// batchVisibility extends the visibility of the running messages of one SQS
// batch together, in ChangeMessageVisibilityBatch calls of up to ten.
//
// The messages of a batch are claimed within moments of each other and
// renew on the same period, so their renewals come due together. The first
// renewal of a round to reach its visibility change takes, with its own
// message, up to nine other running messages of the same queue that were
// not extended this round (freshFor); the renewals that follow find theirs
// extended and make no call, or wait for the call carrying their message
// and take its entry's result as their own. A message whose entry
// failed keeps its old visibility, and its own renewal tries again.
//
// Every call is made by the renewer that started it, under the call
// timeout, detached from that renewer's stop so that the other messages'
// entries are not cut short; leave waits for any call carrying the
// message, so nothing an execution does with its message afterwards (hand
// it back, hide it, delete it) is overtaken by an extension.
type batchVisibility struct {
	cfg *Config

	mu      sync.Mutex
	members map[*execution]*visMember
}

// visMember is one running message of the batch.
type visMember struct {
	queueURL      string
	receiptHandle string
	// extendedAt is when the last extension that landed was sent (zero
	// before the first): the message is hidden at least until extendedAt
	// plus the lease and the margin.
	extendedAt time.Time
	// flight is the call extending the message now, if any.
	flight *visFlight
}

// visFlight is one ChangeMessageVisibilityBatch call.
type visFlight struct {
	members []*visMember
	errs    []error // each entry's outcome, set before done is closed
	done    chan struct{}
}

// errOf returns m's outcome in f, after f is done.
func (f *visFlight) errOf(m *visMember) error {
	if i := slices.Index(f.members, m); i >= 0 {
		return f.errs[i]
	}
	return nil
}

func newBatchVisibility(cfg *Config) *batchVisibility {
	return &batchVisibility{cfg: cfg, members: map[*execution]*visMember{}}
}

// join adds x's message, just claimed, to the batch's running messages.
func (b *batchVisibility) join(x *execution) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.members[x] = &visMember{queueURL: x.msgQueueURL(), receiptHandle: x.msg.ReceiptHandle}
}

// leave removes x's message and waits until no call carrying it is in
// flight.
func (b *batchVisibility) leave(x *execution) {
	b.mu.Lock()
	m := b.members[x]
	delete(b.members, x)
	var f *visFlight
	if m != nil {
		f = m.flight
	}
	b.mu.Unlock()
	if f != nil {
		<-f.done // bounded by the call timeout
	}
}

// extend hides x's message for the lease plus the margin from now, together
// with the other messages of its queue that are due, and returns the
// outcome of x's entry. It returns nil at once when another renewal's call
// extended x's message this round (freshFor).
func (b *batchVisibility) extend(ctx context.Context, x *execution) error {
	cfg := b.cfg
	b.mu.Lock()
	m := b.members[x]
	if m == nil {
		b.mu.Unlock()
		return errors.New("message is not running in its batch") // cannot happen: joined before its renewer starts
	}
	if f := m.flight; f != nil {
		// Another renewal's call carries x's message: its entry's outcome
		// is x's.
		b.mu.Unlock()
		select {
		case <-f.done:
			return f.errOf(m)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	now := cfg.Clock.Now()
	fresh := now.Add(-b.freshFor())
	if m.extendedAt.After(fresh) {
		b.mu.Unlock()
		return nil
	}
	f := &visFlight{members: []*visMember{m}, done: make(chan struct{})}
	var due []*visMember
	for _, o := range b.members {
		if o != m && o.flight == nil && o.queueURL == m.queueURL && !o.extendedAt.After(fresh) {
			due = append(due, o)
		}
	}
	// The longest unextended first; the rest wait for their own renewal.
	slices.SortFunc(due, func(p, q *visMember) int { return p.extendedAt.Compare(q.extendedAt) })
	f.members = append(f.members, due[:min(len(due), maxVisibilityEntries-1)]...)
	for _, o := range f.members {
		o.flight = f
	}
	b.mu.Unlock()

	f.errs = b.send(ctx, m.queueURL, f.members)

	b.mu.Lock()
	for i, o := range f.members {
		if f.errs[i] == nil {
			o.extendedAt = now
		}
		o.flight = nil
	}
	b.mu.Unlock()
	close(f.done)
	return f.errs[0]
}

// freshFor is how long an extension counts as this round's: an extension
// sent less than that ago is not repeated, and a message extended that long
// ago or longer is due and goes with the next call. It is half of the
// shorter of the renewal period (so the previous round's extensions are
// due) and the slack between an extension's end and the next renewal,
// RenewBefore plus VisibilityMargin (so a message whose own extension is
// skipped is still hidden until its next renewal, with half the slack to
// spare).
func (b *batchVisibility) freshFor() time.Duration {
	period := b.cfg.LeaseDuration - b.cfg.RenewBefore
	slack := b.cfg.RenewBefore + b.cfg.VisibilityMargin
	return min(period, slack) / 2
}

// send makes one ChangeMessageVisibilityBatch call for ms and returns each
// entry's outcome: the call's error for all of them, or each entry's own
// failure. An entry the answer does not mention failed.
func (b *batchVisibility) send(ctx context.Context, queueURL string, ms []*visMember) []error {
	cfg := b.cfg
	errs := make([]error, len(ms))
	entries := make([]types.ChangeMessageVisibilityBatchRequestEntry, len(ms))
	secs := visibilitySeconds(cfg.LeaseDuration + cfg.VisibilityMargin)
	for i, m := range ms {
		// Entry ids are positions: ids must be unique within a request,
		// and a redelivered duplicate could repeat a message id.
		entries[i] = types.ChangeMessageVisibilityBatchRequestEntry{
			Id:                aws.String(strconv.Itoa(i)),
			ReceiptHandle:     aws.String(m.receiptHandle),
			VisibilityTimeout: secs,
		}
	}
	// Detached from the calling renewer's stop: the call carries other
	// messages too. The timeout bounds it.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.CallTimeout)
	defer cancel()
	out, err := cfg.SQS.ChangeMessageVisibilityBatch(cctx, &sqs.ChangeMessageVisibilityBatchInput{
		QueueUrl: aws.String(queueURL),
		Entries:  entries,
	})
	if err != nil {
		for i := range errs {
			errs[i] = err
		}
		return errs
	}
	answered := make([]bool, len(ms))
	for _, s := range out.Successful {
		if i, ok := entryIndex(s.Id, len(ms)); ok {
			answered[i] = true
		}
	}
	for _, f := range out.Failed {
		if i, ok := entryIndex(f.Id, len(ms)); ok {
			answered[i] = true
			errs[i] = &VisibilityEntryError{Code: aws.ToString(f.Code), Message: aws.ToString(f.Message), SenderFault: f.SenderFault}
		}
	}
	for i, ok := range answered {
		if !ok {
			errs[i] = &VisibilityEntryError{Code: "NoResult", Message: "the answer lists the entry neither as successful nor as failed"}
		}
	}
	return errs
}

// entryIndex reads an entry id written by send.
func entryIndex(id *string, n int) (int, bool) {
	i, err := strconv.Atoi(aws.ToString(id))
	return i, err == nil && i >= 0 && i < n
}

// VisibilityEntryError is the failure of one message's entry in a
// ChangeMessageVisibilityBatch call.
type VisibilityEntryError struct {
	Code        string
	Message     string
	SenderFault bool
}

func (e *VisibilityEntryError) Error() string {
	return "change message visibility: " + e.Code + ": " + e.Message
}
