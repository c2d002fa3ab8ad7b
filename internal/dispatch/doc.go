// Package dispatch is the producer side of leasehold: it turns submissions
// into stored tasks and dispatch tokens, and sweeps for due tasks that have
// no live message.
//
// # Intake
//
// HandleIntake consumes the intake queue. Each message is a submission
// (token.DecodeSubmission). A valid one is stored with lease.Store.Create,
// keyed by the client's id or else by the SQS message id, so that every
// delivery of one message, and every message with one client id, makes one
// task. Tokens (token.Ref) then go to the work queue with SendMessageBatch,
// ten per call. A duplicate that is still PENDING gets a token again: the
// first delivery may have ended between its write and its send, and the
// worker's claim keeps a second token from running the task twice. Invalid
// submissions are forwarded to the intake dead-letter queue with the reason
// in the leasehold-reason attribute and acknowledged; they never hold up the
// rest of the batch. The response lists, as batch item failures, exactly the
// messages whose task could not be stored or whose token was not sent.
//
// # Scheduling
//
// A task due within SQS's 15-minute delay cap gets its token at once, with
// DelaySeconds covering the wait; its sweep-index time is its start plus
// the grace, so the sweep is only its safety net. A task due later gets no
// token: its sweep-index time is exactly its start, and the sweep dispatches
// it then.
//
// # Sweep
//
// The sweep index is a sparse, sharded GSI (sweep_shard, sweep_at): only
// tasks that wait for a dispatch carry its keys, and a task's shard is a
// hash of its id, so no partition is hot at any scale. Sweep queries every
// shard for entries at or before now, moves each to now plus the grace with
// a write conditional on the time it saw (only one of two concurrent sweeps
// wins), and sends a token for each entry it won. Double dispatch is thus
// rare, and harmless: the worker's claim lets one token run the task.
package dispatch
