package dynamo_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/jonboulle/clockwork"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/dynamo"
	"github.com/leasehold/leasehold/internal/lease/limiter"
)

// A redrive count is one small item with no index key: its count, and an
// expiry (the table's TTL, in seconds) RedriveCountTTL after its last
// count, so counts of dead letters that never come back go away.
func TestDynamoStoreRedriveCountItem(t *testing.T) {
	t.Parallel()
	env := setupDynamo(t)
	at := time.Date(2031, time.March, 14, 15, 9, 26, 0, time.UTC)
	clock := clockwork.NewFakeClockAt(at)
	store := dynamo.New(env.client, env.table, lease.Options{Clock: clock})
	for range 2 {
		if ok, err := store.TakeRedrive(t.Context(), "d1g35t", 3); err != nil || !ok {
			t.Fatalf("TakeRedrive = %t, %v", ok, err)
		}
		clock.Advance(time.Hour)
	}
	item := env.rawItem(t, limiter.RedriveCountID("d1g35t"))
	want := map[string]string{
		limiter.AttrRedriveCount: "2",
		dynamo.AttrExpiresAt:     strconv.FormatInt(at.Add(time.Hour+limiter.RedriveCountTTL).Unix(), 10),
	}
	for name, v := range want {
		if n, ok := item[name].(*types.AttributeValueMemberN); !ok || n.Value != v {
			t.Errorf("%s = %#v, want N %s", name, item[name], v)
		}
	}
	if len(item) != len(want)+1 { // and its id
		t.Errorf("the item has %d attributes, want its id, count and expiry: %v", len(item), item)
	}
	if !limiter.IsRedriveCountID(limiter.RedriveCountID("d1g35t")) || limiter.IsRedriveCountID("d1g35t") {
		t.Error("IsRedriveCountID does not tell a redrive count's id from a task's")
	}
}
