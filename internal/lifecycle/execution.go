package lifecycle

import (
	"context"
	"sync"
	"time"

	"github.com/leasehold/leasehold/internal/durable"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/token"
)

// The execution record: one message's way through the states (states.go),
// and the few helpers every state uses. The states follow in the files in
// the order a message meets them: claim.go (received), run.go (claimed,
// running), finish.go (finishing), spawn.go (spawning, awaiting children,
// awaiting a callback), notify.go (notifying); and the branches callback.go,
// dependencies.go and resume.go. message.go decides what becomes of the
// message when its task cannot be settled here.

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
	// OutcomeDiverged: a workflow's run did not match its recorded
	// history (code changed under it); the task is held PENDING, without
	// using an attempt, and checked again with backoff.
	OutcomeDiverged Outcome = "diverged"
)

// OutcomeSuspended: the attempt parked the task WAITING for its children or
// a callback.
const OutcomeSuspended Outcome = "suspended"

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
	// Held: the token was held back without using an attempt. Before its
	// claim: by a rate window known full (Config.RateLimits) or because
	// its queue is paused (Message.Paused), the message coming back later.
	// After it: by its queue's rate limit or its kind's concurrency limit
	// (Config.KindConcurrency), the task released with its attempt handed
	// back (OutcomeHeld). (Beside Ack and Final: one word for the three,
	// which keeps the execution record in its size class.)
	Held bool
	// Final is the last state reached; Outcome is set when a handler ran.
	Final   State
	Outcome Outcome
	// Reason explains a message that was rejected or not acknowledged.
	Reason string
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
	// (The execution's state is run's own: a local of its loop, not a
	// field, which keeps the record in its size class.)

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
	// deadlineMS is when the handler's context ends for the invocation's
	// deadline (less DeadlineMargin), in milliseconds after startedAt (at
	// least 1, at most the int32's bound); 0 for none. Set before the
	// handler starts; Pause reads it. (An int32 in the record's padding:
	// the record stays in its size class.)
	deadlineMS int32
}

// flowState is an execution's workflow state: the handler context's view,
// and what one workflow state hands the next (docs/states.md), each in a
// field of its own type, set by the state that moves on and read by the
// state it moves to.
type flowState struct {
	ctx durable.Workflow
	// children is the handler's await of children, from StateFinishing to
	// StateSpawning.
	children *durable.AwaitChildrenError
	// callback is the handler's await of a callback, from StateFinishing to
	// StateAwaitingCallback.
	callback *durable.AwaitCallbackError
	// wait is what the task is suspended for once the children's tokens
	// are sent, from StateSpawning to StateAwaitingChildren.
	wait *lease.Wait
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

// owner is this execution's lease_owner (claimRecord.ownerName).
func (x *execution) owner() string { return x.claimed.ownerName }
