package lifecycle

import (
	"context"
	"errors"

	"github.com/leasehold/leasehold/internal/durable"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/inbox"
	"github.com/leasehold/leasehold/internal/token"
)

// Inbox is the store's inbox side for the running handler
// (durable.Inboxer): workflow.Receive and SetEvent; nil when the store
// keeps none. (Asserted where used rather than kept with the other
// capabilities: one more interface there moves the execution record to a
// larger size class.)
func (x *execution) Inbox() inbox.Store {
	ib, _ := x.cfg.Store.(inbox.Store)
	return ib
}

// StateMessage: a message to a workflow (the message form of a token):
// put it in the workflow's inbox, once.

// runMessage sends the message form's payload to its workflow's inbox,
// under its message id or, without one, the SQS message's id (a
// redelivery of the message is then the same message). A workflow that
// sleeps in a receive on the topic is woken and its token sent. A message
// that cannot be sent (no such workflow, one that has ended, a full
// inbox) is dead-lettered with the reason: recorded, never dropped
// silently. A store error keeps the message for another try.
func (x *execution) runMessage(ctx context.Context) State {
	to := x.in.tok.To
	x.log.taskID = to.Workflow
	ib := x.Inbox()
	if ib == nil {
		return x.reject(ctx, "message to a workflow: the store keeps no inboxes")
	}
	id := to.MessageID
	if id == "" {
		id = "sqs:" + x.msg.ID
	}
	cctx, cancel := x.call()
	placed, waiting, err := ib.Send(cctx, inbox.Message{Task: to.Workflow, Topic: to.Topic, ID: id, Payload: x.in.tok.Payload})
	cancel()
	switch {
	case err == nil || errors.Is(err, inbox.ErrDuplicate):
	case errors.Is(err, lease.ErrBackend):
		return x.keep(ctx, 0, err.Error())
	default:
		return x.reject(ctx, "message to a workflow rejected: "+err.Error())
	}
	x.log.info("message sent to the workflow's inbox", "topic", to.Topic, "receiver_waiting", waiting)
	if !waiting {
		return x.exit(true, "")
	}
	switch x.wakeReceiver(ctx, ib, to.Workflow) {
	case lease.StatusRunning:
		// The receiver may be between its wait and its suspension: this
		// message comes back shortly, finds itself sent, and wakes it then.
		return x.keep(ctx, x.cfg.VisibilityMargin, "the receiver is running: its wake is tried again")
	case lease.StatusWaiting:
		return x.endRacedWait(ctx, placed)
	}
	return x.exit(true, "")
}

// endRacedWait ends the wait of m's workflow when a receive raced against
// what it waits for waits for m (durable.RaceNote.Listens): the message
// won. A callback wait's answer, durable.MessageCame, is recorded as the
// callback's step, and the task runs again at once, as the same attempt,
// and takes the message, as after a raced timer (timerFired); a wait for
// children has them cancelled, as at a raced timer's deadline
// (childTimerFired), and the task runs again once they have ended. A
// wait for something else is left alone. Every step is idempotent: the
// writes are conditional, and a failed call keeps the message, which does
// it all again.
func (x *execution) endRacedWait(ctx context.Context, m inbox.Message) State {
	cctx, cancel := x.call()
	t, err := x.cfg.Store.Get(cctx, m.Task)
	cancel()
	switch {
	case errors.Is(err, lease.ErrNotFound):
		return x.exit(true, "")
	case err != nil:
		return x.keep(ctx, 0, err.Error())
	case t.Status != lease.StatusWaiting || !durable.RaceNote(t.WaitNote).Listens(m.Topic, m.Seq):
		return x.exit(true, "")
	case t.Wait == lease.WaitChildren:
		return x.childTimerFired(ctx, t, durable.MessageCame)
	case t.Wait != lease.WaitCallback || t.CallbackStep == "":
		return x.exit(true, "")
	}
	return x.raceWon(ctx, t, durable.MessageCame, "raced message came before the callback", "topic", m.Topic)
}

// wakeReceiver makes the workflow id, asleep in a receive, due now and
// sends its token; best effort, as the receive looks again by itself. It
// returns the status the wake found the task in.
func (x *execution) wakeReceiver(ctx context.Context, ib inbox.Store, id string) lease.Status {
	cctx, cancel := x.call()
	woke, status, err := ib.Wake(cctx, id)
	cancel()
	if err != nil || !woke {
		return status
	}
	cctx, cancel = x.call()
	t, err := x.cfg.Store.Get(cctx, id)
	cancel()
	if err != nil {
		return status
	}
	x.task = t
	if err := x.send(ctx, token.RefWith(id, x.carry(nil)), 0); err != nil {
		x.log.warn("could not send the token that wakes the receiver; its receive looks again by itself", "error", err)
	}
	return status
}
