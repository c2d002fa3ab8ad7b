package leasehold_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/awstest"
	"github.com/leasehold/leasehold/internal/bench"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/workflow"
)

// historyShape is a "history" task's payload: N steps whose results are
// JSON strings of Bytes bytes.
type historyShape struct{ N, Bytes int }

// TestHistoryBeyondTheItemOnTheStack (issue 36, point 1): workflows whose
// histories outgrow their task's item, on DynamoDB: 2,000 small steps,
// and 300 of 8 KiB (2.4 MB). A sleep after the steps makes a second run
// replay them all from the spilled tail. The task item stays small
// whatever the history, and the step items carry no index attribute.
func TestHistoryBeyondTheItemOnTheStack(t *testing.T) {
	t.Parallel()
	e := setupStack(t)
	c := newClientOn(t, e)
	var runs atomic.Int64
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "history", func(ctx context.Context, task *leasehold.Task[historyShape]) (int, error) {
		r := strings.Repeat("r", max(task.Payload.Bytes-2, 0))
		total := 0
		for i := range task.Payload.N {
			s, err := workflow.Step(ctx, fmt.Sprint("s", i), func(context.Context) (string, error) {
				runs.Add(1)
				return r, nil
			})
			if err != nil {
				return 0, err
			}
			total += len(s) + 2
		}
		if err := workflow.Sleep(ctx, time.Second); err != nil {
			return 0, err
		}
		return total, nil
	})
	w := e.worker(t, leasehold.WorkerConfig{Handlers: hs})
	ctx, cancel := context.WithTimeout(t.Context(), awstest.Scale(8*time.Minute))
	defer cancel()
	shapes := map[string]historyShape{"small": {N: 2000, Bytes: 3}, "large": {N: 300, Bytes: 8 << 10}}
	for id, s := range shapes {
		if _, err := c.Enqueue(ctx, leasehold.Submission{Kind: "history", ID: id, Payload: s}); err != nil {
			t.Fatal(err)
		}
	}
	e.pump(t, w, 6*time.Minute, func() bool {
		return e.status(t, "small").Terminal() && e.status(t, "large").Terminal()
	})
	if want := int64(2000 + 300); runs.Load() != want {
		t.Errorf("%d step functions ran, want %d: a replayed step ran again", runs.Load(), want)
	}
	raw := dynamodb.NewFromConfig(e.cfg)
	for id, s := range shapes {
		got := e.get(t, id)
		if got.Status != lease.StatusSucceeded || string(got.Result) != fmt.Sprint(s.N*s.Bytes) {
			t.Fatalf("%s: %s %s (%q), want SUCCEEDED %d", id, got.Status, got.Result, got.Error, s.N*s.Bytes)
		}
		all, err := lease.ReadHistory(ctx, e.store, got, 0)
		if err != nil || len(all) != s.N+1 || all[s.N].Name != "sleep#1" {
			t.Fatalf("%s: %d operations read back (%v), want %d and the sleep last", id, len(all), err, s.N+1)
		}
		item := rawItem(t, raw, e.table, id)
		size := int(bench.ItemSize(item)) // as DynamoDB counts it: names and values
		// The head holds at most MaxStepsBytes of results and MaxSteps
		// names; the rest of the item is a few KB whatever the history.
		if limit := lease.MaxStepsBytes + lease.MaxSteps*(2*lease.MaxStepNameBytes+16) + 8<<10; !got.Spilled || size > limit {
			t.Errorf("%s: task item of %d bytes with %d inline steps (spilled %v), want spilled and at most %d", id, size, len(got.Steps), got.Spilled, limit)
		}
		t.Logf("%s: %d operations, %d inline; task item %d bytes", id, len(all), len(got.Steps), size)
		step := rawItem(t, raw, e.table, lease.StepKey(id, len(got.Steps)))
		keys := slices.Sorted(func(yield func(string) bool) {
			for k := range step {
				if !yield(k) {
					return
				}
			}
		})
		if want := []string{"expires_at", "id", "name", "op", "result"}; !slices.Equal(keys, want) {
			t.Errorf("%s: a step item has attributes %v, want %v (no index attribute)", id, keys, want)
		}
	}
}

// rawItem reads the item key of table as DynamoDB holds it.
func rawItem(t *testing.T, client *dynamodb.Client, table, key string) map[string]types.AttributeValue {
	t.Helper()
	ctx, cancel := call(t)
	defer cancel()
	out, err := client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"id": &types.AttributeValueMemberS{Value: key}},
	})
	if err != nil || len(out.Item) == 0 {
		t.Fatalf("item %q: %v (found %v)", key, err, len(out.Item) > 0)
	}
	return out.Item
}
