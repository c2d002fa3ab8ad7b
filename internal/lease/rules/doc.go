// Package rules holds what both stores decide alike about a write: whether a
// task is claimable or held, whether a write landed, and, when a conditional
// write failed, which error of package lease the item it saw means (the
// Classify* functions). Keeping them in one place is what makes the DynamoDB
// store and the in-memory fake pass the same conformance suite.
package rules
