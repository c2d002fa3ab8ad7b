package dynamo_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"

	"github.com/leasehold/leasehold/internal/awstest"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/dynamo"
)

// queryTally counts the Query calls a client makes and the items they
// examined (ScannedCount): what DynamoDB charges a Query's read units for.
type queryTally struct{ calls, scanned atomic.Int64 }

func (q *queryTally) option(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("queryTally",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleInitialize(ctx, in)
			if r, ok := out.Result.(*dynamodb.QueryOutput); ok && err == nil {
				q.calls.Add(1)
				q.scanned.Add(int64(r.ScannedCount))
			}
			return out, md, err
		}), middleware.After)
}

// The recovery sweep's Query examines only the tasks in its sparse index
// (those with something due), so a sweep costs the same with no finished
// task in the table as with hundreds (issue 22): the same Query calls, one
// per shard, and the same items examined.
func TestSweepCostDoesNotGrowWithFinishedTasks(t *testing.T) {
	t.Parallel()
	cfg := awstest.Config(t)
	var tally queryTally
	client := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.APIOptions = append(o.APIOptions, tally.option) })
	store := dynamo.New(client, awstest.NewTable(t, cfg), lease.Options{})
	ctx := t.Context()
	for i := range 3 { // due: PENDING, in the sweep index
		if _, err := store.Create(ctx, lease.NewTask{ID: fmt.Sprintf("due-%d", i), Kind: "k", MaxAttempts: 1}); err != nil {
			t.Fatal(err)
		}
	}
	sweep := func() (calls, scanned int64, due int) {
		tally.calls.Store(0)
		tally.scanned.Store(0)
		for _, shard := range lease.Shards() {
			got, err := store.Due(ctx, shard, time.Now().Add(time.Hour), 100)
			if err != nil {
				t.Fatal(err)
			}
			due += len(got)
		}
		return tally.calls.Load(), tally.scanned.Load(), due
	}
	calls0, scanned0, due0 := sweep()
	const finished = 300
	for i := range finished { // ended: out of the sweep index
		if _, err := store.CreateFailed(ctx, lease.NewTask{ID: fmt.Sprintf("done-%d", i), Kind: "k", MaxAttempts: 1}, "ended"); err != nil {
			t.Fatal(err)
		}
	}
	calls1, scanned1, due1 := sweep()
	t.Logf("sweep over %d shards: %d queries examining %d items with no finished task; %d queries examining %d items with %d finished tasks",
		len(lease.Shards()), calls0, scanned0, calls1, scanned1, finished)
	if due0 != 3 || due1 != 3 {
		t.Fatalf("due tasks found: %d, then %d; want 3 both times", due0, due1)
	}
	if calls1 != calls0 || scanned1 != scanned0 || calls0 != int64(len(lease.Shards())) {
		t.Errorf("the sweep made %d queries examining %d items, then %d examining %d after %d tasks finished; want one query a shard (%d) and the same items",
			calls0, scanned0, calls1, scanned1, finished, len(lease.Shards()))
	}
}
