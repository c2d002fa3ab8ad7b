package dynamo_test

import (
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/leasehold/leasehold/internal/awstest"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/dynamo"
	"github.com/leasehold/leasehold/internal/lease/leasetest"
)

// TestDynamoStoreAdminConformance gives every case its own table: Due and
// List see the whole table.
func TestDynamoStoreAdminConformance(t *testing.T) {
	t.Parallel()
	cfg := awstest.Config(t)
	client := dynamodb.NewFromConfig(cfg)
	leasetest.RunAdmin(t, func(t *testing.T, opts lease.Options) leasetest.AdminStore {
		return dynamo.New(client, awstest.NewTable(t, cfg), opts)
	})
}

// TestDynamoStoreAdminBoundary checks, without a table, that every Admin call
// runs under CallTimeout and that a service failure comes back as
// ErrBackend still wrapping the SDK's error.
func TestDynamoStoreAdminBoundary(t *testing.T) {
	t.Parallel()
	throttled := &types.ProvisionedThroughputExceededException{Message: aws.String("slow down")}
	client := &stubClient{err: throttled}
	store := dynamo.New(client, "tasks", lease.Options{CallTimeout: 3 * time.Second})
	ctx := t.Context()
	now := time.Now()
	calls := map[string]func() error{
		"Due":            func() error { _, err := store.Due(ctx, "03", now, 10); return err },
		"MarkDispatched": func() error { _, err := store.MarkDispatched(ctx, "b1", now, now.Add(time.Minute)); return err },
		"RequestCancel":  func() error { _, err := store.RequestCancel(ctx, "b1"); return err },
		"Retry":          func() error { _, err := store.Retry(ctx, "b1", 1); return err },
		"List":           func() error { _, _, err := store.List(ctx, lease.StatusPending, 10, ""); return err },
		"TakeRedrive":    func() error { _, err := store.TakeRedrive(ctx, "digest", 3); return err },
	}
	for name, call := range calls {
		err := call()
		var got *types.ProvisionedThroughputExceededException
		if !errors.Is(err, lease.ErrBackend) || !errors.As(err, &got) {
			t.Errorf("%s: error %v, want ErrBackend wrapping the SDK error", name, err)
		}
	}
	// List reads its 16 shards at once and fails as a whole.
	if want := len(calls) - 1 + lease.ShardCount; len(client.left) != want {
		t.Fatalf("%d calls reached the client, want %d", len(client.left), want)
	}
	for i, left := range client.left {
		if left <= 0 || left > 3*time.Second {
			t.Errorf("call %d ran with %s left, want a deadline within 3s", i, left)
		}
	}
}
