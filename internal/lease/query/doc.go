// Package query is the operator side of the store: the sweeper's view of the
// sparse sweep index (Due, MarkDispatched), listing by status with its
// cursor and the batch listing entries that feed it, cancellation, retry and
// reads of many tasks at once. It holds the interfaces both stores implement
// (Admin, Lister, ManyGetter) and the rules they apply alike, so that the
// DynamoDB store and the in-memory one answer the same.
package query
