package lifecycle

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/leasehold/leasehold/internal/claimcheck"
	"github.com/leasehold/leasehold/internal/durable"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/metadata"
	"github.com/leasehold/leasehold/internal/token"
)

// StateSpawning, StateAwaitingChildren and StateAwaitingCallback: a handler
// that awaits children or a callback has its task suspended WAITING.

// runSpawning sends the tokens of the children the handler asked for.
func (x *execution) runSpawning(ctx context.Context) State {
	ac := x.flow.children
	x.awaitSpan("children", len(ac.Children))
	return x.spawn(ctx, ac)
}

// spawn sends the children's tokens; the task is then suspended until they
// end (StateAwaitingChildren).
func (x *execution) spawn(ctx context.Context, ac *durable.AwaitChildrenError) State {
	if ac.Slide != nil {
		return x.slideSpawn(ctx, ac)
	}
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
	ids, st, failed := x.sendChildren(ctx, ac.Children, ac.IDs)
	if failed {
		return st
	}
	until := x.cfg.Clock.Now().Add(cmp.Or(ac.Timeout, x.cfg.WaitTimeout))
	x.flow.wait = &lease.Wait{Mode: lease.WaitChildren, For: ids, Until: until, Note: ac.Note}
	if note := ac.RaceNote(); note != "" {
		// The deadline is a raced timer's, or a raced receive's message
		// may come first: either cancels the children and resumes the
		// task rather than failing it (childTimerFired, endRacedWait).
		x.flow.wait.Note = note
	}
	if ac.Timer {
		if ac.Timeout <= MaxSQSDelay {
			// A deadline SQS can delay a token for: the token brings it on
			// time, the sweep entry (written by the suspension, as for any
			// wait for children) stays the safety net.
			if err := x.send(ctx, token.RefWith(x.task.ID, x.carry(nil)), ac.Timeout); err != nil {
				return x.retryOrFail(ctx, "await children: could not arm the raced timer: "+err.Error(), x.cfg.Backoff(x.task.Attempt), OutcomeRetried)
			}
		}
	}
	return StateAwaitingChildren
}

// sendChildren sends the tokens of kids, with the ids given (nil: the
// unnamed ChildID), before the task suspends for them (spawn) or for a
// callback raced against them (awaitCallback). It returns their ids, or,
// failed, the state the task goes to (failed, or handed back to retry).
func (x *execution) sendChildren(ctx context.Context, kids []durable.Child, given []string) (_ []string, _ State, failed bool) {
	md := x.carry(x.task.Metadata) // the children inherit the parent's metadata
	if _, ok := md[metadata.MapSlots]; ok {
		// but not its place in a sliding map.
		md = maps.Clone(md)
		delete(md, metadata.MapSlots)
	}
	ids := make([]string, len(kids))
	bodies := make([]string, len(kids))
	for i, c := range kids {
		ids[i] = durable.ChildID(x.task.ID, i)
		if given != nil {
			ids[i] = given[i]
		}
		if err := lease.CheckID(ids[i]); err != nil {
			return nil, x.failClaimed(ctx, fmt.Sprintf("await children: child id: %v", err)), true
		}
		maxAttempts := c.MaxAttempts
		if maxAttempts == 0 {
			maxAttempts = x.cfg.DefaultMaxAttempts
		}
		payload := c.Payload
		if len(payload) > lease.MaxPayloadBytes && x.cfg.Claims.Enabled() {
			// Over the inline limit: kept in the payload bucket under the
			// child's id, the token carrying the reference (the child's
			// worker reads it back). A retried spawn stores the same
			// object again.
			ref, err := x.cfg.Claims.Stow(ctx, ids[i], claimcheck.WhatPayload, payload, lease.MaxPayloadBytes)
			var tl *claimcheck.TooLargeError
			switch {
			case errors.As(err, &tl):
				return nil, x.failClaimed(ctx, fmt.Sprintf("await children: child %d: %v", i, &lease.TooLargeError{What: "payload", Size: tl.Size, Limit: claimcheck.MaxValueBytes})), true
			case err != nil:
				return nil, x.retryOrFail(ctx, "await children: "+err.Error(), x.cfg.Backoff(x.task.Attempt), OutcomeRetried), true
			}
			payload = ref
		}
		body, err := token.Token{ID: ids[i], Kind: c.Kind, Payload: payload, MaxAttempts: maxAttempts, Queue: c.Queue, Parent: x.task.ID,
			Metadata: md}.Encode()
		if err != nil {
			return nil, x.failClaimed(ctx, fmt.Sprintf("await children: child %d: %v", i, err)), true
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
		queue := cmp.Or(kids[i].Queue, x.task.Queue)
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
					return nil, x.reschedule(ctx, lease.Release{
						Status: lease.StatusPending, RunAt: x.cfg.Clock.Now().Add(delay), RefundAttempt: true,
						Error: reason + "; the parent cannot fail before its children are cancelled: " + err.Error(),
					}, OutcomeRetried), true
				}
			}
			return nil, x.retryOrFail(ctx, reason, delay, OutcomeRetried), true
		}
	}
	return ids, 0, false
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

// runAwaitingChildren suspends the task until its children, whose tokens
// are sent, end.
func (x *execution) runAwaitingChildren(ctx context.Context) State {
	return x.suspend(ctx, *x.flow.wait)
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
	if kidEndedWait(task) {
		// A child raced against the callback ended before the suspension
		// landed: it won (a failure keeps this message, whose next
		// delivery finds the same: runResuming).
		switch won, err := x.kidWon(ctx, task); {
		case err != nil:
			return x.exit(false, err.Error())
		case won:
			return x.raceKidEnded(ctx, task)
		}
	}
	return x.exit(true, "")
}

// runAwaitingCallback arms the timeout of the callback the handler awaits,
// then suspends the task for it.
func (x *execution) runAwaitingCallback(ctx context.Context) State {
	x.awaitSpan("callback", 0)
	return x.awaitCallback(ctx, x.flow.callback)
}

// awaitCallback arms the timeout, then suspends the task for the callback.
func (x *execution) awaitCallback(ctx context.Context, ac *durable.AwaitCallbackError) State {
	nonce := x.flow.ctx.CallbackNonce()
	switch {
	case nonce == "":
		return x.failClaimed(ctx, "await callback: the handler never took its callback token (CallbackToken), so nothing could complete the task")
	case ac.Timeout <= 0 || ac.Timeout > durable.MaxCallbackTimeout:
		return x.failClaimed(ctx, fmt.Sprintf("await callback: timeout %s is outside (0, %s]", ac.Timeout, durable.MaxCallbackTimeout))
	case ac.Heartbeat != 0 && (ac.Heartbeat < MinHeartbeatTimeout || ac.Heartbeat > ac.Timeout):
		return x.failClaimed(ctx, fmt.Sprintf("await callback: heartbeat timeout %s is outside [%s, %s] (the wait's timeout)", ac.Heartbeat, MinHeartbeatTimeout, ac.Timeout))
	case ac.Heartbeat != 0 && x.cfg.caps.beats == nil:
		return x.failClaimed(ctx, "await callback: a heartbeat timeout needs a store that records heartbeats, and this one does not")
	}
	until := x.cfg.Clock.Now().Add(ac.Timeout)
	w := lease.Wait{Mode: lease.WaitCallback, Until: until, Nonce: nonce, Step: ac.Step, Heartbeat: ac.Heartbeat}
	// The deadline may be a raced timer's: it ends the wait with the
	// timer's answer rather than failing the attempt (timerFired); a
	// raced receive's message ends it too (endRacedWait).
	w.Note = ac.Note()
	if err := w.Validate(); err != nil {
		return x.failClaimed(ctx, "await callback: "+err.Error())
	}
	if len(ac.Children) > 0 {
		// Children raced against the callback: spawned first, as for a
		// wait for them (a retried suspension sends them again, and they
		// exist already); their end ends the wait (notifyOne).
		if _, st, failed := x.sendChildren(ctx, ac.Children, ac.IDs); failed {
			return st
		}
	}
	if ac.Step != "" {
		// The answer becomes a step: there must be room for it.
		// The write that ends the wait records it in the task's inline
		// steps, so a history that has spilled past them has none.
		if x.flow.ctx.Spilled() {
			return x.failClaimed(ctx, fmt.Sprintf("await callback %q: its answer would be a step, and the task's history has grown past its item (%d operations): a callback answered as a step needs room among the inline steps (limits %d and %d bytes)",
				ac.Step, len(x.flow.ctx.Steps()), lease.MaxSteps, lease.MaxStepsBytes))
		}
		steps := lease.Task{Steps: x.flow.ctx.Steps()}
		used := lease.StepsBytes(steps)
		if len(steps.Steps) >= lease.MaxSteps || used+lease.MaxCallbackAnswerBytes+32 > lease.MaxStepsBytes {
			return x.failClaimed(ctx, fmt.Sprintf("await callback %q: no room left for its answer among the task's steps (%d steps, %d bytes; limits %d and %d)",
				ac.Step, len(steps.Steps), used, lease.MaxSteps, lease.MaxStepsBytes))
		}
	}
	if ac.Timeout > MaxSQSDelay || ac.Heartbeat > 0 {
		// The sweep index holds the deadline (the suspension writes the
		// entry): no message keeps the time. A wait with a heartbeat
		// timeout has its entry at the first heartbeat deadline, which
		// each worker that meets it moves on (heartbeatCheck).
		return x.suspend(ctx, w)
	}
	// A timeout SQS can delay a message for: one token, sent first, so a
	// crash after the suspension cannot leave the wait without an end. It
	// carries the deadline: no sweep entry (two index writes saved).
	if err := x.send(ctx, token.RefWith(x.task.ID, x.carry(nil)), ac.Timeout); err != nil {
		return x.retryOrFail(ctx, fmt.Sprintf("await callback: could not arm the timeout: %v", err), x.cfg.Backoff(x.task.Attempt), OutcomeRetried)
	}
	w.Carried = true
	return x.suspend(ctx, w)
}
