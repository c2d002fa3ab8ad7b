package dynamo

import (
	"crypto/rand"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/metadata"
)

// avSize is the size DynamoDB counts for an attribute value: strings and
// binaries by their bytes, numbers at most 21 bytes, booleans and nulls one
// byte, lists and maps 3 bytes plus one byte per element plus their
// elements (and a map's key names).
func avSize(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return 21
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberSS:
		n := 0
		for _, s := range v.Value {
			n += len(s)
		}
		return n
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += 1 + avSize(e)
		}
		return n
	case *types.AttributeValueMemberM:
		n := 3
		for k, e := range v.Value {
			n += 1 + len(k) + avSize(e)
		}
		return n
	}
	panic(fmt.Sprintf("avSize: %T", v))
}

func itemSize(item map[string]types.AttributeValue) int {
	n := 0
	for k, v := range item {
		n += len(k) + avSize(v)
	}
	return n
}

// worstCaseTask has every field at its limit at once: the largest item the
// limits allow.
func worstCaseTask() lease.Task {
	id := func(p string, i int) string {
		return p + strings.Repeat("i", lease.MaxIDBytes-len(p)-4) + fmt.Sprintf("%04d", i)
	}
	now := time.Unix(1_800_000_000, 0)
	t := lease.Task{
		ID: id("t", 0), Kind: strings.Repeat("k", lease.MaxKindBytes), Status: lease.StatusSucceeded,
		Attempt: lease.MaxAttemptsLimit, MaxAttempts: lease.MaxAttemptsLimit, Fence: 1 << 40,
		Payload: []byte(strings.Repeat("p", lease.MaxPayloadBytes)), Result: []byte(strings.Repeat("r", lease.MaxResultBytes)),
		Error: strings.Repeat("e", lease.MaxErrorBytes), LeaseOwner: strings.Repeat("o", 256),
		LeaseUntil: now, RunAt: now, CreatedAt: now, UpdatedAt: now, FinishedAt: now, ExpiresAt: now, DispatchAt: now,
		UnknownKindSince: now, HistoryDropped: 1 << 20, Snoozes: 1 << 20, Queue: strings.Repeat("q", 80),
		Parent: id("p", 0), Wait: lease.WaitChildren, CallbackHash: lease.CallbackHash(strings.Repeat("n", 64)), WaitUntil: now,
	}
	for i := range lease.MaxHistory {
		t.History = append(t.History, lease.Attempt{Attempt: i, Fence: 1 << 40, Status: lease.StatusPending, Error: strings.Repeat("e", lease.MaxHistoryErrorBytes), At: now})
	}
	for i := range lease.MaxWaiters {
		t.Waiters = append(t.Waiters, lease.Waiter{ID: id("w", i), Mode: lease.WaitAfterAny})
	}
	for i := range lease.MaxChildren {
		t.WaitFor = append(t.WaitFor, id("c", i))
		t.Ended = append(t.Ended, id("c", i))
	}
	t.Metadata = map[string]string{}
	for i := range metadata.MaxEntries {
		k := fmt.Sprintf("k%02d", i)
		t.Metadata[k] = strings.Repeat("v", metadata.MaxTotalBytes/metadata.MaxEntries-len(k))
	}
	if p := metadata.Problem(t.Metadata); p != "" {
		panic("worst-case metadata: " + p)
	}
	t.Spilled = true // the largest head is frozen: spill_from is counted too
	for i := range lease.MaxSteps {
		r := lease.MaxStepsBytes / lease.MaxSteps
		t.Steps = append(t.Steps, lease.Step{Name: id("s", i)[:lease.MaxStepNameBytes], Result: []byte(strings.Repeat("s", r))})
	}
	return t
}

// The limits together keep an item under DynamoDB's 400 KB, so no write
// that stays inside each limit can fail for the item's size.
func TestLimitsKeepTheItemUnderDynamoDBs(t *testing.T) {
	t.Parallel()
	task := worstCaseTask()
	item := itemOf(task)
	// Attributes only the DynamoDB store's writes keep: the names of the
	// recorded steps (Checkpoint's once-only condition) and the call ids of
	// the user's writes (at most maxCalls of them).
	names := make([]string, len(task.Steps))
	for i, st := range task.Steps {
		names[i] = st.Name
	}
	item[attrStepNames] = &types.AttributeValueMemberSS{Value: names}
	calls := make([]types.AttributeValue, maxCalls)
	for i := range calls {
		calls[i] = avS(rand.Text())
	}
	item[attrCalls] = &types.AttributeValueMemberL{Value: calls}
	size := itemSize(item)
	t.Logf("worst-case item: %d bytes of %d", size, lease.MaxItemBytes)
	if size > lease.MaxItemBytes-lease.ItemMarginBytes {
		for k, v := range item {
			if s := len(k) + avSize(v); s > 1000 {
				t.Logf("  %s: %d", k, s)
			}
		}
		t.Fatalf("the limits allow an item of %d bytes; DynamoDB's limit is %d (with %d bytes kept for attributes this test does not know)", size, lease.MaxItemBytes, lease.ItemMarginBytes)
	}
}
