package lifecycle

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/jonboulle/clockwork"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasehold/leasehold/internal/durable"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/token"
)

// OutcomeSuspended: the attempt parked the task WAITING for its children or
// a callback.
const OutcomeSuspended Outcome = "suspended"

// MissingDependencyGrace is how long after its creation a task with a
// dependency that does not exist keeps waiting for it to appear; after that
// it is cancelled with the reason.
const MissingDependencyGrace = 5 * time.Minute

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

// Checkpoint records a step of the running handler under this attempt's
// lease (durable.Attempt), in StateStepping.
func (x *execution) Checkpoint(ctx context.Context, l lease.Lease, name string, result []byte) (lease.Task, error) {
	stepping(true)
	defer stepping(false)
	cctx, cancel := context.WithTimeout(ctx, x.cfg.CallTimeout)
	defer cancel()
	return x.cfg.Store.Checkpoint(cctx, l, name, result)
}

// ReadTasks reads the tasks ids for the running handler (durable.Attempt).
func (x *execution) ReadTasks(ctx context.Context, ids []string) ([]lease.Task, error) {
	return readTasks(ctx, x.cfg, ids)
}

// Clock is the worker's clock (durable.Attempt).
func (x *execution) Clock() clockwork.Clock { return x.cfg.Clock }

// Tracer is the worker's tracer, nil for none (durable.Attempt).
func (x *execution) Tracer() trace.Tracer { return x.cfg.Tracer }

// Trusted is trusted, for the running handler's steps (durable.Attempt).
func (x *execution) Trusted(ctx context.Context) error { return x.trusted(ctx) }

// loadWaitResults reads the tasks a claimed task waited for, for its
// handler.
func (x *execution) loadWaitResults() (*durable.WaitResults, error) {
	t := x.task
	if len(t.WaitFor) == 0 || (t.Wait != lease.WaitChildren && t.Wait != lease.WaitAfter && t.Wait != lease.WaitAfterAny) {
		return nil, nil
	}
	if t.Wait == lease.WaitChildren {
		// The children of a named await whose outcomes are recorded (AllOf)
		// are not read again.
		rest, _ := strings.CutPrefix(t.WaitFor[0], t.ID+"/")
		name, _, _ := strings.Cut(rest, "/")
		_, all := t.StepResult("children:" + name)
		_, mapped := t.StepResult("map:" + name)
		if (all || mapped) && durable.CheckAwaitName(name) == nil && strings.HasPrefix(t.WaitFor[0], t.ID+"/"+name+"/") {
			return nil, nil
		}
	}
	tasks, err := readTasks(x.detached, x.cfg, t.WaitFor)
	if err != nil {
		return nil, fmt.Errorf("%w, which %s waited for", err, t.ID)
	}
	return &durable.WaitResults{Mode: t.Wait, Tasks: tasks}, nil
}

// readTasks reads the tasks ids: with the store's GetMany when it has one
// (one BatchGetItem call per 100 ids on DynamoDB, each under the store's
// call timeout), else one Get each under the call timeout. A task that does
// not exist (its record expired) has only its ID.
func readTasks(ctx context.Context, cfg *Config, ids []string) ([]lease.Task, error) {
	if mg := cfg.caps.many; mg != nil {
		out, err := mg.GetMany(ctx, ids)
		if err != nil {
			return nil, fmt.Errorf("read %d tasks: %w", len(ids), err)
		}
		return out, nil
	}
	out := make([]lease.Task, len(ids))
	for i, id := range ids {
		cctx, cancel := context.WithTimeout(ctx, cfg.CallTimeout)
		got, err := cfg.Store.Get(cctx, id)
		cancel()
		switch {
		case errors.Is(err, lease.ErrNotFound):
			got = lease.Task{ID: id}
		case err != nil:
			return nil, fmt.Errorf("read %s: %w", id, err)
		}
		out[i] = got
	}
	return out, nil
}

// runSpawning sends the tokens of the children the handler asked for.
func (x *execution) runSpawning(ctx context.Context) State {
	ac := x.flow.children
	x.awaitSpan("children", len(ac.Children))
	return x.spawn(ctx, ac)
}

// runAwaitingChildren suspends the task until its children, whose tokens
// are sent, end.
func (x *execution) runAwaitingChildren(ctx context.Context) State {
	return x.suspend(ctx, *x.flow.wait)
}

// runAwaitingCallback arms the timeout of the callback the handler awaits,
// then suspends the task for it.
func (x *execution) runAwaitingCallback(ctx context.Context) State {
	x.awaitSpan("callback", 0)
	return x.awaitCallback(ctx, x.flow.callback)
}

// spawn sends the children's tokens; the task is then suspended until they
// end (StateAwaitingChildren).
func (x *execution) spawn(ctx context.Context, ac *durable.AwaitChildrenError) State {
	switch {
	case len(ac.Children) == 0 || len(ac.Children) > lease.MaxChildren:
		return x.failClaimed(ctx, fmt.Sprintf("await children: %d children, want 1..%d", len(ac.Children), lease.MaxChildren))
	case ac.IDs == nil && x.task.Wait == lease.WaitChildren && len(x.task.WaitFor) > 0:
		return x.failClaimed(ctx, "await children: this task has awaited its children already; AwaitChildren is once per task (workflow.All awaits by name, any number of times)")
	case ac.IDs != nil && len(ac.IDs) != len(ac.Children):
		return x.failClaimed(ctx, fmt.Sprintf("await children: %d ids for %d children", len(ac.IDs), len(ac.Children)))
	case ac.Timeout < 0 || ac.Timeout > MaxWaitTimeout:
		return x.failClaimed(ctx, fmt.Sprintf("await children: timeout %s is outside (0, %s]", ac.Timeout, MaxWaitTimeout))
	}
	ids := make([]string, len(ac.Children))
	bodies := make([]string, len(ac.Children))
	for i, c := range ac.Children {
		ids[i] = durable.ChildID(x.task.ID, i)
		if ac.IDs != nil {
			ids[i] = ac.IDs[i]
		}
		if err := lease.CheckID(ids[i]); err != nil {
			return x.failClaimed(ctx, fmt.Sprintf("await children: child id: %v", err))
		}
		maxAttempts := c.MaxAttempts
		if maxAttempts == 0 {
			maxAttempts = x.cfg.DefaultMaxAttempts
		}
		body, err := token.Token{ID: ids[i], Kind: c.Kind, Payload: c.Payload, MaxAttempts: maxAttempts, Queue: c.Queue, Parent: x.task.ID}.Encode()
		if err != nil {
			return x.failClaimed(ctx, fmt.Sprintf("await children: child %d: %v", i, err))
		}
		bodies[i] = body
	}
	// The children's tokens go first: once the parent waits, nothing but
	// their ends wakes it. A crash between the sends and the suspension
	// leaves the parent RUNNING, taken over when its lease expires; its
	// handler then spawns the same children again, which exist already.
	byQueue := map[string][]string{}
	var order []string
	for i, body := range bodies {
		queue := cmp.Or(ac.Children[i].Queue, x.task.Queue)
		if _, ok := byQueue[queue]; !ok {
			order = append(order, queue)
		}
		byQueue[queue] = append(byQueue[queue], body)
	}
	for _, queue := range order {
		if err := x.sendBatch(ctx, queue, byQueue[queue]); err != nil {
			reason := "await children: could not send the children's tokens: " + err.Error()
			delay := x.cfg.Backoff(x.task.Attempt)
			if x.task.Attempt >= x.task.MaxAttempts {
				// The parent fails next, once each child has a placeholder.
				// Until then it may not end: its attempt is handed back,
				// and the next one spawns again (and, failing again, cancels
				// again).
				if err := x.cancelUnspawned(ctx, ids, reason); err != nil {
					x.log.warn("could not cancel the children of a failing parent; its attempt is handed back to try again", "error", err)
					return x.reschedule(ctx, lease.Release{
						Status: lease.StatusPending, RunAt: x.cfg.Clock.Now().Add(delay), RefundAttempt: true,
						Error: reason + "; the parent cannot fail before its children are cancelled: " + err.Error(),
					}, OutcomeRetried)
				}
			}
			return x.retryOrFail(ctx, reason, delay, OutcomeRetried)
		}
	}
	until := x.cfg.Clock.Now().Add(cmp.Or(ac.Timeout, x.cfg.WaitTimeout))
	x.flow.wait = &lease.Wait{Mode: lease.WaitChildren, For: ids, Until: until, Note: ac.Note}
	return StateAwaitingChildren
}

// maxBatchBytes bounds the bodies of one SendMessageBatch call, under SQS's
// 256 KiB for a whole batch.
const maxBatchBytes = 240 << 10

// sendBatch puts bodies on the queue named queue, up to ten per
// SendMessageBatch call. Any entry that fails fails the whole send (a
// retry sends them all again: the children's ids make that harmless).
func (x *execution) sendBatch(ctx context.Context, queue string, bodies []string) error {
	rctx, cancel := x.call()
	url, err := x.cfg.Queues.URL(rctx, queue)
	cancel()
	if err != nil {
		return err
	}
	for start := 0; start < len(bodies); {
		// Up to ten entries and maxBatchBytes per call (SQS refuses a
		// batch over 256 KiB in all).
		end, size := start, 0
		for end < len(bodies) && end-start < 10 && (end == start || size+len(bodies[end]) <= maxBatchBytes) {
			size += len(bodies[end])
			end++
		}
		chunk := bodies[start:end]
		start = end
		entries := make([]types.SendMessageBatchRequestEntry, len(chunk))
		for i, b := range chunk {
			entries[i] = types.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), MessageBody: aws.String(b)}
		}
		cctx, cancel := x.call()
		out, err := x.cfg.SQS.SendMessageBatch(cctx, &sqs.SendMessageBatchInput{QueueUrl: aws.String(url), Entries: entries})
		cancel()
		switch {
		case err != nil:
			return err
		case len(out.Failed) > 0:
			return fmt.Errorf("%d of %d tokens refused: %s", len(out.Failed), len(chunk), aws.ToString(out.Failed[0].Message))
		case len(out.Successful) != len(chunk):
			return fmt.Errorf("%d of %d tokens confirmed", len(out.Successful), len(chunk))
		}
	}
	return nil
}

// awaitCallback arms the timeout, then suspends the task for the callback.
func (x *execution) awaitCallback(ctx context.Context, ac *durable.AwaitCallbackError) State {
	nonce := x.flow.ctx.CallbackNonce()
	switch {
	case nonce == "":
		return x.failClaimed(ctx, "await callback: the handler never took its callback token (CallbackToken), so nothing could complete the task")
	case ac.Timeout <= 0 || ac.Timeout > durable.MaxCallbackTimeout:
		return x.failClaimed(ctx, fmt.Sprintf("await callback: timeout %s is outside (0, %s]", ac.Timeout, durable.MaxCallbackTimeout))
	}
	until := x.cfg.Clock.Now().Add(ac.Timeout)
	w := lease.Wait{Mode: lease.WaitCallback, Until: until, Nonce: nonce, Step: ac.Step}
	if err := w.Validate(); err != nil {
		return x.failClaimed(ctx, "await callback: "+err.Error())
	}
	if ac.Step != "" {
		// The answer becomes a step: there must be room for it.
		steps := lease.Task{Steps: x.flow.ctx.Steps()}
		used := lease.StepsBytes(steps)
		if len(steps.Steps) >= lease.MaxSteps || used+lease.MaxCallbackAnswerBytes+32 > lease.MaxStepsBytes {
			return x.failClaimed(ctx, fmt.Sprintf("await callback %q: no room left for its answer among the task's steps (%d steps, %d bytes; limits %d and %d)",
				ac.Step, len(steps.Steps), used, lease.MaxSteps, lease.MaxStepsBytes))
		}
	}
	if ac.Timeout > MaxSQSDelay {
		// The sweep index holds the deadline (the suspension writes the
		// entry): no message keeps the time.
		return x.suspend(ctx, w)
	}
	// A timeout SQS can delay a message for: one token, sent first, so a
	// crash after the suspension cannot leave the wait without an end. It
	// carries the deadline: no sweep entry (two index writes saved).
	if err := x.send(ctx, token.Ref(x.task.ID), ac.Timeout); err != nil {
		return x.retryOrFail(ctx, fmt.Sprintf("await callback: could not arm the timeout: %v", err), x.cfg.Backoff(x.task.Attempt), OutcomeRetried)
	}
	w.Carried = true
	return x.suspend(ctx, w)
}

// suspend parks the held task WAITING for w.
func (x *execution) suspend(ctx context.Context, w lease.Wait) State {
	task, err := x.leaseWrite(lease.StatusWaiting, "",
		func(ctx context.Context, l lease.Lease) (lease.Task, error) { return x.cfg.Store.Suspend(ctx, l, w) })
	if err != nil {
		return x.leaseWriteFailed(ctx, err, "could not suspend: lease already lost", "could not suspend the task")
	}
	if task.CancelRequested {
		// Cancelled while its attempt ran, after the last renewal: end the
		// wait at once, its children first.
		return x.endWaiting(ctx, task, lease.StatusCancelled, CancelledOnRequest)
	}
	x.record(task, OutcomeSuspended, x.running.handlerTime)
	x.log.info("task suspended", "wait", string(w.Mode), "children", len(w.For))
	if lease.Complete(task) {
		// Every child ended before the suspension landed.
		if err := x.wake(ctx, task); err != nil {
			return x.exit(false, err.Error())
		}
	}
	return x.exit(true, "")
}

// wake sends a token that resumes waiter t, whose wait is over: its
// worker resumes and claims it in one write (resumeClaim, runResuming). Nothing else is
// written here, so a crash after the send loses nothing, and a crash
// before it leaves this message to come back and notify again.
func (x *execution) wake(ctx context.Context, t lease.Task) error {
	if err := x.sendTo(ctx, t.Queue, token.Wake(t.ID), 0); err != nil {
		return fmt.Errorf("wake %s: %w", t.ID, err)
	}
	return nil
}

// resumeClaim answers a wake token. It reads the task (a read costs a
// fifth of a write whose condition fails) and, if it still waits and its
// wait is over, resumes and claims it in one write (runResuming). The
// read is also what keeps a forged wake token harmless: a task whose wait
// is not over is not resumed. Anything else is a reference token's claim.
func (x *execution) resumeClaim(ctx context.Context, id string) State {
	cctx, cancel := x.call()
	t, err := x.cfg.Store.Get(cctx, id)
	cancel()
	switch {
	case err == nil && t.Status == lease.StatusWaiting:
		x.task = t
		return StateResuming
	case err != nil && errors.Is(err, lease.ErrBackend):
		return x.keep(ctx, 0, err.Error())
	}
	return x.claim(ctx, id)
}

// maxCascade bounds how far one execution follows cancellations down a
// chain of dependents; a redelivery of its message goes on from there.
const maxCascade = 32

// notifyWaiters tells every waiter of t, which has ended, and wakes those
// whose wait is over. An error leaves the message to come back, and its
// next delivery (a finished task's token) notifies again: every step is
// idempotent.
func (x *execution) notifyWaiters(ctx context.Context, t lease.Task) error {
	return x.notifyDepth(ctx, t, 0)
}

func (x *execution) notifyDepth(ctx context.Context, t lease.Task, depth int) error {
	if depth > maxCascade {
		return fmt.Errorf("notify: dependents more than %d deep", maxCascade)
	}
	for _, w := range t.Waiters {
		if err := x.notifyOne(ctx, w, t, depth); err != nil {
			return err
		}
	}
	return nil
}

// notifyOne tells waiter w that ended has ended.
func (x *execution) notifyOne(ctx context.Context, w lease.Waiter, ended lease.Task, depth int) error {
	cctx, cancel := x.call()
	got, err := x.cfg.Store.Notify(cctx, w, ended)
	cancel()
	var fin *lease.FinishedError
	switch {
	case err == nil, errors.Is(err, lease.ErrNotified):
		// (A repeated notification: got is the waiter as seen.)
	case errors.As(err, &fin):
		got = fin.Task
		if got.Status != lease.StatusCancelled {
			return nil
		}
		// Cancelled, perhaps by this very notification on an earlier
		// delivery: tell its own waiters, idempotently.
	case errors.Is(err, lease.ErrNotFound), errors.Is(err, lease.ErrNotWaiting):
		return nil
	default:
		return fmt.Errorf("notify %s: %w", w.ID, err)
	}
	switch {
	case got.Status == lease.StatusCancelled:
		if err == nil {
			x.log.info("dependent cancelled", "dependent", got.ID, "reason", got.Error)
		}
		return x.notifyDepth(ctx, got, depth+1)
	case lease.Complete(got):
		return x.wake(ctx, got)
	}
	return nil
}

// ended exits with ack and reason once the waiters of x.task, which has
// ended (or was released to run again), are told (StateNotifying).
func (x *execution) ended(ack bool, reason string) State {
	x.exit(ack, reason)
	return StateNotifying
}

// runNotifying notifies the waiters of x.task, if it has ended, and starts
// the next link of its chain, before the message is acknowledged.
func (x *execution) runNotifying(ctx context.Context) State {
	if (len(x.task.Waiters) == 0 && len(x.task.Then) == 0) || !x.task.Status.Terminal() {
		return StateExited
	}
	err := x.notifyWaiters(ctx, x.task)
	if err == nil {
		err = x.advanceChain(ctx, x.task)
	}
	if err != nil {
		x.log.warn("could not notify the tasks waiting for this one or start its chain's next link; the message comes back to retry", "error", err)
		x.result.Ack = false
		x.result.Reason = cmp.Or(x.fate.failReason, err.Error())
	}
	return StateExited
}

// advanceChain starts the next link of t's chain once t has SUCCEEDED:
// one inline token, which its worker creates and claims in one write,
// carrying the links after it. If t did not succeed, its later links are
// recorded CANCELLED with the reason, so that none runs and each says
// why. Both are idempotent (the links' ids are fixed), so a redelivery of
// t's message does them again safely.
func (x *execution) advanceChain(ctx context.Context, t lease.Task) error {
	if len(t.Then) == 0 {
		return nil
	}
	if t.Status != lease.StatusSucceeded {
		reason := lease.ChainReason(t)
		for _, l := range t.Then {
			cctx, cancel := x.call()
			_, err := x.cfg.Store.CreateCancelled(cctx, l.ID, "", reason)
			cancel()
			if err != nil && !errors.Is(err, lease.ErrAlreadyExists) {
				return fmt.Errorf("cancel chain link %s: %w", l.ID, err)
			}
		}
		return nil
	}
	next := t.Then[0]
	body, err := token.Token{ID: next.ID, Kind: next.Kind, Payload: next.Payload, MaxAttempts: next.MaxAttempts,
		Queue: next.Queue, Then: t.Then[1:], Prev: t.ID}.Encode()
	if err != nil { // checked when the chain was enqueued
		return fmt.Errorf("chain link %s: %w", next.ID, err)
	}
	return x.sendTo(ctx, cmp.Or(next.Queue, t.Queue), body, 0)
}

// runResuming answers a token whose task is WAITING (x.task, as read).
func (x *execution) runResuming(ctx context.Context) State {
	t := x.task
	x.log.kind = t.Kind
	if t.CancelRequested {
		// Flagged while running, then suspended (its worker stopped before
		// ending the wait): finish the cancel.
		return x.endWaiting(ctx, t, lease.StatusCancelled, CancelledOnRequest)
	}
	now := x.cfg.Clock.Now()
	switch {
	case t.Wait == lease.WaitCallback && !now.Before(t.WaitUntil):
		return x.callbackTimedOut(ctx, t)
	case t.Wait == lease.WaitCallback:
		return x.earlyCallbackToken(ctx, t, now)
	case lease.Complete(t):
		// Its wait is over (the last ending sent a wake token, or this is
		// another token of the task): resume and claim in one write.
		cctx, cancel := x.call()
		cctx, span := x.startSpan(cctx, "leasehold.claim")
		task, err := x.cfg.Store.Resume(cctx, t.ID, t.Fence, x.owner())
		endSpan(span, err)
		cancel()
		switch {
		case err == nil:
			x.task, x.claimed.resumed = task, true
			return StateClaimed
		case errors.Is(err, lease.ErrNotWaiting):
			// Another token's worker resumed it first, or it left WAITING
			// otherwise (its callback's timeout made it PENDING, say):
			// claim it if it can be claimed.
			return x.claim(ctx, t.ID)
		case errors.Is(err, lease.ErrFinished):
			// Ended since it was read: its waiters may not have heard.
			if st, ok := x.endedElsewhere(err, ""); ok {
				return st
			}
			return x.exit(true, "")
		case errors.Is(err, lease.ErrAttemptsExhausted):
			return x.exit(true, "")
		}
		return x.keep(ctx, 0, err.Error())
	case !t.WaitUntil.IsZero() && !now.Before(t.WaitUntil) && dependencyWait(t):
		return x.dependencyDeadline(ctx, t)
	case !t.WaitUntil.IsZero() && !now.Before(t.WaitUntil):
		return x.waitTimedOut(ctx, t)
	case dependencyWait(t) && !t.DispatchAt.IsZero() && t.DispatchAt.Before(t.WaitUntil):
		return x.checkRegistrations(ctx, t)
	}
	// Still waiting: its children's or dependencies' ends wake it, or its
	// deadline's sweep entry. This token is a duplicate or forged: it is
	// acknowledged and nothing is sent.
	x.log.info("token for a waiting task acknowledged; the end of what it waits for wakes it", "wait", string(t.Wait))
	return x.exit(true, "")
}

// callbackTimedOut fails the waiting attempt of t, whose callback did not
// come in time: retried after backoff, or failed for good on the last
// attempt.
func (x *execution) callbackTimedOut(ctx context.Context, t lease.Task) State {
	reason := fmt.Sprintf("callback not received by %s", t.WaitUntil.UTC().Format(time.RFC3339))
	e := lease.WaitEnd{ID: t.ID, Fence: t.Fence, Attempt: t.Attempt, Hash: lease.OperatorNonce(t), Error: reason, Status: lease.StatusFailed, TimedOut: true}
	delay := x.cfg.Backoff(t.Attempt)
	if t.Attempt < t.MaxAttempts {
		e.Status, e.RunAt = lease.StatusPending, x.cfg.Clock.Now().Add(delay)
	}
	cctx, cancel := x.call()
	task, err := x.cfg.Store.EndWait(cctx, e)
	cancel()
	switch {
	case err == nil:
	case errors.Is(err, lease.ErrFinished):
		// The callback came after all, and ended the task: its waiters
		// may not have heard (the callback's worker stopped first).
		if st, ok := x.endedElsewhere(err, ""); ok {
			return st
		}
		return x.exit(true, "")
	case errors.Is(err, lease.ErrNotWaiting), errors.Is(err, lease.ErrBadCallback):
		return x.exit(true, "") // the callback came after all
	default:
		return x.keep(ctx, 0, err.Error())
	}
	outcome := OutcomeRetried
	switch {
	case task.Status == lease.StatusFailed:
		outcome = OutcomeFailed
	case task.Status == lease.StatusPending && task.CancelRequested:
		// Cancelled after the read that found it waiting.
		if ended, ok := x.cancelFlagged(task); ok {
			task, outcome = ended, OutcomeCancelled
		}
	}
	x.record(task, outcome, 0)
	x.log.info("callback timed out", "status", string(task.Status))
	if task.Status == lease.StatusPending && delay <= MaxSQSDelay {
		if err := x.send(ctx, token.Ref(t.ID), delay); err != nil {
			return x.exit(false, err.Error()) // the sweep entry is the safety net
		}
	}
	return x.ended(true, "")
}

// runAwaitingDependencies creates the inline token's task, which has
// dependencies, WAITING for them.
func (x *execution) runAwaitingDependencies(ctx context.Context) State {
	return x.createWaiting(ctx, *x.in.dependent)
}

// createWaiting creates a task with dependencies (WAITING) from its token,
// registers it on each dependency, and tells it of those that ended
// already. Every step is idempotent, so a redelivery redoes them.
func (x *execution) createWaiting(ctx context.Context, nt lease.NewTask) State {
	var task lease.Task
	err := lease.ErrNotFound
	if nt.CreateToken != "" {
		// The client stores the task right after sending its token, so it
		// is most likely there: a read costs a fifth of a create whose
		// condition fails.
		cctx, cancel := x.call()
		task, err = x.cfg.Store.Get(cctx, nt.ID)
		cancel()
		if err == nil {
			err = lease.CheckDuplicate(task, nt) // a duplicate or a conflict
		}
	}
	if errors.Is(err, lease.ErrNotFound) {
		nt.WaitUntil = x.cfg.Clock.Now().Add(cmp.Or(x.in.tok.WaitTimeout, x.cfg.WaitTimeout))
		cctx, cancel := x.call()
		task, err = x.cfg.Store.Create(cctx, nt)
		cancel()
	}
	switch {
	case err == nil:
	case errors.Is(err, lease.ErrAlreadyExists):
		if task.Status != lease.StatusWaiting {
			if task.Status.Terminal() {
				x.task = task
				return x.ended(true, "")
			}
			return x.exit(true, "") // resumed already: its own token runs it
		}
	case errors.Is(err, lease.ErrConflict):
		return x.reject(ctx, err.Error())
	default:
		x.log.warn("could not create task", "error", err)
		return x.keep(ctx, 0, err.Error())
	}
	// x.task stays unset while this message must be kept: a token kept
	// past ReplaceAtReceiveCount is replaced by this very body (not a
	// reference), which still carries the dependencies to register.
	if st, done := x.registerOn(ctx, task, nt.After); !done {
		return st
	}
	return x.exit(true, "")
}

// registerOn registers task, which waits for dependencies, as a waiter on
// each of deps, and tells it of those that ended already. Every write is
// idempotent. It reports false with the state to end in when the message
// must be kept, or the wait was abandoned (a cycle, a full waiter set).
func (x *execution) registerOn(ctx context.Context, task lease.Task, deps []string) (State, bool) {
	w := lease.Waiter{ID: task.ID, Mode: task.Wait}
	for _, dep := range deps {
		cctx, cancel := x.call()
		seen, err := x.cfg.Store.Watch(cctx, dep, w)
		cancel()
		var fin *lease.FinishedError
		var ended lease.Task
		switch {
		case err == nil && waitsFor(seen, task.ID):
			return x.abandonWait(ctx, task, lease.StatusCancelled, cycleReason([]string{task.ID, seen.ID})), false
		case err == nil:
			continue
		case errors.Is(err, lease.ErrWaiterLimit):
			return x.abandonWait(ctx, task, lease.StatusCancelled, fmt.Sprintf("dependency %s has %d waiters already, the limit; this task cannot wait for it", dep, lease.MaxWaiters)), false
		case errors.As(err, &fin):
			ended = fin.Task
		case errors.Is(err, lease.ErrNotFound) && x.cfg.Clock.Since(task.CreatedAt) < MissingDependencyGrace:
			// Its token may not have been taken yet (both sent together):
			// look again shortly.
			return x.keep(ctx, x.cfg.VisibilityMargin, fmt.Sprintf("dependency %s not found yet", dep)), false
		case errors.Is(err, lease.ErrNotFound):
			ended = lease.Task{ID: dep} // no status: "does not exist"
		case errors.Is(err, lease.ErrInvalid):
			ended = lease.Task{ID: dep, Status: lease.StatusFailed, Error: err.Error()}
		default:
			return x.keep(ctx, 0, err.Error()), false
		}
		if err := x.notifyOne(ctx, w, ended, 0); err != nil {
			return x.keep(ctx, 0, err.Error()), false
		}
	}
	return StateExited, true // (the state is not used)
}

// checkRegistrations answers the sweep's token at a dependent's
// registration check (lease.ArmRegistrationCheck): t is still WAITING, so
// its own token may have been lost (dead-lettered) before it registered t
// on every dependency, and nothing would then wake t before its deadline.
// It registers t again on each dependency it has not heard of, which ends
// the wait if they ended meanwhile, then moves t's sweep entry to the
// deadline. A check that fails keeps the message: it comes back.
func (x *execution) checkRegistrations(ctx context.Context, t lease.Task) State {
	if st, done := x.registerOn(ctx, t, unended(t)); !done {
		return st
	}
	if m := x.cfg.caps.marker; m != nil {
		cctx, cancel := x.call()
		_, err := m.MarkDispatched(cctx, t.ID, t.DispatchAt, t.WaitUntil)
		cancel()
		if err != nil && !errors.Is(err, lease.ErrDispatchRaced) {
			// The entry stays where the sweep put it: the check comes again.
			x.log.warn("could not move a dependent's sweep entry to its deadline", "error", err)
		}
	}
	x.log.info("dependent's registrations checked", "dependencies", len(t.WaitFor))
	return x.exit(true, "")
}

// dependencyDeadline answers the sweep's token at the deadline of t, which
// still waits for dependencies. Its registrations are checked first, as at
// its registration check (checkRegistrations): a wait shorter than the
// dispatch grace gets no such check before its deadline, so a dependent
// whose own token was lost before it registered on every dependency would
// otherwise fail at its deadline although its dependencies had ended. A
// dependency that ended meanwhile is told to t now (which wakes t if its
// wait is over); t is then read again, and times out only if it still
// waits for something that has not ended.
func (x *execution) dependencyDeadline(ctx context.Context, t lease.Task) State {
	if st, done := x.registerOn(ctx, t, unended(t)); !done {
		return st
	}
	cctx, cancel := x.call()
	now, err := x.cfg.Store.Get(cctx, t.ID)
	cancel()
	switch {
	case errors.Is(err, lease.ErrNotFound):
		return x.exit(true, "")
	case err != nil:
		return x.keep(ctx, 0, err.Error())
	case now.Status != lease.StatusWaiting || now.Fence != t.Fence || lease.Complete(now):
		// Its wait ended (a strict dependency's failure cancelled it), or
		// is over: the notification that completed it sent its wake token.
		x.log.info("dependent's registrations checked at its deadline: it need not time out", "status", string(now.Status))
		return x.exit(true, "")
	}
	return x.waitTimedOut(ctx, now)
}

// runCallback applies a callback message: it ends the waiting attempt its
// token names, exactly once.
func (x *execution) runCallback(ctx context.Context) State {
	cb, err := token.ParseCallback(x.in.tok.Callback)
	if err != nil {
		return x.reject(ctx, err.Error())
	}
	x.log.taskID = cb.ID
	if lease.IsCallbackHash(cb.Nonce) {
		// The stored hash, which any reader of the table knows, in place
		// of the secret: no credential (only an operator's direct write,
		// by task, answers a wait without the secret).
		return x.reject(ctx, "callback token carries the stored hash of the callback's secret, not the secret: it answers nothing (an operator answers by task: leasehold complete --task)")
	}
	e := lease.WaitEnd{ID: cb.ID, Fence: cb.Fence, Attempt: cb.Attempt, Nonce: cb.Nonce, Status: lease.StatusSucceeded, Result: x.in.tok.Result}
	if x.in.tok.HasError {
		e.Status, e.Result, e.Error = lease.StatusFailed, nil, x.in.tok.Error
	}
	if e.Status == lease.StatusSucceeded {
		if err := checkResult(e.Result); err != nil {
			return x.reject(ctx, "callback: "+err.Error())
		}
	}
	cctx, cancel := x.call()
	task, err := x.cfg.Store.EndWait(cctx, e)
	cancel()
	var we *lease.WaitError
	switch {
	case err == nil:
		x.task = task
		x.log.info("callback accepted", "status", string(task.Status))
		if task.Status == lease.StatusPending {
			// A resumable wait's answer: run the task again now. Should the
			// send fail, its sweep entry dispatches it.
			if err := x.send(ctx, token.Ref(task.ID), 0); err != nil {
				x.log.warn("could not send the token that resumes the answered task; the sweep dispatches it", "error", err)
			}
		}
		return x.ended(true, "")
	case errors.As(err, &we) && errors.Is(err, lease.ErrNotWaiting) && we.Task.Status == lease.StatusRunning && we.Task.Fence == cb.Fence:
		// The callback beat the suspension of the attempt that handed out
		// the token: try again shortly.
		return x.keep(ctx, x.cfg.VisibilityMargin, "callback arrived before its task suspended")
	case errors.Is(err, lease.ErrBackend):
		return x.keep(ctx, 0, err.Error())
	case errors.Is(err, lease.ErrFinished):
		// Ended already: perhaps by this very answer, whose worker stopped
		// before it told the task's waiters. They are told again before
		// the message goes (rejected, as any answer to an ended task is).
		st := x.reject(ctx, "callback rejected: "+err.Error())
		var fin *lease.FinishedError
		if errors.As(err, &fin) && fin.Task.ID != "" {
			x.task = fin.Task
			return StateNotifying
		}
		return st
	}
	return x.reject(ctx, "callback rejected: "+err.Error())
}
