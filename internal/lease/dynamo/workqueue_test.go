package dynamo_test

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/dynamo"
)

// TestDynamoStoreDefaultQueueHasNoQueueListing: a task a worker creates
// from the default work queue records the queue's name but gets no
// queue_at, so its listing costs no by_queue write (the default queue has
// no listing of its own); a task of a named queue gets one.
func TestDynamoStoreDefaultQueueHasNoQueueListing(t *testing.T) {
	t.Parallel()
	e := setupDynamo(t)
	store := dynamo.New(e.client, e.table, lease.Options{WorkQueue: "leasehold-work"})
	ctx := t.Context()
	for _, c := range []struct {
		id, queue string
		listed    bool
	}{{"from-work", "leasehold-work", false}, {"from-other", "reports", true}, {"from-client", "", false}} {
		if _, err := store.Create(ctx, lease.NewTask{ID: c.id, Kind: "k", MaxAttempts: 1, Queue: c.queue}); err != nil {
			t.Fatal(err)
		}
		out, err := e.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(e.table), ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{dynamo.AttrID: &types.AttributeValueMemberS{Value: c.id}}})
		if err != nil {
			t.Fatal(err)
		}
		_, has := out.Item["queue_at"]
		if q, _ := out.Item["queue"].(*types.AttributeValueMemberS); c.queue != "" && (q == nil || q.Value != c.queue) {
			t.Errorf("%s: queue %v, want %q recorded", c.id, out.Item["queue"], c.queue)
		}
		if has != c.listed {
			t.Errorf("%s (queue %q): queue_at present %v, want %v", c.id, c.queue, has, c.listed)
		}
	}
}
