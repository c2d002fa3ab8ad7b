package awstest

import (
	"context"
	"testing"

	"github.com/leasehold/leasehold/internal/lease"
)

// Claim claims task id for owner, as a test's setup, failing the test on an
// error. The SDK retries a call whose answer it lost (it happens about once
// in 4000 calls here, aws/aws-sdk-go-v2#2737), and a retried claim that had
// landed meets owner's own lease: that is this claim.
func Claim(t testing.TB, ctx context.Context, store lease.Store, id, owner string) lease.Task {
	t.Helper()
	task, err := store.Claim(ctx, id, owner)
	if seen, ok := lease.Observed(err); ok && lease.ClaimedBy(owner, seen) {
		return seen
	}
	if err != nil {
		t.Fatalf("claim %s for %s: %v", id, owner, err)
	}
	return task
}
