package eventsource

import (
	"context"
	crand "crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/leasehold/leasehold/internal/sqsevent"
)

// Handler has the shape of a Lambda handler for SQS events with
// ReportBatchItemFailures enabled, so the same function can be passed to
// lambda.Start or to New.
type Handler func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error)

// SQSClient is the part of *sqs.Client a Runner uses.
type SQSClient interface {
	GetQueueAttributes(ctx context.Context, params *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
	ReceiveMessage(ctx context.Context, params *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessageBatch(ctx context.Context, params *sqs.DeleteMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
}

// Receive-error backoff: doubling from backoffBase up to backoffMax, jittered.
const (
	backoffBase = 200 * time.Millisecond
	backoffMax  = 20 * time.Second
)

// Runner polls one queue and hands batches to a Handler. Create it with New.
type Runner struct {
	client  SQSClient
	cfg     Config
	handler Handler
	log     *slog.Logger
	running atomic.Bool
	// deletes batches the deletes of processed messages (deletes.go).
	deletes *deletes
	// visibility is the visibility timeout of received messages (the
	// configured one, else the queue's; zero if unknown).
	visibility time.Duration
}

// New checks cfg, fills in defaults and returns a Runner. Every problem with
// cfg is reported at once; each wraps ErrInvalidConfig.
func New(client SQSClient, cfg Config, h Handler) (*Runner, error) {
	cfg = cfg.withDefaults()
	err := cfg.validate()
	if client == nil {
		err = errors.Join(err, fmt.Errorf("%w: SQS client is nil", ErrInvalidConfig))
	}
	if h == nil {
		err = errors.Join(err, fmt.Errorf("%w: handler is nil", ErrInvalidConfig))
	}
	if err != nil {
		return nil, err
	}
	return &Runner{
		client:  client,
		cfg:     cfg,
		handler: h,
		log:     cfg.Logger.With("queue_url", cfg.QueueURL),
	}, nil
}

// Run polls the queue until ctx is done. It first looks up the queue's ARN;
// if that fails it returns the error (wrapping ErrQueueNotFound when the
// queue does not exist).
//
// When ctx is done Run stops receiving: an in-flight ReceiveMessage is let
// finish (at most WaitTime, since SQS may hand messages to a long poll even
// as its caller gives up, and those would stay invisible for the visibility
// timeout), no new one starts, messages already held go to the handler, and
// Run waits for every
// running handler call, deletes the messages they processed, and returns
// nil. Handler contexts are not cancelled by ctx: each keeps only its own
// InvocationTimeout deadline, so a handler that honours its context ends by
// then. Run cannot interrupt a handler that ignores its context; bounding the
// whole shutdown (a second signal, the orchestrator's kill deadline) is the
// caller's business.
func (r *Runner) Run(ctx context.Context) error {
	if !r.running.CompareAndSwap(false, true) {
		return ErrAlreadyRunning
	}
	defer r.running.Store(false)

	queue, err := r.resolveQueue(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil // shut down before it started
		}
		return err
	}
	r.log.Info("event source started", "queue_arn", queue.ARN, "pollers", r.cfg.Pollers,
		"batch_size", r.cfg.BatchSize, "batch_window", r.cfg.BatchWindow,
		"invocation_timeout", r.cfg.InvocationTimeout)

	r.deletes = newDeletes(r)
	stopDeletes := make(chan struct{})
	var deleter sync.WaitGroup
	deleter.Go(func() { r.deletes.run(context.WithoutCancel(ctx), stopDeletes) })
	var wg sync.WaitGroup
	for i := range r.cfg.Pollers {
		wg.Go(func() { r.poll(ctx, queue, r.log.With("poller", i)) })
	}
	wg.Wait()
	// Every batch has ended: the last deletes go out before Run returns.
	close(stopDeletes)
	deleter.Wait()
	r.log.Info("event source stopped")
	return nil
}

// resolveQueue asks SQS for the queue's ARN, which gives EventSourceARN and
// AWSRegion without parsing URLs, and checks the visibility timeout against
// the invocation timeout.
func (r *Runner) resolveQueue(ctx context.Context) (sqsevent.Queue, error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.CallTimeout)
	defer cancel()
	out, err := r.client.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{
		QueueUrl: aws.String(r.cfg.QueueURL),
		AttributeNames: []types.QueueAttributeName{
			types.QueueAttributeNameQueueArn,
			types.QueueAttributeNameVisibilityTimeout,
		},
	})
	if err != nil {
		if qne := (*types.QueueDoesNotExist)(nil); errors.As(err, &qne) {
			err = fmt.Errorf("%w: %w", ErrQueueNotFound, err)
		}
		return sqsevent.Queue{}, fmt.Errorf("get attributes of queue %s: %w", r.cfg.QueueURL, err)
	}
	queue, err := sqsevent.ParseQueueARN(out.Attributes[string(types.QueueAttributeNameQueueArn)])
	if err != nil {
		return sqsevent.Queue{}, fmt.Errorf("queue %s: %w", r.cfg.QueueURL, err)
	}

	visibility := r.cfg.VisibilityTimeout
	if visibility == 0 {
		secs, err := strconv.Atoi(out.Attributes[string(types.QueueAttributeNameVisibilityTimeout)])
		if err == nil {
			visibility = time.Duration(secs) * time.Second
		}
	}
	r.visibility = visibility
	if r.cfg.VisibilityTimeout == 0 && visibility > 0 && visibility < r.cfg.InvocationTimeout {
		// Lambda refuses to create such a mapping. Here it is only a warning:
		// a handler that extends visibility itself can be fine with it. A
		// receive visibility set on purpose is not warned about.
		r.log.Warn("visibility timeout is shorter than the invocation timeout; "+
			"messages may be delivered again while their batch is still running",
			"visibility_timeout", visibility, "invocation_timeout", r.cfg.InvocationTimeout)
	}
	return queue, nil
}

// pausePoll is how often a paused poller asks again.
const pausePoll = time.Second

// poll is one poller: gather a batch, invoke the handler, delete what
// succeeded, until ctx is done. It receives the next batch while the
// batches it started run (receive-ahead): the round trip of a receive is
// then hidden behind the handler's, as a bare consumer's cannot be. At
// most Config.InFlight of its batches run at once (one unless set): a
// batch received while that many run waits (hold) until one of them has
// ended, so that a poller's next batch can start while its last one's
// tail (its final writes) still runs, and no more than InFlight plus the
// one held are in its hands. Every goroutine running a batch is joined
// before poll returns.
func (r *Runner) poll(ctx context.Context, queue sqsevent.Queue, log *slog.Logger) {
	failures := 0
	paused := false
	// slots holds one token per batch running; a batch takes one before
	// it starts and gives it back when it has ended.
	slots := make(chan struct{}, r.cfg.InFlight)
	var running sync.WaitGroup
	defer running.Wait()
	for {
		if r.checkPaused(ctx, &paused, log) {
			if !sleep(ctx, pausePoll) {
				return
			}
			continue
		}
		msgs, err := r.gather(ctx)
		// A long poll in flight when the queue was paused can still bring
		// messages: they are handed back unrun.
		if len(msgs) > 0 && r.checkPaused(ctx, &paused, log) {
			r.handBack(msgs, log)
			msgs = nil
		}
		if len(msgs) > 0 {
			// Received messages are in flight even if ctx is done: process
			// them rather than leave them invisible until they time out.
			ev, bctx := queue.Event(msgs), ctx
			if r.cfg.Prepare != nil {
				bctx = r.cfg.Prepare(ctx, ev)
			}
			ahead := len(slots) > 0 // received while a batch ran
			r.hold(slots, msgs, log)
			// So is a batch received ahead that waited through the pause.
			if ahead && r.checkPaused(ctx, &paused, log) {
				<-slots
				r.handBack(msgs, log)
				if r.cfg.Release != nil {
					r.cfg.Release(bctx)
				}
			} else {
				running.Go(func() {
					defer func() { <-slots }()
					r.invoke(bctx, ev, log)
				})
			}
		}
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			failures = 0
			continue
		}
		failures++
		delay := backoff(failures)
		log.Warn("receive failed; backing off", "error", err, "attempt", failures, "delay", delay)
		if !sleep(ctx, delay) {
			return
		}
	}
}

// checkPaused asks Config.Paused, if set, whether the queue is paused now,
// and logs when the answer changes (*paused holds the last one). While
// ctx is done it does not ask: the poller is stopping, and what it has
// received is processed.
func (r *Runner) checkPaused(ctx context.Context, paused *bool, log *slog.Logger) bool {
	if r.cfg.Paused == nil || ctx.Err() != nil {
		return false
	}
	if now := r.cfg.Paused(ctx); now != *paused {
		*paused = now
		if now {
			log.Info("queue paused: receiving nothing until it is resumed (leasehold resume)")
		} else {
			log.Info("queue resumed")
		}
	}
	return *paused
}

// handBack makes msgs, received but not run because the queue is paused,
// visible again at once: they stay queued for when it is resumed. Each
// counts one more receive (ApproximateReceiveCount) for the receive that
// brought them. A client without ChangeMessageVisibilityBatch leaves them
// hidden until their visibility timeout ends, which loses nothing either.
func (r *Runner) handBack(msgs []types.Message, log *slog.Logger) {
	vc, ok := r.client.(visibilityChanger)
	if !ok {
		log.Info("queue paused: messages received before the pause stay hidden until their visibility timeout ends", "count", len(msgs))
		return
	}
	log.Info("queue paused: handing back messages received before the pause, unrun", "count", len(msgs))
	if failed, err := r.setVisibility(vc, msgs, 0); failed > 0 {
		log.Warn("could not hand back some messages received before the pause; they stay hidden until their visibility timeout ends", "error", err, "count", failed)
	}
}

// visibilityChanger is the call hold extends held messages with; a client
// without it (a test's fake) holds them unextended.
type visibilityChanger interface {
	ChangeMessageVisibilityBatch(ctx context.Context, params *sqs.ChangeMessageVisibilityBatchInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityBatchOutput, error)
}

// hold keeps msgs, received ahead, until one of the poller's slots is
// free (a batch it runs has ended), and takes it. Every quarter of the
// visibility timeout they wait, their visibility is extended by a whole
// timeout, so that long batches ahead of them do not let them reappear and
// be received again.
func (r *Runner) hold(slots chan<- struct{}, msgs []types.Message, log *slog.Logger) {
	select {
	case slots <- struct{}{}:
		return
	default:
	}
	vc, ok := r.client.(visibilityChanger)
	if !ok || r.visibility < time.Second {
		slots <- struct{}{}
		return
	}
	every := r.visibility / 4
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case slots <- struct{}{}:
			return
		case <-t.C:
			r.extendHeld(vc, msgs, log)
			t.Reset(every)
		}
	}
}

// extendHeld hides msgs for another visibility timeout. A message whose
// extension fails may be received again meanwhile; its task's lease keeps
// it from running twice.
func (r *Runner) extendHeld(vc visibilityChanger, msgs []types.Message, log *slog.Logger) {
	if failed, err := r.setVisibility(vc, msgs, int32(r.visibility/time.Second)); failed > 0 {
		log.Warn("could not extend the visibility of messages received ahead; they may be delivered again", "error", err, "count", failed)
	}
}

// setVisibility sets msgs' visibility timeout to secs, ten a call, each
// call under the call timeout. It returns how many it could not set, and
// the last call error if one failed whole.
func (r *Runner) setVisibility(vc visibilityChanger, msgs []types.Message, secs int32) (failed int, err error) {
	for chunk := range slices.Chunk(msgs, receiveLimit) {
		entries := make([]types.ChangeMessageVisibilityBatchRequestEntry, len(chunk))
		for i, m := range chunk {
			entries[i] = types.ChangeMessageVisibilityBatchRequestEntry{
				Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle, VisibilityTimeout: secs,
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), r.cfg.CallTimeout)
		out, cerr := vc.ChangeMessageVisibilityBatch(ctx, &sqs.ChangeMessageVisibilityBatchInput{QueueUrl: aws.String(r.cfg.QueueURL), Entries: entries})
		cancel()
		switch {
		case cerr != nil:
			failed, err = failed+len(chunk), cerr
		case len(out.Failed) > 0:
			failed += len(out.Failed)
		}
	}
	return failed, err
}

// gather receives until it holds BatchSize messages or, once the first
// message has arrived, BatchWindow has passed. Without a window it returns
// the first non-empty receive. It returns what it holds together with any
// receive error.
func (r *Runner) gather(ctx context.Context) ([]types.Message, error) {
	var batch []types.Message
	var windowEnd time.Time
	for len(batch) < r.cfg.BatchSize && ctx.Err() == nil {
		wait := r.cfg.WaitTime
		if len(batch) > 0 {
			left := time.Until(windowEnd)
			if left <= 0 {
				break
			}
			wait = min(wait, left.Truncate(time.Second))
		}
		msgs, err := r.receive(ctx, min(receiveLimit, r.cfg.BatchSize-len(batch)), wait)
		if err != nil {
			return batch, err
		}
		if len(batch) == 0 && len(msgs) > 0 {
			if r.cfg.BatchWindow == 0 {
				return msgs, nil
			}
			windowEnd = time.Now().Add(r.cfg.BatchWindow)
		}
		batch = append(batch, msgs...)
		if len(msgs) == 0 && len(batch) > 0 && wait == 0 {
			break // less than a second of window left and the queue is empty
		}
	}
	return batch, nil
}

func (r *Runner) receive(ctx context.Context, max int, wait time.Duration) ([]types.Message, error) {
	// Detached from shutdown: an abandoned long poll can still be handed
	// messages, which would then stay hidden until their visibility timeout.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.cfg.CallTimeout)
	defer cancel()
	out, err := r.client.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{
		QueueUrl:                    aws.String(r.cfg.QueueURL),
		MaxNumberOfMessages:         int32(max),
		WaitTimeSeconds:             int32(wait / time.Second),
		VisibilityTimeout:           int32(r.cfg.VisibilityTimeout / time.Second),
		MessageSystemAttributeNames: []types.MessageSystemAttributeName{types.MessageSystemAttributeNameAll},
		MessageAttributeNames:       []string{allMessageAttributes},
	})
	if err != nil {
		return nil, fmt.Errorf("receive from %s: %w", r.cfg.QueueURL, err)
	}
	return out.Messages, nil
}

// invoke runs the handler on one batch and deletes the messages it
// processed: each as soon as the handler acknowledges it (Ack), the rest of
// the successful ones when the batch ends. Shutdown (ctx) cancels neither the
// handler nor the deletes.
func (r *Runner) invoke(ctx context.Context, ev events.SQSEvent, log *slog.Logger) {
	requestID := newRequestID()
	log = log.With("request_id", requestID, "messages", len(ev.Records))

	detached := context.WithoutCancel(ctx)
	early := newEarlyDeletes(ev.Records)
	stop := make(chan struct{})
	var deleter sync.WaitGroup
	deleter.Go(func() {
		for {
			select {
			case <-early.wake:
				r.deletes.add(early.take())
			case <-stop:
				r.deletes.add(early.take())
				return
			}
		}
	})

	ictx, cancel := context.WithTimeout(detached, r.cfg.InvocationTimeout)
	defer cancel()
	ictx = lambdacontext.NewContext(ictx, &lambdacontext.LambdaContext{AwsRequestID: requestID})
	ictx = context.WithValue(ictx, ackKey{}, early)

	start := time.Now()
	resp, err := r.call(ictx, ev)
	acked := early.close()
	close(stop)
	deleter.Wait()
	if err == nil && errors.Is(ictx.Err(), context.DeadlineExceeded) {
		err = fmt.Errorf("%w after %s", errInvocationTimeout, r.cfg.InvocationTimeout)
	}
	var keep map[string]bool
	if err == nil {
		keep, err = failedMessages(ev, resp)
	}
	if err != nil {
		attrs := []any{"error", err, "duration", time.Since(start), "deleted_early", count(acked)}
		if pe := (*panicError)(nil); errors.As(err, &pe) {
			attrs = append(attrs, "stack", string(pe.stack))
		}
		log.Error("batch failed; its messages not acknowledged on the way will be delivered again", attrs...)
		return
	}

	var done []events.SQSMessage
	for i, m := range ev.Records {
		if !acked[i] && !keep[m.MessageId] {
			done = append(done, m)
		}
	}
	log.Debug("batch handled", "duration", time.Since(start), "failed", len(keep), "deleted_early", count(acked))
	r.deletes.add(done)
}

func count(bs []bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// call runs the handler, turning a panic into a *panicError.
func (r *Runner) call(ctx context.Context, ev events.SQSEvent) (resp events.SQSEventResponse, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &panicError{value: v, stack: debug.Stack()}
		}
	}()
	return r.handler(ctx, ev)
}

// failedMessages returns the message IDs a response reports as failed. As
// in Lambda, an empty or unknown ItemIdentifier fails the whole batch.
func failedMessages(ev events.SQSEvent, resp events.SQSEventResponse) (map[string]bool, error) {
	inBatch := make(map[string]bool, len(ev.Records))
	for _, m := range ev.Records {
		inBatch[m.MessageId] = true
	}
	failed := make(map[string]bool, len(resp.BatchItemFailures))
	for _, f := range resp.BatchItemFailures {
		if f.ItemIdentifier == "" {
			return nil, fmt.Errorf("%w: empty ItemIdentifier", errInvalidBatchItemFailure)
		}
		if !inBatch[f.ItemIdentifier] {
			return nil, fmt.Errorf("%w: ItemIdentifier %q is not in the batch", errInvalidBatchItemFailure, f.ItemIdentifier)
		}
		failed[f.ItemIdentifier] = true
	}
	return failed, nil
}

// deleteMessages deletes msgs in chunks of ten. A message that cannot be
// deleted is only logged: it will be delivered again.
func (r *Runner) deleteMessages(ctx context.Context, msgs []events.SQSMessage, log *slog.Logger) {
	for chunk := range slices.Chunk(msgs, receiveLimit) {
		entries := make([]types.DeleteMessageBatchRequestEntry, len(chunk))
		for i, m := range chunk {
			// Entry IDs are positions: a redelivered duplicate can put one
			// MessageId twice in a batch, and IDs must be unique per request.
			entries[i] = types.DeleteMessageBatchRequestEntry{
				Id:            aws.String(strconv.Itoa(i)),
				ReceiptHandle: aws.String(m.ReceiptHandle),
			}
		}
		cctx, cancel := context.WithTimeout(ctx, r.cfg.CallTimeout)
		out, err := r.client.DeleteMessageBatch(cctx, &sqs.DeleteMessageBatchInput{
			QueueUrl: aws.String(r.cfg.QueueURL),
			Entries:  entries,
		})
		cancel()
		if err != nil {
			log.Warn("delete failed; messages will be delivered again", "error", err, "count", len(chunk))
			continue
		}
		for _, f := range out.Failed {
			id := "unknown"
			if i, err := strconv.Atoi(aws.ToString(f.Id)); err == nil && i >= 0 && i < len(chunk) {
				id = chunk[i].MessageId
			}
			log.Warn("delete failed; message will be delivered again", "message_id", id,
				"code", aws.ToString(f.Code), "sender_fault", f.SenderFault, "reason", aws.ToString(f.Message))
		}
	}
}

// backoff returns the jittered delay before the attempt-th retry.
func backoff(attempt int) time.Duration {
	d := backoffMax
	if attempt < 20 {
		d = min(backoffMax, backoffBase<<(attempt-1))
	}
	return d/2 + rand.N(d/2+1)
}

// sleep waits for d, or returns false as soon as ctx is done.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// newRequestID returns a random UUID (version 4) to stand in for Lambda's
// AwsRequestID.
func newRequestID() string {
	var b [16]byte
	_, _ = crand.Read(b[:]) // never fails (crypto/rand)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}
