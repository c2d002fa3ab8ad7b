// Package lifecycle carries one SQS message through the life of the task it
// names: claim, run, renew, record. It is the Go form of the seed runtime's
// daemon, with the seed's TODOs (release on failure, retry with backoff)
// done.
//
// # States
//
// Each message is an execution that moves through explicit states (State),
// one function each, called from one loop (run) that checks every move
// against one table (transitions). The plain path is
//
//	received --claim / create-and-claim-->  claimed
//	claimed  --start handler + renewer-->   running
//	running  --handler returns, or the
//	           deadline passes; renewer
//	           stopped and joined-->        finishing
//	finishing --finish / release-->         notifying --> exited
//
// and the workflow paths have states of their own: callback (a callback
// token), awaiting_dependencies (a token with after), resuming (a token
// whose task is WAITING), spawning and awaiting_children (a handler that
// returned AwaitChildrenError), awaiting_callback (AwaitCallbackError), and
// stepping, the sub-state of running while durable.StepOf records a step
// (the handler-side workflow calls live in package durable).
// docs/states.md draws the whole machine, rendered from the table.
//
// received may also exit at once: a rejected message (dead-lettered with
// its reason), a task leased by another worker (message hidden for the rest
// of that lease plus a margin), a task not due yet (a fresh token is sent
// with the remaining delay), a token held back by its queue's rate limit or
// because its queue is paused (hidden for a hold that grows with its
// receives, replaced near maxReceiveCount; no write to the task).
//
// # Files
//
// The states' code is in files named for them, and a message meets them in
// this order: states.go (the machine and its loop, run), execution.go (the
// record every state shares, and its sub-records, each owned by the states
// that use it), claim.go (received: decode, route, claim), run.go (claimed
// and running: the handler and the renewer, and durable.Attempt, what the
// handler's durable calls ask of the executor), finish.go (finishing: the
// outcome's write), spawn.go (spawning, awaiting_children,
// awaiting_callback), notify.go (notifying). The branches have theirs:
// callback.go, dependencies.go (awaiting_dependencies), resume.go and
// waitend.go (resuming), cancel.go. What any state may end in is in
// message.go (the message kept, replaced or dead-lettered); the flow
// controls in ratelimit.go, slots.go and pause.go. The handler side of
// workflows (StepOf and the rest) is package durable.
//
// # Timing rules
//
//   - The lease is renewed RenewBefore ahead of its expiry; LeaseDuration
//     must be at least twice RenewBefore, so a failed renewal has time to be
//     retried before the lease runs out.
//   - Each renewal also sets the message's visibility to LeaseDuration plus
//     VisibilityMargin: the message stays hidden exactly while the lease is
//     alive. The running messages of one batch (ProcessBatch) share that
//     call: one ChangeMessageVisibilityBatch of up to ten per queue and
//     renewal round, each entry's failure that message's own
//     (batchVisibility).
//   - The worker trusts its lease only until the send time of its last
//     successful renewal plus LeaseDuration. Past that, the handler's context
//     is cancelled with ErrLeaseLost. Others take over only after expiry plus
//     the skew bound, so the handler is always told first.
//   - The handler's context ends DeadlineMargin before the invocation's
//     deadline, with ErrDeadline; the lease is then released with run_at =
//     now and a fresh token is sent, so the next attempt starts at once
//     instead of waiting for the lease to expire.
//   - Failures are retried after Backoff(attempt) (exponential with jitter)
//     by sending a fresh token with that delay, not by letting the message
//     reappear, so retries never use up the queue's maxReceiveCount. Delays
//     beyond SQS's 15 minutes are left to the sweeper.
//   - A message is acknowledged only when its task is finished or a fresh
//     token stands for it: a worker fenced out of a task that can still run
//     replaces its token (delayed until the other lease can be taken over)
//     before acknowledging, and from ReplaceAtReceiveCount receives on a
//     message that would be hidden or left to reappear, or that is claimed,
//     is replaced and deleted, so a valid token never reaches the
//     dead-letter queue through maxReceiveCount.
//   - A conditional write that fails returns the item it saw. A worker that
//     finds its own lease (claim) or its own history entry (finish,
//     release) there is looking at its own earlier try, whose response was
//     lost, and carries on as if the response had arrived.
//   - Every AWS call has CallTimeout. Writes that record an outcome run on a
//     context detached from the invocation's cancellation, so a shutdown
//     cannot cut a half-recorded outcome short.
package lifecycle
