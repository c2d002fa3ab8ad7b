package dispatch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/limiter"
	"github.com/leasehold/leasehold/internal/lifecycle"
	"github.com/leasehold/leasehold/internal/token"
)

// MaxBatchEntries is the most entries one SendMessageBatch call takes.
const MaxBatchEntries = 10

// ErrSend: a dispatch token could not be sent. The task is stored and sits in
// the sweep index, so the sweep dispatches it once the grace has passed;
// enqueueing it again sends a token at once.
var ErrSend = errors.New("dispatch token not sent")

// Dispatcher is the producer side: intake of submissions, enqueueing, and
// the sweep. Its methods are safe for concurrent use; none leaves a goroutine
// running when it returns.
type Dispatcher struct {
	cfg     Config
	creator Creator
	// reader reads tasks with their create tokens (Config.CreateWait); nil
	// when the store has no GetWithToken.
	reader TokenReader
	store  Store // nil for a dispatcher that only enqueues
	// counter keeps the redrive counts of dead letters with no room for
	// the attribute; nil when the store keeps none.
	counter limiter.RedriveCounter
	dead    deadLetterState
}

// New checks cfg and returns a dispatcher.
func New(cfg Config) (*Dispatcher, error) {
	cfg = cfg.withDefaults()
	if cfg.Store == nil {
		return nil, fmt.Errorf("%w: a lease store is required", ErrConfig)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	reader, _ := cfg.Store.(TokenReader)
	return &Dispatcher{cfg: cfg, creator: cfg.Store, reader: reader, store: cfg.Store, counter: counterOf(cfg.Store)}, nil
}

// ref is a dispatch token to send: a reference to task id, delivered after
// delay, to the task's queue (empty: the default work queue).
type ref struct {
	id    string
	delay time.Duration
	queue string
	// body is the token to send; empty means a reference to id.
	body string
	// createToken is the create token body carries, if any.
	createToken string
	// md is the metadata a reference to id carries (the task's).
	md map[string]string
}

// tokenFor decides whether task needs a token now, and with which delay: a
// PENDING task due within SQS's delay cap does; a later one waits in the
// sweep index; a running or finished one has no use for it.
func tokenFor(task lease.Task, now time.Time) (ref, bool) {
	if task.Status != lease.StatusPending {
		return ref{}, false
	}
	wait := max(task.RunAt.Sub(now), 0)
	if wait > lifecycle.MaxSQSDelay {
		return ref{}, false
	}
	return ref{id: task.ID, delay: wait, queue: task.Queue, md: task.Metadata}, true
}

// dispatchAt is the sweep-index time a new task should get: exactly its start
// when SQS cannot hold the wait (the sweep is then its dispatcher), else zero
// for the store's default of start plus grace (the sweep is only the safety
// net behind the token sent now).
func dispatchAt(runAt, now time.Time) time.Time {
	if runAt.Sub(now) > lifecycle.MaxSQSDelay {
		return runAt
	}
	return time.Time{}
}

// delaySeconds rounds a wait up to SQS's whole seconds, within its cap.
func delaySeconds(d time.Duration) int32 {
	secs := math.Ceil(max(d, 0).Seconds())
	return int32(min(secs, lifecycle.MaxSQSDelay.Seconds()))
}

// chunk is up to MaxBatchEntries refs of one queue: the indexes into the
// refs of sendRefs.
type chunk struct {
	queueURL string
	idx      []int
}

// sendRefs sends refs to their queues in batches and returns, for each ref,
// nil or why it was not sent. A queue that cannot be resolved (deleted, or
// the lookup failed) fails its refs with the reason; their tasks stay in the
// sweep index, so a later sweep tries again.
func (d *Dispatcher) sendRefs(ctx context.Context, refs []ref) []error {
	errs := make([]error, len(refs))
	var order []string
	byQueue := map[string][]int{}
	for i, r := range refs {
		if _, ok := byQueue[r.queue]; !ok {
			order = append(order, r.queue)
		}
		byQueue[r.queue] = append(byQueue[r.queue], i)
	}
	var chunks []chunk
	for _, q := range order {
		idx := byQueue[q]
		u, err := d.cfg.Queues.URL(ctx, q)
		if err != nil {
			d.cfg.Logger.WarnContext(ctx, "could not resolve the tasks' queue; they wait for a later sweep",
				"queue", q, "tokens", len(idx), "reason", err)
			for _, i := range idx {
				errs[i] = fmt.Errorf("send token for %s: %w: %w", refs[i].id, ErrSend, err)
			}
			continue
		}
		for lo := 0; lo < len(idx); lo += MaxBatchEntries {
			chunks = append(chunks, chunk{queueURL: u, idx: idx[lo:min(lo+MaxBatchEntries, len(idx))]})
		}
	}
	started := each(ctx, len(chunks), d.cfg.Concurrency, func(c int) {
		part := make([]ref, len(chunks[c].idx))
		for j, i := range chunks[c].idx {
			part[j] = refs[i]
		}
		partErrs := make([]error, len(part))
		d.sendChunk(ctx, chunks[c].queueURL, part, partErrs)
		for j, i := range chunks[c].idx {
			errs[i] = partErrs[j]
		}
	})
	for _, c := range chunks[started:] {
		for _, i := range c.idx {
			errs[i] = fmt.Errorf("send token for %s: %w: %w", refs[i].id, ErrSend, context.Cause(ctx))
		}
	}
	return errs
}

// sendChunk sends up to MaxBatchEntries refs to queueURL in one call. A
// failed call fails every entry; otherwise each entry the response does not
// list as successful has failed.
func (d *Dispatcher) sendChunk(ctx context.Context, queueURL string, refs []ref, errs []error) {
	entries := make([]types.SendMessageBatchRequestEntry, len(refs))
	for i, r := range refs {
		entries[i] = types.SendMessageBatchRequestEntry{
			Id:           aws.String(strconv.Itoa(i)),
			MessageBody:  aws.String(cmp.Or(r.body, token.RefWith(r.id, r.md))),
			DelaySeconds: delaySeconds(r.delay),
		}
	}
	in := &sqs.SendMessageBatchInput{QueueUrl: aws.String(queueURL), Entries: entries}
	var out *sqs.SendMessageBatchOutput
	var err error
	// A call that got no answer in time may have been sent: send it again
	// (a second token of a task is harmless, its claim is fenced) rather
	// than report tokens as unsent that a slow queue did take.
	for attempt := 1; ; attempt++ {
		cctx, cancel := context.WithTimeout(ctx, d.cfg.CallTimeout)
		out, err = d.cfg.SQS.SendMessageBatch(cctx, in)
		cancel()
		if err == nil || attempt == sendAttempts || ctx.Err() != nil || !noAnswer(err) {
			break
		}
	}
	if err != nil {
		d.cfg.Logger.WarnContext(ctx, "could not send dispatch tokens", "tokens", len(refs), "error", err)
		for i, r := range refs {
			errs[i] = fmt.Errorf("send token for %s: %w: %w", r.id, ErrSend, err)
		}
		return
	}
	sent := make([]bool, len(refs))
	for _, s := range out.Successful {
		if i, ok := entryIndex(s.Id, len(refs)); ok {
			sent[i] = true
		}
	}
	for _, f := range out.Failed {
		i, ok := entryIndex(f.Id, len(refs))
		if !ok {
			continue
		}
		sent[i] = false
		errs[i] = fmt.Errorf("send token for %s: %w: %s (%s, sender fault %t)",
			refs[i].id, ErrSend, aws.ToString(f.Message), aws.ToString(f.Code), f.SenderFault)
		d.cfg.Logger.WarnContext(ctx, "dispatch token refused", "task_id", refs[i].id, "code", aws.ToString(f.Code), "sender_fault", f.SenderFault)
	}
	for i, r := range refs {
		if !sent[i] && errs[i] == nil {
			errs[i] = fmt.Errorf("send token for %s: %w: the response did not report it", r.id, ErrSend)
		}
	}
}

// sendAttempts bounds the calls of one batch whose earlier calls got no
// answer.
const sendAttempts = 3

// noAnswer reports a call cut by its deadline or its HTTP timeout: whether
// it reached SQS is unknown.
func noAnswer(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

func entryIndex(id *string, n int) (int, bool) {
	i, err := strconv.Atoi(aws.ToString(id))
	return i, err == nil && i >= 0 && i < n
}

// each calls fn(i) for i in [0, n), at most limit at once, and returns when
// every call it started has returned. It stops starting calls when ctx ends
// and returns how many it started: calls 0..started-1.
func each(ctx context.Context, n, limit int, fn func(i int)) (started int) {
	var wg sync.WaitGroup
	defer wg.Wait()
	sem := make(chan struct{}, limit)
	for i := range n {
		if ctx.Err() != nil {
			return i
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			return i
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			fn(i)
		}()
	}
	return n
}
