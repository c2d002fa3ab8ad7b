package leasemem_test

import (
	"context"
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
