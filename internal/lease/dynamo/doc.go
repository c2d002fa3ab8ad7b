// Package dynamo is the DynamoDB implementation of lease.Store: one item per
// task, every state change one conditional write, and a failed condition
// classified from the item the write saw (rules.Classify*), without a second
// read. It also owns the item format (the Attr* names, the codec between
// lease.Task and an item) and the two sparse indexes, and implements the
// optional capabilities: query.Admin, query.Lister, query.ManyGetter and the
// limiters of package limiter.
//
// The in-memory store in leasemem answers alike; both pass the conformance
// suite in leasetest.
package dynamo
