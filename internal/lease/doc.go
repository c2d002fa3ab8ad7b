// Package lease is the task store: one DynamoDB item per task, every state
// change one conditional write, and a fencing token that grows with every
// claim.
//
// # Writes
//
//   - Create puts a PENDING task if the id is free (idempotent submission).
//   - CreateClaimed puts a task already RUNNING under the caller's lease, for
//     inline tokens: with Finish, a task costs two writes and no reads.
//   - Claim takes a PENDING task that is due, or a RUNNING one whose lease
//     expired more than the skew bound ago; attempt and fence grow by one.
//     The task, payload included, comes back from the same call.
//   - Renew, Finish and Release are conditional on lease owner and fence, so
//     a worker whose lease was taken over can change nothing.
//
// # Failed conditions
//
// DynamoDB returns the item that failed a condition
// (ReturnValuesOnConditionCheckFailure=ALL_OLD). rules.ClassifyClaim and
// rules.ClassifyHeld turn it into this package's errors — not found, leased (with
// the time left), finished, not due, lease lost, attempts exhausted —
// without a second read. Every other SDK error wraps ErrBackend.
//
// # Indexes
//
// The sparse `sweep` index holds only tasks that wait for a (re)dispatch:
// PENDING tasks from the time they should have started plus a grace (a
// RUNNING task keeps the entry it had). A task created RUNNING from an inline
// token has none: its message brings it back. Claims and renewals do not move
// an entry's key; the sweep re-arms an entry that comes due under a live
// lease (MarkDispatched). The `by_created` index (list_shard, created_at,
// keys only) serves listing; its keys never change after the create, and List
// reads each task's status from the item. A batch of inline tasks shares one
// entry of it, a batch listing entry (listing.go). The `by_kind` and
// `by_queue` indexes (list_shard, kind_at or queue_at) hold the same items
// sorted by kind (or named queue) and creation time, so a listing of one
// kind reads only its tasks (query.ListBy); a batch's entries are per kind
// and queue. All the indexes are sharded 16 ways by a hash of the id, so no
// partition runs hot.
//
// # Packages
//
// This package holds the task model (Task, NewTask, Status, Lease, waits,
// steps, chains), its limits and id and JSON rules, the Store contract and
// its errors. The DynamoDB implementation is in dynamo; the in-memory one in
// leasemem; the rules both apply to a write in rules; the limiters in
// limiter; the operator side (sweep, list, cancel, retry) in query. Both
// stores pass the conformance suite in leasetest.
package lease
