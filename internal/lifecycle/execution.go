package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime/debug"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/jonboulle/clockwork"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasehold/leasehold/internal/durable"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/queues"
	"github.com/leasehold/leasehold/internal/token"
	"github.com/leasehold/leasehold/internal/tracing"
)

// Outcome is how an attempt ended, as recorded.
type Outcome string

const (
	OutcomeSucceeded Outcome = "succeeded"
	OutcomeRetried   Outcome = "retried"   // failed; another attempt is scheduled
	OutcomeFailed    Outcome = "failed"    // failed for good
	OutcomeSnoozed   Outcome = "snoozed"   // asked to run later
	OutcomeCancelled Outcome = "cancelled" // cancelled by request or by the handler
	OutcomeReleased  Outcome = "released"  // deadline reached; released for an immediate retry
	OutcomeLeaseLost Outcome = "lease_lost"
	// OutcomeUnknownKind: no handler for the task's kind here; released
	// for later without using an attempt.
	OutcomeUnknownKind Outcome = "unknown_kind"
	// OutcomeHeld: the kind's concurrency limit was reached; released for
	// later without using an attempt (Config.KindConcurrency).
	OutcomeHeld Outcome = "held"
)

// Message is one SQS message of a batch.
type Message struct {
	ID            string
	ReceiptHandle string
	Body          string
	ReceiveCount  int
	SentAt        time.Time
	// QueueURL is the queue the message came from: its visibility changes
	// and deletion go there. Empty means Config.QueueURL.
	QueueURL string
	// Queue is that queue's name, recorded on a task an inline token
	// creates without naming a queue, so the task's retries come back to
	// it. Empty records no queue (the default work queue).
	Queue string
	// TraceHeader is the message's AWSTraceHeader system attribute (an
	// X-Ray trace header), if any: the attempt span links to it.
	TraceHeader string
	// Paused: the message's queue is paused (`leasehold pause`). Its token
	// is handed back unrun, with no write to its task (holdForPause).
	Paused bool
}

// Result says what the batch response should say about a message.
type Result struct {
	// Ack: the message is done with and may be deleted. When false it is
	// reported as a batch item failure and comes back later.
	Ack bool
	// Final is the last state reached; Outcome is set when a handler ran.
	Final   State
	Outcome Outcome
	// Reason explains a message that was rejected or not acknowledged.
	Reason string
	// Held: the token was held back without using an attempt. Before its
	// claim: by a rate window known full (Config.RateLimits) or because
	// its queue is paused (Message.Paused), the message coming back later.
	// After it: by its queue's rate limit or its kind's concurrency limit
	// (Config.KindConcurrency), the task released with its attempt handed
	// back (OutcomeHeld).
	Held bool
}

// handlerResult is what the handler goroutine hands back.
type handlerResult struct {
	result []byte
	err    error
}

// execution carries one message through the states. Its fields are few on
// purpose: what only some states need sits in a sub-record owned by those
// states (intake, msgFate, claimRecord, runRecord, flowState), kept by
// value so that the whole record is one allocation. The states hand each
// other typed values through them, never an any.
type execution struct {
	cfg *Config
	log taskLog
	msg Message
	// detached is the invocation's context without its cancellation: the
	// parent of the handler's and the renewer's contexts and of each remote
	// call's timeout.
	detached context.Context
	state    State
	// task is the message's task as this execution last read or wrote it.
	task lease.Task

	// in is what StateReceived learnt of the message's token.
	in intake
	// fate is what the message's acknowledgement depends on beyond its
	// task's state.
	fate msgFate
	// claimed is this attempt's claim (StateClaimed on).
	claimed claimRecord
	// running is the handler's run (StateRunning, StateFinishing).
	running runRecord
	// flow is the workflow's state: the handler context's view, and what
	// one workflow state hands the next.
	flow flowState
	// tr holds the attempt's spans (trace.go); nil without a Tracer.
	tr *traced

	result Result
}

// intake is the message's token as StateReceived decoded and routed it.
type intake struct {
	tok token.Token
	// pre is the message's token as its batch decoded it, with the batch
	// listing entry its inline create records (listing.go); nil for a
	// message processed alone.
	pre *received
	// tokenErr is a decode error that still names a task (an over-limit
	// inline payload): the task is recorded and failed, never run, whichever
	// way it gets claimed.
	tokenErr error
	// fallback is the task a claim creates when the id is not stored: an
	// inline token with a create token is claimed first. (A pointer: most
	// executions have none, and the record stays in a smaller size class.)
	fallback *lease.NewTask
	// dependent is the task StateAwaitingDependencies creates WAITING: an
	// inline token with dependencies.
	dependent *lease.NewTask
}

// msgFate is what decides the message's acknowledgement besides its task.
type msgFate struct {
	// failReason is the reason of a claimed task failed without running
	// (failClaimed): the Result's reason even when its waiters cannot be
	// told (runNotifying).
	failReason string
	// replaced: a fresh token for the task was sent and this message
	// deleted (or left to be deleted by the acknowledgement); nothing more
	// may be sent for it, and it is acknowledged whatever happens next.
	replaced bool
	// keepMessage: the message must not be acknowledged, because its body
	// is kept nowhere else (an over-limit inline token without a
	// dead-letter URL: the queue's redrive policy moves it).
	keepMessage bool
}

// claimRecord is this attempt's claim, from the claim's write on.
type claimRecord struct {
	// ownerName is this execution's lease_owner: unique per execution, so a
	// write that meets its own name knows it met its own earlier try.
	ownerName string
	// slotHolder names this execution's concurrency slot of its task's
	// kind, once taken (holdForSlot); releaseSlot gives it back.
	slotHolder string
	// claimInfo is the claim of this attempt, for the Observer (when
	// hasClaim).
	claimInfo Claim
	// hasClaim: claimInfo is set. resumed: the claim resumed the task after
	// a wait, which is not a start (holdForRate).
	hasClaim, resumed bool
}

// runRecord is the handler's run: set by runClaimed, waited for by
// runRunning, read by runFinishing.
type runRecord struct {
	handler Handler
	// handlerDone is closed when the handler's goroutine has left its
	// result in handlerResult, which is read only after that.
	handlerDone   chan struct{}
	handlerResult handlerResult
	// handlerStarted is done once the handler's goroutine has copied
	// x.task, the task it hands the handler: until then x.task is not
	// written (runRunning waits for it before abandoning the handler).
	handlerStarted sync.WaitGroup
	cancelHandler  context.CancelCauseFunc
	handlerCtx     context.Context
	// handlerParent is the parent of handlerCtx: the detached context
	// carrying the workflow state (what context.WithValue would build, kept
	// in the record instead of allocated).
	handlerParent  durable.Scope
	renewer        renewer
	renewerRunning sync.WaitGroup
	// timers is the Executor's pool of the timer runRunning waits with.
	timers *sync.Pool
	// vis extends this message's visibility together with the rest of its
	// batch while the handler runs; nil for a message processed on its own.
	vis       *batchVisibility
	startedAt time.Time
	// handlerTime is from the start to the handler's return (or
	// abandonment).
	handlerTime time.Duration
	// cause is the handler context's cause once the run is over.
	cause error
	// finished: the handler returned (false: abandoned at the deadline),
	// and handlerResult may be read.
	finished bool
}

// exit ends the execution with ack deciding the message's fate.
func (x *execution) exit(ack bool, reason string) State {
	x.result.Ack = ack && !x.fate.keepMessage || x.fate.replaced
	if reason != "" {
		x.result.Reason = reason
	}
	return StateExited
}

// call bounds one remote call by the call timeout. It is detached from the
// invocation's cancellation so that clean-up writes still land after a
// shutdown signal; the timeout still bounds them.
func (x *execution) call() (context.Context, context.CancelFunc) {
	return context.WithTimeout(x.detached, x.cfg.CallTimeout)
}

// runReceived decodes the token and routes it: a callback, a task with
// dependencies, or a task to claim, created first for an inline token
// (seed: WaitingForTask).
func (x *execution) runReceived(ctx context.Context) State {
	var (
		tok token.Token
		err error
	)
	if x.in.pre != nil {
		tok, err = x.in.pre.tok, x.in.pre.err
	} else {
		tok, err = token.Decode(x.msg.Body)
	}
	x.in.tok = tok
	if err != nil && !errors.Is(err, token.ErrPayloadTooBig) {
		return x.reject(ctx, err.Error())
	}
	if err != nil && tok.Kind == "" {
		return x.reject(ctx, err.Error())
	}
	x.in.tokenErr = err
	x.startAttempt()
	if x.msg.Paused && x.in.tokenErr == nil {
		// Nothing of a paused queue's starts: not a task, a callback or a
		// wake. (A message that names no task that can run, rejected or
		// over the payload limit, takes its usual way: it runs nothing.)
		x.log.taskID = tok.ID
		return x.holdForPause()
	}
	if tok.IsCallback() {
		return StateCallback
	}
	if tok.Inline() {
		id := tok.ID
		if id == "" {
			id = x.msg.ID
		}
		maxAttempts := tok.MaxAttempts
		if maxAttempts == 0 {
			maxAttempts = x.cfg.DefaultMaxAttempts
		}
		x.log.taskID, x.log.kind = id, tok.Kind
		queue := tok.Queue
		if queue == "" && tok.CreateToken == "" {
			// A token sent before its create names the task's queue as
			// the client stores it ("" is the default work queue); any
			// other records the queue it arrived on.
			queue = x.msg.Queue
		}
		nt := lease.NewTask{ID: id, Kind: tok.Kind, Payload: tok.Payload, MaxAttempts: maxAttempts, Queue: queue, CreateToken: tok.CreateToken,
			Parent: tok.Parent, After: tok.After, AfterAny: tok.AfterAny, Then: tok.Then, Prev: tok.Prev}
		if x.in.tokenErr != nil {
			// The task is recorded without its payload, so the body goes
			// to the dead-letter queue first: it is never lost with the
			// message.
			nt.After, nt.AfterAny = nil, false
			if x.cfg.DeadLetterURL == "" {
				x.fate.keepMessage = true
			} else if err := x.sendDead(x.in.tokenErr.Error()); err != nil {
				x.log.error("could not forward an over-limit token to the dead-letter queue; the message is kept", "error", err)
				return x.exit(false, x.in.tokenErr.Error())
			}
			return x.createFailed(ctx, nt)
		}
		if len(nt.After) > 0 {
			dep := nt          // its own variable: only a dependent's record moves to the heap
			dep.Carried = true // this message brings it back until it is created and registered
			x.in.dependent = &dep
			return StateAwaitingDependencies
		}
		if st, held := x.heldByWindow(); held {
			return st
		}
		if tok.CreateToken != "" {
			// The sender stores this task too, most likely before this
			// token arrives: claim it, and create it only if it is not
			// stored (yet, or ever: the sender stopped after the send).
			fallback := nt // a copy, so that only this path allocates one
			x.in.fallback = &fallback
			return x.claim(ctx, id)
		}
		if x.in.pre != nil {
			nt.Listing = x.in.pre.listing
		}
		return x.createClaimed(ctx, nt)
	}
	x.log.taskID = tok.ID
	if tok.Wake {
		return x.resumeClaim(ctx, tok.ID)
	}
	if st, held := x.heldByWindow(); held {
		return st
	}
	return x.claim(ctx, tok.ID)
}

// createClaimed creates the inline task nt already claimed by this
// execution, or claims it when it exists.
func (x *execution) createClaimed(ctx context.Context, nt lease.NewTask) State {
	cctx, cancel := x.call()
	cctx, span := x.startSpan(cctx, "leasehold.claim")
	task, err := x.cfg.Store.CreateClaimed(cctx, nt, x.owner())
	endSpan(span, err)
	cancel()
	switch {
	case err == nil:
		x.task = task
		return StateClaimed
	case errors.Is(err, lease.ErrAlreadyExists) && lease.ClaimedBy(x.owner(), task):
		// The create landed but its response was lost; the SDK's
		// retry met the task this execution had just created.
		x.log.info("create response lost; the task is held by this execution")
		x.task = task
		return StateClaimed
	case (errors.Is(err, lease.ErrConflict) || errors.Is(err, lease.ErrAlreadyExists)) && lease.ChildTaken(task, nt):
		return x.childTaken(ctx, nt) // the child's id names another task
	case errors.Is(err, lease.ErrConflict): // the id names another task
		return x.reject(ctx, err.Error())
	case errors.Is(err, lease.ErrAlreadyExists):
		x.in.fallback = nil
		return x.claim(ctx, nt.ID)
	default:
		x.log.warn("could not create task", "error", err)
		return x.keep(ctx, 0, err.Error())
	}
}

func (x *execution) owner() string { return x.claimed.ownerName }

// createFailed records an inline task that names itself but cannot run (an
// over-limit payload, not stored) as FAILED in one write, so no token can
// ever claim and run it without its payload.
func (x *execution) createFailed(ctx context.Context, nt lease.NewTask) State {
	reason := x.in.tokenErr.Error() + "; the message, payload included, is on the dead-letter queue"
	if x.fate.keepMessage {
		reason = x.in.tokenErr.Error() + "; the message, payload included, is left to the queue's redrive policy, which moves it to the dead-letter queue"
	}
	cctx, cancel := x.call()
	defer cancel()
	task, err := x.cfg.Store.CreateFailed(cctx, nt, reason)
	switch {
	case err == nil:
		x.record(task, OutcomeFailed, 0)
		x.log.warn("task rejected", "reason", reason)
		return x.ended(true, reason)
	case errors.Is(err, lease.ErrAlreadyExists):
		// Recorded before (this message's earlier receive, or a create
		// whose response was lost), or submitted otherwise: a finished task
		// is acknowledged, any other is claimed and failed with this reason
		// (runClaimed), never run.
		return x.claim(ctx, nt.ID)
	default:
		x.log.warn("could not create task", "error", err)
		return x.keep(ctx, 0, err.Error())
	}
}

// claim takes the lease of a stored task and sorts out every way that fails.
func (x *execution) claim(ctx context.Context, id string) State {
	cctx, cancel := x.call()
	defer cancel()
	cctx, span := x.startSpan(cctx, "leasehold.claim")
	task, err := x.cfg.Store.Claim(cctx, id, x.owner())
	endSpan(span, err)
	if err == nil {
		x.task = task
		x.log.kind = task.Kind
		return StateClaimed
	}
	var (
		leased    *lease.LeasedError
		notDue    *lease.NotDueError
		exhausted *lease.ExhaustedError
		waiting   *lease.WaitingError
		finished  *lease.FinishedError
	)
	switch {
	case errors.Is(err, lease.ErrNotFound) && x.in.fallback != nil:
		// Not stored yet: the token carries the task, so create it.
		nt := *x.in.fallback
		x.in.fallback = nil
		return x.createClaimed(ctx, nt)
	case errors.Is(err, lease.ErrNotFound):
		return x.reject(ctx, fmt.Sprintf("task %s not found", id))
	case errors.As(err, &leased) && lease.ClaimedBy(x.owner(), leased.Task):
		// The claim landed but its response was lost; the SDK's retry met
		// this execution's own lease.
		x.log.info("claim response lost; the task is held by this execution")
		x.task = leased.Task
		x.log.kind = x.task.Kind
		return StateClaimed
	case errors.As(err, &leased):
		// Someone else holds it: keep this token until the lease can be
		// taken over instead of spinning on it.
		x.log.info("task leased elsewhere; keeping the token for later", "remaining", leased.Remaining)
		return x.keep(ctx, leased.Remaining+x.cfg.VisibilityMargin, err.Error())
	case errors.As(err, &finished):
		x.log.info("duplicate delivery of a finished task acknowledged", "error", err)
		// Its waiters may not have heard yet (the worker that ended it
		// stopped first): tell them again, idempotently.
		x.task = finished.Task
		return x.ended(true, "")
	case errors.As(err, &waiting):
		x.task = waiting.Task
		return StateResuming
	case errors.As(err, &notDue):
		return x.redispatch(ctx, id, notDue.RunAt)
	case errors.As(err, &exhausted):
		// The holder of the last attempt vanished: fail the task for good.
		x.task = exhausted.Task
		msg := fmt.Sprintf("lease of attempt %d of %d expired without a result", exhausted.Task.Attempt, exhausted.Task.MaxAttempts)
		return x.release(ctx, lease.Release{Status: lease.StatusFailed, Error: msg}, OutcomeFailed)
	default:
		x.log.warn("claim failed", "error", err)
		return x.keep(ctx, 0, err.Error())
	}
}

// runClaimed starts the handler and the renewer (seed: TaskClaimed).
func (x *execution) runClaimed(ctx context.Context) State {
	x.log.claimed, x.log.attempt, x.log.fence = true, x.task.Attempt, x.task.Fence
	x.claimedSpan()
	if x.cfg.Observer != nil {
		x.claimed.claimInfo = Claim{
			Attempt: x.task.Attempt, CreatedAt: x.task.CreatedAt, RunAt: x.task.RunAt,
			SinceEnqueue: x.cfg.Clock.Since(x.task.CreatedAt),
		}
		x.claimed.hasClaim = true
	}
	if x.task.CancelRequested {
		// Cancelled while a worker that has since vanished held it.
		return x.release(ctx, lease.Release{Status: lease.StatusCancelled, Error: "cancelled on request"}, OutcomeCancelled)
	}
	if x.in.tokenErr != nil {
		// An over-limit payload was recorded without its bytes: never run
		// it, however the task came to be claimed.
		return x.failClaimed(ctx, x.in.tokenErr.Error())
	}
	if x.msg.ReceiveCount >= x.cfg.ReplaceAtReceiveCount {
		// A crash during this attempt would bring the message back once
		// more, perhaps past maxReceiveCount into the dead-letter queue.
		// Hand the task to a fresh token now, due when a takeover would be
		// possible, and delete this message.
		x.replace(ctx, x.cfg.LeaseDuration+x.cfg.VisibilityMargin, "")
	}
	h, ok := x.cfg.Handlers(x.task.Kind)
	if !ok {
		return x.unknownKind(ctx)
	}
	if st, held := x.holdForSlot(ctx); held {
		return st
	}
	if st, held := x.holdForRate(ctx); held {
		return st
	}
	x.running.handler = h
	results, err := x.loadWaitResults()
	if err != nil {
		return x.retryOrFail(ctx, err.Error(), x.cfg.Backoff(x.task.Attempt), OutcomeRetried)
	}
	x.flow.ctx.Start(x, x.task.LeaseOf(), x.task.Steps, x.task.WaitNote, results)

	// The handler's context: cancelled with a cause when the lease is lost,
	// the task is cancelled, or the invocation deadline draws near. It is
	// detached from shutdown of the invocation's context so that a graceful
	// stop lets a running handler finish within its own deadline.
	x.running.handlerParent = durable.Scope{Context: x.detached, Workflow: &x.flow.ctx}
	hctx, cancel := context.WithCancelCause(&x.running.handlerParent)
	x.running.handlerCtx, x.running.cancelHandler = hctx, cancel

	x.running.renewer = renewer{x: x, lease: x.task.LeaseOf()}
	x.running.renewer.trust(x.task.LeaseUntil)
	if x.running.vis != nil && !x.fate.replaced {
		x.running.vis.join(x)
	}
	// The renewer's goroutine (and its context) start at the first renewal,
	// from runRunning's wait, so a handler that returns before then (most
	// do) costs no goroutine and no wake-up for it.

	x.running.handlerDone = make(chan struct{})
	x.running.startedAt = x.cfg.Clock.Now()
	x.running.handlerStarted.Add(1)
	go x.runHandler()
	return StateRunning
}

// runHandler is the handler's goroutine. It leaves the result in
// handlerResult and then closes handlerDone; nothing else touches
// handlerResult, so a handler abandoned at the deadline races with nobody.
// It reads x.task, x.running.handler and x.running.handlerCtx only before it marks
// handlerStarted done; none of them is written before that.
func (x *execution) runHandler() {
	h, ctx, task := x.running.handler, x.running.handlerCtx, x.task
	x.running.handlerStarted.Done()
	defer func() {
		if v := recover(); v != nil {
			x.running.handlerResult = handlerResult{err: &PanicError{Value: v, Stack: debug.Stack()}}
		}
		close(x.running.handlerDone)
	}()
	if x.trusted(ctx) != nil {
		x.running.handlerResult.err = errNotStarted
		return
	}
	x.running.handlerResult.result, x.running.handlerResult.err = h(ctx, task)
}

// unknownKind answers a claimed task whose kind has no handler here. The
// kind is not the task's fault: another fleet on the queue may know it (a
// rolling deploy, a second worker on a shared queue), or a worker for it may
// come. So the task is released without using an attempt, with the reason,
// and offered again after a wait that grows with the time since the kind was
// first found unknown. Only once the kind has stayed unknown for
// UnknownKindLimit does the task fail, so bad input is never retried for
// ever.
func (x *execution) unknownKind(ctx context.Context) State {
	now := x.cfg.Clock.Now()
	since := x.task.UnknownKindSince
	if since.IsZero() {
		since = now
	}
	unknownFor := now.Sub(since)
	if unknownFor >= x.cfg.UnknownKindLimit {
		reason := fmt.Sprintf("unknown task kind %q: no worker had a handler for it in %s (since %s)",
			x.task.Kind, x.cfg.UnknownKindLimit, since.UTC().Format(time.RFC3339))
		return x.failClaimed(ctx, reason)
	}
	wait := min(max(unknownFor, x.cfg.UnknownKindBackoffMin), x.cfg.UnknownKindBackoffMax)
	// Jitter within [wait/2, wait] (never below the minimum), so tasks
	// found unknown together do not come back together.
	if half := wait / 2; half > 0 {
		wait = max(half+rand.N(wait-half+1), min(x.cfg.UnknownKindBackoffMin, wait))
	}
	reason := fmt.Sprintf("unknown task kind %q: no handler on this worker; offered again in %s without using an attempt",
		x.task.Kind, wait.Round(time.Second))
	x.log.warn("no handler for the task's kind; task released without using an attempt",
		"reason", reason, "unknown_since", since, "retry_in", wait, "queue", x.task.Queue)
	x.result.Reason = reason
	return x.reschedule(ctx, lease.Release{
		Status: lease.StatusPending, RunAt: now.Add(wait), Error: reason, UnknownKind: true,
	}, OutcomeUnknownKind)
}

// runRunning waits for the handler, enforcing the deadline (seed:
// WorkerStarted). It starts the renewer at the first renewal; the renewer
// runs alongside and cancels the handler's context itself when the lease is
// lost or cancellation is requested.
//
// One timer, from the Executor's pool, wakes the wait for whichever comes
// first of the renewer's start, the deadline and, past the deadline, the end
// of the handler's grace.
func (x *execution) runRunning(ctx context.Context) State {
	clock := x.cfg.Clock
	renewAt := x.running.renewer.firstRenewal()
	var deadline, graceUntil time.Time // zero: none, or not yet
	if dl, ok := ctx.Deadline(); ok {  // the invocation's deadline, as runClaimed saw it
		deadline = dl.Add(-x.cfg.DeadlineMargin)
	}
	var (
		timer       clockwork.Timer
		stopRenewer context.CancelFunc // set once the renewer runs
	)
wait:
	for {
		// The next moment to wake at, if any.
		var next time.Time
		if stopRenewer == nil {
			next = renewAt
		}
		if graceUntil.IsZero() && !deadline.IsZero() && (next.IsZero() || deadline.Before(next)) {
			next = deadline
		}
		if !graceUntil.IsZero() && (next.IsZero() || graceUntil.Before(next)) {
			next = graceUntil
		}
		var wake <-chan time.Time
		if !next.IsZero() {
			timer = x.armTimer(timer, max(clock.Until(next), 0))
			wake = timer.Chan()
		}
		select {
		case <-x.running.handlerDone:
			x.running.finished = true
			break wait
		case <-wake:
		}
		now := clock.Now()
		if now.Before(next) {
			// The timer ran its course (it counts on the monotonic clock):
			// what it was armed for is due, even if the wall clock was set
			// back meanwhile.
			now = next
		}
		if stopRenewer == nil && !now.Before(renewAt) {
			var rctx context.Context
			rctx, stopRenewer = context.WithCancel(x.detached)
			x.running.renewerRunning.Add(1)
			go func() {
				defer x.running.renewerRunning.Done()
				x.running.renewer.run(rctx)
			}()
		}
		switch {
		case graceUntil.IsZero() && !deadline.IsZero() && !now.Before(deadline):
			x.running.cancelHandler(ErrDeadline)
			// Give the handler half the margin to wind down, then move on
			// without it: its writes are fenced, so it can do no harm.
			graceUntil = now.Add(x.cfg.DeadlineMargin / 2)
		case !graceUntil.IsZero() && !now.Before(graceUntil):
			x.log.warn("handler ignored its cancelled context; abandoning it")
			x.running.handlerStarted.Wait() // it no longer reads x.task
			break wait
		}
	}
	if timer != nil {
		x.releaseTimer(timer)
	}
	x.running.handlerTime = clock.Since(x.running.startedAt)
	x.running.cause = context.Cause(x.running.handlerCtx)
	// Stop and join the renewer before the outcome is written: a renewal
	// racing the finish write would only fail harmlessly, but a joined
	// renewer keeps every goroutine owned by this invocation.
	if stopRenewer != nil {
		stopRenewer()
		x.running.renewerRunning.Wait()
	}
	if x.running.vis != nil {
		x.running.vis.leave(x) // waits for a batch call still extending the message
	}
	x.running.cancelHandler(context.Canceled)
	return StateFinishing
}

// armTimer sets t (nil: one from the pool, or a new one) to fire after d,
// with no earlier expiry left in its channel, and returns it.
func (x *execution) armTimer(t clockwork.Timer, d time.Duration) clockwork.Timer {
	if t == nil {
		if pooled, ok := x.running.timers.Get().(clockwork.Timer); ok {
			t = pooled
		} else {
			return x.cfg.Clock.NewTimer(d)
		}
	}
	stopTimer(t)
	t.Reset(d)
	return t
}

// releaseTimer stops t and returns it to the pool. Only runRunning's wait
// uses it, and that has ended.
func (x *execution) releaseTimer(t clockwork.Timer) {
	stopTimer(t)
	x.running.timers.Put(t)
}

// stopTimer stops t and drops an expiry left unread in its channel (a fake
// clock's timer keeps one; Go's own keep none since Go 1.23).
func stopTimer(t clockwork.Timer) {
	if !t.Stop() {
		select {
		case <-t.Chan():
		default:
		}
	}
}

// runFinishing records the outcome (seed: WorkerFinishedProcessing).
func (x *execution) runFinishing(ctx context.Context) State {
	var res handlerResult // (zero for a handler abandoned at the deadline)
	if x.running.finished {
		res = x.running.handlerResult
	}
	cause := x.running.cause
	elapsed := x.running.handlerTime
	x.log.timed, x.log.durationMS = true, elapsed.Milliseconds()
	switch {
	case errors.Is(cause, ErrLeaseLost) && x.leaseGone():
		x.log.warn("lease lost; the result of this attempt is discarded")
		x.observe(OutcomeLeaseLost, elapsed)
		return x.lost(ctx, cause)
	case x.running.finished && res.err == nil:
		return x.finish(ctx, res.result, elapsed)
	case errors.Is(cause, ErrCancelRequested):
		return x.release(ctx, lease.Release{Status: lease.StatusCancelled, Error: "cancelled on request"}, OutcomeCancelled)
	case errors.Is(cause, ErrDeadline):
		return x.retryOrFail(ctx, "invocation deadline reached before the handler finished", 0, OutcomeReleased)
	case res.err == errNotStarted:
		// Nothing ran. The release is fenced: if another worker holds the
		// task now, it fails and the lost lease is handled as any other.
		return x.retryOrFail(ctx, errNotStarted.Error(), 0, OutcomeReleased)
	}
	err := res.err
	var (
		children *durable.AwaitChildrenError
		callback *durable.AwaitCallbackError
	)
	switch {
	case errors.As(err, &children):
		x.flow.children = children
		return StateSpawning
	case errors.As(err, &callback):
		x.flow.callback = callback
		return StateAwaitingCallback
	}
	steer, delay := SteerOf(err)
	switch steer {
	case SteerSnooze:
		runAt := x.cfg.Clock.Now().Add(delay)
		return x.reschedule(ctx, lease.Release{Status: lease.StatusPending, RunAt: runAt, Error: err.Error(), RefundAttempt: true}, OutcomeSnoozed)
	case SteerCancel:
		return x.release(ctx, lease.Release{Status: lease.StatusCancelled, Error: err.Error()}, OutcomeCancelled)
	case SteerFail:
		return x.release(ctx, lease.Release{Status: lease.StatusFailed, Error: err.Error()}, OutcomeFailed)
	}
	var panicked *PanicError
	if errors.As(err, &panicked) {
		x.log.error("handler panicked", "panic", fmt.Sprint(panicked.Value), "stack", string(panicked.Stack))
	}
	return x.retryOrFail(ctx, err.Error(), x.cfg.Backoff(x.task.Attempt), OutcomeRetried)
}

// leaseGone reports whether the renewer learnt for certain that the lease is
// someone else's (as opposed to merely unconfirmed).
func (x *execution) leaseGone() bool {
	var lost *lostError
	return errors.As(context.Cause(x.running.handlerCtx), &lost) && lost.definite
}

func (x *execution) finish(ctx context.Context, result []byte, elapsed time.Duration) State {
	// A result the store cannot keep will never be kept: fail the task now
	// with the reason instead of re-running the handler until its lease
	// runs out.
	if err := checkResult(result); err != nil {
		return x.failClaimed(ctx, err.Error())
	}
	task, err := x.leaseWrite(lease.StatusSucceeded, "finish response lost; the retried write met this execution's own result",
		func(ctx context.Context, l lease.Lease) (lease.Task, error) {
			return x.cfg.Store.Finish(ctx, l, result)
		})
	switch {
	case err == nil:
		x.record(task, OutcomeSucceeded, elapsed)
		// DEBUG: a success is the common case, and its metrics line
		// (Observer) already names the task, attempt and outcome.
		x.log.debug("task succeeded")
		return x.ended(true, "")
	case errors.Is(err, lease.ErrLeaseLost), errors.Is(err, lease.ErrNotFound):
		x.log.warn("finished, but the lease was lost; another worker took over", "error", err)
		x.observe(OutcomeLeaseLost, elapsed)
		return x.lost(ctx, err)
	case errors.Is(err, lease.ErrInvalid):
		return x.failClaimed(ctx, err.Error())
	default:
		// The result could not be stored. Keep the token: the task will be
		// taken over once the lease expires.
		x.log.error("could not record result", "error", err)
		return x.keep(ctx, 0, err.Error())
	}
}

// leaseWrite makes write, a write of status under the task's lease, within
// one call's time. A write whose response was lost, met by the SDK's retry
// (ownWriteLanded), has landed: leaseWrite returns the item the retry saw
// and no error, and logs landed, if it is not empty.
func (x *execution) leaseWrite(status lease.Status, landed string, write func(ctx context.Context, l lease.Lease) (lease.Task, error)) (lease.Task, error) {
	cctx, cancel := x.call()
	defer cancel()
	cctx, span := x.startSpan(cctx, "leasehold.finish")
	if span != nil {
		span.SetAttributes(attribute.String(tracing.AttrStatus, string(status)))
	}
	l := x.task.LeaseOf()
	task, err := write(cctx, l)
	endSpan(span, err)
	if obs, ok := ownWriteLanded(err, l, status); ok {
		if landed != "" {
			x.log.info(landed)
		}
		return obs, nil
	}
	return task, err
}

// leaseWriteFailed answers a write under the lease that failed with err:
// a lease that is gone (lost, after logging gone), or any other failure,
// which keeps the message (after logging failed).
func (x *execution) leaseWriteFailed(ctx context.Context, err error, gone, failed string) State {
	if errors.Is(err, lease.ErrLeaseLost) || errors.Is(err, lease.ErrNotFound) {
		x.log.warn(gone, "error", err)
		return x.lost(ctx, err)
	}
	x.log.error(failed, "error", err)
	return x.keep(ctx, 0, err.Error())
}

// ownWriteLanded reports whether err, from a write of status under l, says
// the lease was lost only because the write had already landed: the SDK's
// retry met this execution's own write. It returns the item the failed write
// saw.
func ownWriteLanded(err error, l lease.Lease, status lease.Status) (lease.Task, bool) {
	if err == nil || !errors.Is(err, lease.ErrLeaseLost) {
		return lease.Task{}, false // (and no allocation for a nil error)
	}
	obs, ok := lease.Observed(err)
	return obs, ok && lease.Landed(l, status, obs)
}

// retryOrFail schedules another attempt after delay, or fails the task when
// it has no attempts left.
func (x *execution) retryOrFail(ctx context.Context, msg string, delay time.Duration, outcome Outcome) State {
	if x.task.Attempt >= x.task.MaxAttempts {
		return x.release(ctx, lease.Release{Status: lease.StatusFailed, Error: msg}, OutcomeFailed)
	}
	runAt := x.cfg.Clock.Now().Add(delay)
	return x.reschedule(ctx, lease.Release{Status: lease.StatusPending, RunAt: runAt, Error: msg}, outcome)
}

// reschedule releases the task to PENDING and arranges its next dispatch: a
// fresh delayed token when SQS can hold the wait, else the sweeper. Sending a
// fresh token keeps retries from burning the queue's maxReceiveCount.
func (x *execution) reschedule(ctx context.Context, r lease.Release, outcome Outcome) State {
	wait := x.cfg.Clock.Until(r.RunAt)
	if wait > MaxSQSDelay {
		r.DispatchAt = r.RunAt
	}
	st := x.release(ctx, r, outcome)
	if !x.result.Ack || wait > MaxSQSDelay || x.fate.replaced || x.task.Status.Terminal() {
		// (A token sent at the claim already stands for the task; arriving
		// early, it is sent again with the time still to wait.)
		return st
	}
	if err := x.send(ctx, token.Ref(x.task.ID), wait); err != nil {
		if errors.Is(err, queues.ErrNotFound) {
			// The task's queue is gone. The task is PENDING in the sweep
			// index, which dispatches it once the queue exists again;
			// this message is done with.
			return x.exit(true, err.Error())
		}
		// The task is safe in the table; let this message come back and
		// redo the dispatch, with the sweeper as the last resort.
		return x.exit(false, err.Error())
	}
	return st
}

// release gives the lease up as r says.
func (x *execution) release(ctx context.Context, r lease.Release, outcome Outcome) State {
	task, err := x.leaseWrite(r.Status, "release response lost; the retried write met this execution's own release",
		func(ctx context.Context, l lease.Lease) (lease.Task, error) { return x.cfg.Store.Release(ctx, l, r) })
	if err != nil {
		return x.leaseWriteFailed(ctx, err, "could not release: lease already lost", "could not release lease")
	}
	if task.Status == lease.StatusPending && task.CancelRequested {
		if ended, ok := x.cancelFlagged(task); ok {
			task, outcome = ended, OutcomeCancelled
		}
	}
	x.record(task, outcome, x.running.handlerTime)
	x.log.info("task released", "outcome", string(outcome), "status", string(task.Status), "error", r.Error)
	return x.ended(true, "")
}

// failClaimed fails a task this execution holds without running it.
func (x *execution) failClaimed(ctx context.Context, reason string) State {
	x.log.warn("task rejected", "reason", reason)
	st := x.release(ctx, lease.Release{Status: lease.StatusFailed, Error: reason}, OutcomeFailed)
	x.result.Reason = reason
	x.fate.failReason = reason
	return st
}

// redispatch answers a token that arrived before its task is due.
func (x *execution) redispatch(ctx context.Context, id string, runAt time.Time) State {
	wait := x.cfg.Clock.Until(runAt)
	if wait > MaxSQSDelay {
		// Pending tasks always sit in the sweep index; the sweeper
		// dispatches it when due.
		return x.exit(true, "")
	}
	if err := x.send(ctx, token.Ref(id), wait); err != nil {
		// A queue that is gone leaves the task to the sweep (a PENDING
		// task is always in its index).
		return x.exit(errors.Is(err, queues.ErrNotFound), err.Error())
	}
	return x.exit(true, "")
}

// send puts a fresh token with body on the task's queue: the queue the task
// names once it is known, else the queue this message came from. A queue
// that does not exist gives an error wrapping queues.ErrNotFound.
func (x *execution) send(ctx context.Context, body string, delay time.Duration) error {
	if x.task.ID != "" {
		return x.sendTo(ctx, x.task.Queue, body, delay)
	}
	return x.sendURL(ctx, x.msgQueueURL(), body, delay)
}

// sendTo puts body on the queue named queue ("" is the default work queue).
func (x *execution) sendTo(ctx context.Context, queue, body string, delay time.Duration) error {
	// Resolved like any clean-up call: detached from shutdown, bounded by
	// the call timeout (a cached name makes no call).
	rctx, cancel := x.call()
	u, err := x.cfg.Queues.URL(rctx, queue)
	cancel()
	if err != nil {
		x.log.warn("could not find the task's queue; the task waits for a later sweep", "queue", queue, "reason", err)
		return fmt.Errorf("send token: %w", err)
	}
	return x.sendURL(ctx, u, body, delay)
}

func (x *execution) sendURL(ctx context.Context, queueURL, body string, delay time.Duration) error {
	cctx, cancel := x.call()
	defer cancel()
	// In whole milliseconds first, as the store keeps run_at: a token for
	// a backoff of 2.0004 s and a later one for the same run_at say the
	// same delay.
	secs := int32(math.Ceil(max(delay, 0).Truncate(time.Millisecond).Seconds()))
	_, err := x.cfg.SQS.SendMessage(cctx, &sqs.SendMessageInput{
		QueueUrl:     aws.String(queueURL),
		MessageBody:  aws.String(body),
		DelaySeconds: min(secs, int32(MaxSQSDelay/time.Second)),
	})
	if qne := (*types.QueueDoesNotExist)(nil); errors.As(err, &qne) {
		// Deleted since its URL was looked up.
		err = fmt.Errorf("%w: %w", queues.ErrNotFound, err)
	}
	if err != nil {
		x.log.warn("could not send dispatch token", "queue_url", queueURL, "error", err)
		return fmt.Errorf("send token: %w", err)
	}
	return nil
}

// lost handles a lease found gone (err carries the item the failed write
// saw, or is ErrNotFound). The message is acknowledged only when the task is
// finished or gone. Otherwise this message may be the very token the new
// holder got the task through, and deleting it with this receive's handle
// may delete the new holder's delivery (SQS says a delete with an older
// receipt handle "might not" delete; emulators always do). If the new holder
// then died, nothing would bring the task back. So a fresh reference token,
// delayed until the other lease can be taken over, replaces this one before
// it is acknowledged.
//
// A task found ended is ended by the attempt that took it over, whose
// worker may have stopped between its end's write and the telling of the
// task's waiters; and this message may be the last token of the task (its
// delete may delete the other holder's delivery too). So its waiters are
// told again, idempotently, before this message is acknowledged
// (StateNotifying), as for any token of an ended task (endedElsewhere).
func (x *execution) lost(ctx context.Context, err error) State {
	x.result.Outcome = OutcomeLeaseLost
	obs, ok := lease.Observed(err)
	if !ok {
		return x.exit(true, "lease lost") // the task is gone: nobody to tell
	}
	if obs.Status.Terminal() {
		x.task = obs
		return x.ended(true, "lease lost")
	}
	x.task = obs
	var wait time.Duration
	switch obs.Status {
	case lease.StatusRunning:
		wait = x.cfg.Clock.Until(obs.LeaseUntil) + x.cfg.VisibilityMargin
	case lease.StatusPending:
		wait = x.cfg.Clock.Until(obs.RunAt)
	}
	st := x.replace(ctx, max(wait, 0), "lease lost")
	if !x.result.Ack {
		// No fresh token: keep this one hidden until the takeover instead.
		x.hide(ctx, max(wait, 0))
	}
	return st
}

// endedElsewhere answers a write that found this message's task ended by
// another writer: err is a lease.FinishedError carrying the item the write
// saw. Whoever ended it may have stopped before telling the task's waiters,
// and this message may be the task's last token, so they are told again
// (idempotently) before it is acknowledged: every path that acknowledges a
// token of an ended task goes through StateNotifying. It reports false
// when err is no such error.
func (x *execution) endedElsewhere(err error, reason string) (State, bool) {
	var fin *lease.FinishedError
	if !errors.As(err, &fin) || fin.Task.ID == "" {
		return 0, false
	}
	x.task = fin.Task
	return x.ended(true, reason), true
}

// keep answers a message whose task is not finished and cannot be run now:
// the token must survive until the task can run. Below the configured
// receive count the message is hidden for d (or, for d == 0, left to the
// queue's visibility timeout); from it on, the message is replaced by a
// fresh token delayed by d, so that a valid token never reaches the
// dead-letter queue through maxReceiveCount.
func (x *execution) keep(ctx context.Context, d time.Duration, reason string) State {
	if x.msg.ReceiveCount >= x.cfg.ReplaceAtReceiveCount {
		if d == 0 {
			d = x.cfg.VisibilityMargin
		}
		if st := x.replace(ctx, d, reason); x.result.Ack {
			return st
		}
	}
	if d > 0 {
		x.hide(ctx, d)
	}
	return x.exit(false, reason)
}

// replace sends a fresh token for this message's task, delayed by d, and
// acknowledges this message once it is sent. Without a body to send, or
// when the send fails, the message is left unacknowledged.
func (x *execution) replace(ctx context.Context, d time.Duration, reason string) State {
	if x.fate.replaced {
		return x.exit(true, reason)
	}
	body := x.replacementBody()
	if body == "" {
		return x.exit(false, reason)
	}
	if err := x.send(ctx, body, min(d, MaxSQSDelay)); err != nil {
		return x.exit(false, reason)
	}
	x.fate.replaced = true
	x.log.info("token replaced by a fresh one", "delay", d, "receive_count", x.msg.ReceiveCount, "reason", reason)
	// Delete this message now rather than with the batch's answer: an
	// invocation that dies before answering would otherwise bring it back
	// with one more receive.
	cctx, cancel := x.call()
	defer cancel()
	if _, err := x.cfg.SQS.DeleteMessage(cctx, &sqs.DeleteMessageInput{
		QueueUrl:      aws.String(x.msgQueueURL()),
		ReceiptHandle: aws.String(x.msg.ReceiptHandle),
	}); err != nil {
		x.log.warn("could not delete the replaced message; the batch answer acknowledges it", "error", err)
	}
	return x.exit(true, reason)
}

// msgQueueURL is the URL of the queue this message came from.
func (x *execution) msgQueueURL() string {
	if x.msg.QueueURL != "" {
		return x.msg.QueueURL
	}
	return x.cfg.QueueURL
}

// replacementBody is a token naming the same task as this message: a
// reference once the task is known to exist, else the inline submission with
// its task id made explicit ("" when that cannot be rebuilt).
func (x *execution) replacementBody() string {
	switch {
	case len(x.in.tok.After) > 0 && x.task.Status == lease.StatusWaiting:
		// A dependent whose registrations on its dependencies may be
		// unfinished: only its own token redoes them (createWaiting). A
		// reference would find it WAITING and acknowledge it.
		return x.msg.Body
	case x.task.ID != "":
		return token.Ref(x.task.ID)
	case !x.in.tok.Inline():
		return x.msg.Body
	case x.in.tokenErr != nil:
		return ""
	case x.in.tok.ID != "":
		return x.msg.Body
	}
	tok := x.in.tok
	tok.ID = x.msg.ID
	body, err := tok.Encode()
	if err != nil {
		return ""
	}
	return body
}

// hide makes the message invisible for d.
func (x *execution) hide(ctx context.Context, d time.Duration) {
	cctx, cancel := x.call()
	defer cancel()
	_, err := x.cfg.SQS.ChangeMessageVisibility(cctx, &sqs.ChangeMessageVisibilityInput{
		QueueUrl:          aws.String(x.msgQueueURL()),
		ReceiptHandle:     aws.String(x.msg.ReceiptHandle),
		VisibilityTimeout: visibilitySeconds(d),
	})
	if err != nil {
		x.log.warn("could not change message visibility", "error", err)
	}
}

// checkResult is the store's check of a result plus JSON validity: a result
// is a JSON document (empty means none).
func checkResult(result []byte) error {
	if err := lease.CheckResult(result); err != nil {
		return fmt.Errorf("result cannot be stored: %w", err)
	}
	if len(result) > 0 {
		if p := lease.JSONProblem(result); p != "" {
			if p != lease.TooDeep {
				p = "is not a JSON document"
			}
			return fmt.Errorf("result cannot be stored: %w: result %s", lease.ErrInvalid, p)
		}
	}
	return nil
}

func visibilitySeconds(d time.Duration) int32 {
	secs := int32(math.Ceil(d.Seconds()))
	return min(max(secs, 0), 12*60*60)
}

// reject handles a message that names no task that can be recorded: the
// reason goes to the log (never the body) and, with the body, to the
// dead-letter queue. Without a dead-letter URL the message is left to the
// queue's redrive policy, which moves it after maxReceiveCount receives.
func (x *execution) reject(ctx context.Context, reason string) State {
	x.log.warn("message rejected", "reason", reason, "receive_count", x.msg.ReceiveCount)
	if x.cfg.DeadLetterURL == "" {
		return x.exit(false, reason)
	}
	if err := x.sendDead(reason); err != nil {
		x.log.error("could not forward rejected message to the dead-letter queue", "error", err)
		return x.exit(false, reason)
	}
	return x.exit(true, reason)
}

// sendDead sends the message's body to the dead-letter queue with reason.
func (x *execution) sendDead(reason string) error {
	cctx, cancel := x.call()
	defer cancel()
	if x.tr != nil {
		cctx = trace.ContextWithSpanContext(cctx, trace.SpanContext{}) // the body goes as it came
	}
	_, err := x.cfg.SQS.SendMessage(cctx, &sqs.SendMessageInput{
		QueueUrl:    aws.String(x.cfg.DeadLetterURL),
		MessageBody: aws.String(x.msg.Body),
		MessageAttributes: map[string]types.MessageAttributeValue{
			AttrReason:          {DataType: aws.String("String"), StringValue: aws.String(lease.Truncate(reason, 1024))},
			AttrSourceMessageID: {DataType: aws.String("String"), StringValue: aws.String(x.msg.ID)},
		},
	})
	return err
}

// Message attributes on a message forwarded to the dead-letter queue.
const (
	AttrReason          = "leasehold-reason"
	AttrSourceMessageID = "leasehold-source-message-id"
)

// record takes task, as the write that settled this message left it, and
// outcome, how the message ended, and reports them to the Observer (d: how
// long the handler ran).
func (x *execution) record(task lease.Task, outcome Outcome, d time.Duration) {
	x.task = task
	x.result.Outcome = outcome
	x.observe(outcome, d)
}

func (x *execution) observe(o Outcome, d time.Duration) {
	if x.cfg.Observer == nil {
		return
	}
	e := Ended{Task: x.task, Outcome: o, HandlerTime: d}
	if x.claimed.hasClaim {
		e.Claim = &x.claimed.claimInfo
	}
	x.cfg.Observer.Ended(e)
}
