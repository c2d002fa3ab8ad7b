package dynamo_test

import (
	"math"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/leasehold/leasehold/internal/bench"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/dynamo"
)

// TestHeartbeatIsOneWriteOfTheItem: a callback heartbeat is one
// UpdateItem and nothing else, which changes no key of an index (the
// sweep entry stays where it is), so it costs the item's write units
// alone: one for a waiting task of the usual size (docs/performance.md).
func TestHeartbeatIsOneWriteOfTheItem(t *testing.T) {
	t.Parallel()
	env := setupDynamo(t)
	store := dynamo.New(env.client, env.table, lease.Options{})
	ctx := t.Context()
	held, err := store.CreateClaimed(ctx, lease.NewTask{ID: "beat-cost", Kind: "approve", Payload: []byte(`{"order":42}`), MaxAttempts: 3}, "w1")
	if err != nil {
		t.Fatal(err)
	}
	const nonce = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	waiting, err := store.Suspend(ctx, held.LeaseOf(), lease.Wait{Mode: lease.WaitCallback, Until: time.Now().Add(time.Hour), Nonce: nonce, Heartbeat: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	before := map[string]int{}
	for _, op := range []string{"UpdateItem", "PutItem", "GetItem", "TransactWriteItems"} {
		before[op] = env.calls.Count(op)
	}
	got, err := store.BeatCallback(ctx, lease.WaitEnd{ID: held.ID, Fence: waiting.Fence, Attempt: waiting.Attempt, Nonce: nonce, Status: lease.StatusSucceeded})
	if err != nil {
		t.Fatal(err)
	}
	for op, n := range before {
		want := n
		if op == "UpdateItem" {
			want++
		}
		if c := env.calls.Count(op); c != want {
			t.Errorf("a heartbeat made %d %s calls, want %d", c-n, op, want-n)
		}
	}
	if !got.DispatchAt.Equal(waiting.DispatchAt) {
		t.Errorf("a heartbeat moved the sweep entry from %v to %v", waiting.DispatchAt, got.DispatchAt)
	}
	out, err := env.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: &env.table, Key: map[string]types.AttributeValue{dynamo.AttrID: &types.AttributeValueMemberS{Value: held.ID}}})
	if err != nil {
		t.Fatal(err)
	}
	size := bench.ItemSize(out.Item)
	units := math.Ceil(size / 1024)
	t.Logf("a waiting callback task's item: %.0f bytes, so a heartbeat costs %.0f write unit(s)", size, units)
	if units != 1 {
		t.Errorf("a heartbeat on a %0.f-byte item costs %.0f write units, want 1", size, units)
	}
}
