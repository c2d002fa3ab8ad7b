package dynamo_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/leasehold/leasehold/internal/awstest"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/dynamo"
	"github.com/leasehold/leasehold/internal/lease/leasetest"
	"github.com/leasehold/leasehold/internal/lease/query"
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

// A table not upgraded yet, without the by_kind and by_queue indexes (or
// with them still backfilling): ListBy falls back to the listing by
// status, filtered, and pages on it with its cursor, rather than fail.
func TestDynamoStoreListByWithoutItsIndex(t *testing.T) {
	t.Parallel()
	cfg := awstest.Config(t)
	client := dynamodb.NewFromConfig(cfg)
	ctx := t.Context()
	name := fmt.Sprintf("leasehold-tasks-noindex-%d", time.Now().UnixNano())
	s := func(v string) *string { return aws.String(v) }
	_, err := client.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:   s(name),
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: s("id"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: s("list_shard"), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: s("created_at"), AttributeType: types.ScalarAttributeTypeN},
		},
		KeySchema: []types.KeySchemaElement{{AttributeName: s("id"), KeyType: types.KeyTypeHash}},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{
			IndexName: s("by_created"),
			KeySchema: []types.KeySchemaElement{
				{AttributeName: s("list_shard"), KeyType: types.KeyTypeHash},
				{AttributeName: s("created_at"), KeyType: types.KeyTypeRange},
			},
			Projection: &types.Projection{ProjectionType: types.ProjectionTypeKeysOnly},
		}},
	})
	if err != nil {
		t.Fatalf("create table: %v", err)
	}
	t.Cleanup(func() {
		_, _ = client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: s(name)})
	})
	if err := dynamodb.NewTableExistsWaiter(client).Wait(ctx, &dynamodb.DescribeTableInput{TableName: s(name)}, awstest.Scale(time.Minute)); err != nil {
		t.Fatalf("wait for table: %v", err)
	}
	store := dynamo.New(client, name, lease.Options{})
	want := map[string]bool{}
	for i := range 24 {
		n := lease.NewTask{ID: fmt.Sprintf("t-%02d", i), Kind: "common", MaxAttempts: 1}
		if i%8 == 0 {
			n.Kind = "rare"
			want[n.ID] = true
		}
		if _, err := store.Create(ctx, n); err != nil {
			t.Fatalf("Create: %v", err)
		}
	}
	got := map[string]bool{}
	cursor := ""
	for pages := 0; ; pages++ {
		if pages > 10 {
			t.Fatalf("ListBy did not end after %d pages", pages)
		}
		page, next, err := store.ListBy(ctx, lease.StatusPending, query.ListBy{Kind: "rare"}, 2, cursor)
		if err != nil {
			t.Fatalf("ListBy on a table without by_kind: %v", err)
		}
		for _, task := range page {
			if task.Kind != "rare" || got[task.ID] {
				t.Fatalf("ListBy returned %s of kind %s (seen before: %v)", task.ID, task.Kind, got[task.ID])
			}
			got[task.ID] = true
		}
		if next == "" {
			break
		}
		cursor = next
	}
	if len(got) != len(want) {
		t.Fatalf("ListBy on a table without by_kind = %v, want %v", got, want)
	}
}
