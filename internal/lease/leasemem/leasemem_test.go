package leasemem_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/leasemem"
	"github.com/leasehold/leasehold/internal/lease/leasetest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	leasetest.Run(t, func(t *testing.T, opts lease.Options) lease.Store {
		return leasemem.New(opts)
	})
}

func TestCallsCountWritesAndReads(t *testing.T) {
	t.Parallel()
	s := leasemem.New(lease.Options{})
	ctx := t.Context()
	task, err := s.CreateClaimed(ctx, lease.NewTask{ID: "t1", Kind: "k", Payload: []byte(`{}`), MaxAttempts: 1}, "w1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Finish(ctx, task.LeaseOf(), []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if got := s.Calls(); got != (leasemem.Calls{Writes: 2}) {
		t.Fatalf("calls %+v, want 2 writes and no read", got)
	}
}

// Expire removes a finished task, as the table's TTL would, and nothing
// else.
func TestExpireRemovesOnlyFinishedTasks(t *testing.T) {
	t.Parallel()
	s := leasemem.New(lease.Options{})
	ctx := t.Context()
	task, err := s.CreateClaimed(ctx, lease.NewTask{ID: "t1", Kind: "k", Payload: []byte(`{}`), MaxAttempts: 1}, "w1")
	if err != nil {
		t.Fatal(err)
	}
	if s.Expire("t1") || s.Expire("absent") {
		t.Fatal("Expire removed a running or absent task")
	}
	if _, err := s.Get(ctx, "t1"); err != nil {
		t.Fatalf("running task after Expire: %v", err)
	}
	if _, err := s.Finish(ctx, task.LeaseOf(), []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if !s.Expire("t1") {
		t.Fatal("Expire kept a finished task")
	}
	if _, err := s.Get(ctx, "t1"); !errors.Is(err, lease.ErrNotFound) {
		t.Fatalf("expired task: %v, want ErrNotFound", err)
	}
	// As after a TTL deletion, the id can be used again.
	if _, err := s.Create(ctx, lease.NewTask{ID: "t1", Kind: "k", Payload: []byte(`{}`), MaxAttempts: 1}); err != nil {
		t.Fatalf("create after expiry: %v", err)
	}
}

// BenchmarkClaimFinish measures the hot path of a worker: claim a due task,
// finish it.
func BenchmarkClaimFinish(b *testing.B) {
	s := leasemem.New(lease.Options{})
	ctx := context.Background()
	ids := make([]string, b.N)
	for i := range ids {
		ids[i] = fmt.Sprintf("task-%d", i)
		if _, err := s.Create(ctx, lease.NewTask{ID: ids[i], Kind: "k", Payload: []byte(`{"n":1}`), MaxAttempts: 3}); err != nil {
			b.Fatal(err)
		}
	}
	result := []byte(`{"ok":true}`)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		task, err := s.Claim(ctx, ids[i], "w1")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := s.Finish(ctx, task.LeaseOf(), result); err != nil {
			b.Fatal(err)
		}
	}
}
