package lifecycle_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/jonboulle/clockwork"

	"github.com/leasehold/leasehold/internal/awstest"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/dynamo"
	"github.com/leasehold/leasehold/internal/lifecycle"
	"github.com/leasehold/leasehold/internal/token"
)

// Against DynamoDB (the local stack), a write whose response is lost after
// it landed is retried by the SDK; the retry fails its condition, and the
// worker must read the item it sees as its own write, not another worker's.
func TestLostResponseOfOwnWriteOnDynamoDB(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, target, marker string
		ref, fail            bool
		outcome              lifecycle.Outcome
		status               lease.Status
	}{
		{"create", "DynamoDB_20120810.PutItem", `"RUNNING"`, false, false, lifecycle.OutcomeSucceeded, lease.StatusSucceeded},
		{"claim", "DynamoDB_20120810.UpdateItem", "#fence = #fence + :one", true, false, lifecycle.OutcomeSucceeded, lease.StatusSucceeded},
		{"finish", "DynamoDB_20120810.UpdateItem", `"SUCCEEDED"`, false, false, lifecycle.OutcomeSucceeded, lease.StatusSucceeded},
		{"release", "DynamoDB_20120810.UpdateItem", "#run_at = :run_at", false, true, lifecycle.OutcomeRetried, lease.StatusPending},
	}
	cfg := awstest.Config(t)
	table := awstest.NewTable(t, cfg)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			losing := awstest.NewLosingHTTP(cfg.HTTPClient)
			dcfg := cfg.Copy()
			dcfg.HTTPClient = losing
			clock := clockwork.NewFakeClockAt(epoch)
			store := dynamo.New(dynamodb.NewFromConfig(dcfg), table, lease.Options{Clock: clock})
			id := "lost-" + c.name + "-" + t.Name()
			if c.ref {
				if _, err := store.Create(t.Context(), lease.NewTask{ID: id, Kind: "k", Payload: []byte(`{}`), MaxAttempts: 3}); err != nil {
					t.Fatal(err)
				}
			}
			runs := 0
			fake := newFakeSQS()
			exec, err := lifecycle.New(lifecycle.Config{
				Store: store, SQS: fake, QueueURL: workURL, Owner: "w1", Clock: clock,
				Logger: slog.New(slog.DiscardHandler), CallTimeout: 30 * time.Second,
				Handlers: func(string) (lifecycle.Handler, bool) {
					return func(context.Context, lease.Task) ([]byte, error) {
						runs++
						if c.fail {
							return nil, errors.New("transient")
						}
						return []byte(`"ok"`), nil
					}, true
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			body := inline(t, "k", id, `{}`, 3)
			if c.ref {
				body = token.Ref(id)
			}
			losing.LoseNext(c.target, c.marker)

			res := exec.Process(t.Context(), nil, msg("m1", body))
			if n := losing.Dropped(); n != 1 {
				t.Fatalf("%d responses dropped, want 1: the test did not hit the write", n)
			}
			got, err := store.Get(t.Context(), id)
			if err != nil {
				t.Fatal(err)
			}
			if !res.Ack || res.Outcome != c.outcome || runs != 1 || got.Status != c.status || got.Attempt != 1 || got.Fence != 1 {
				t.Fatalf("result %+v, runs %d, stored %s attempt %d fence %d; want acked %s after one run, %s at attempt 1, fence 1",
					res, runs, got.Status, got.Attempt, got.Fence, c.outcome, c.status)
			}
			if v := fake.visibilityChanges(); len(v) != 0 {
				t.Fatalf("message hidden as if leased elsewhere: %+v", v)
			}
		})
	}
}
