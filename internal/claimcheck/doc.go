// Package claimcheck keeps values too large for a task's DynamoDB item or
// its SQS message in a blob store (an S3 bucket, or memory in tests) and
// puts a small reference in their place: the claim-check pattern.
//
// # When a value moves
//
// A value moves only when it is over the inline limit its caller passes
// (for a payload, lease.MaxPayloadBytes; for a result,
// lease.MaxResultBytes) and a blob store is configured. Every value that
// fits inline stays exactly as it is: no call to the blob store, the same
// bytes in the item and the message, the same write units. Without a blob
// store a value over its limit is refused by its caller with the error it
// always gave.
//
// # The reference
//
// A reference is a JSON string that starts with an escaped NUL character,
// "\u0000leasehold-blob:SIZE:KEY", so it is a valid JSON document wherever
// a payload or result goes (an inline token embeds payloads as raw JSON).
// Submitted values that start with that prefix are refused (CheckValue),
// so a reference is never mistaken for a user's value or the other way
// round. Resolving a value that is not a reference costs one prefix
// comparison.
//
// # Keys
//
// KEY is tasks/ID/WHAT/SHA256, with ID the task id path-escaped, WHAT what
// the value is (payload, result, step-N, answer) and SHA256 the value's
// digest: a retried write puts the same bytes under the same key, and the
// same payload submitted twice gives the same reference, so an idempotent
// enqueue stays idempotent. Deleting a task's values is deleting the
// prefix tasks/ID/ (docs/operations.md).
package claimcheck
