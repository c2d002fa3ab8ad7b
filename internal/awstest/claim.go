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

// Finish finishes the attempt held under l with result, as a test's setup,
// failing the test on an error; a retried finish that meets its own landed
// write (see Claim) is this finish.
func Finish(t testing.TB, ctx context.Context, store lease.Store, l lease.Lease, result []byte) {
	t.Helper()
	_, err := store.Finish(ctx, l, result)
	if seen, ok := lease.Observed(err); ok && lease.Landed(l, lease.StatusSucceeded, seen) {
		return
	}
	if err != nil {
		t.Fatalf("finish %s: %v", l.TaskID, err)
	}
}

// Release releases the attempt held under l, as Finish finishes it.
func Release(t testing.TB, ctx context.Context, store lease.Store, l lease.Lease, r lease.Release) {
	t.Helper()
	_, err := store.Release(ctx, l, r)
	if seen, ok := lease.Observed(err); ok && lease.Landed(l, r.Status, seen) {
		return
	}
	if err != nil {
		t.Fatalf("release %s: %v", l.TaskID, err)
	}
}
