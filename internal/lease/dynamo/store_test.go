package dynamo_test

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/jonboulle/clockwork"

	"github.com/leasehold/leasehold/internal/awstest"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/dynamo"
	"github.com/leasehold/leasehold/internal/lease/leasetest"
	"github.com/leasehold/leasehold/internal/lease/query"
)

var _ dynamo.Client = (*dynamodb.Client)(nil)

// dynamoEnv is a table on the local stack and a client of it that counts
// its calls.
type dynamoEnv struct {
	client *dynamodb.Client
	table  string
	calls  *leasetest.CallCounter
}

// setupDynamo gives a test its own table. The requests go to the stack
// concurrently: the stack's DynamoDB applies conditional writes atomically
// (internal/awstest's TestStackConditionalWritesAreAtomic), so the
// concurrent-claim cases test that exactly one claimer wins.
func setupDynamo(t *testing.T) dynamoEnv {
	t.Helper()
	cfg := awstest.Config(t)
	calls := &leasetest.CallCounter{}
	client := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, calls.APIOption())
	})
	return dynamoEnv{client: client, table: awstest.NewTable(t, cfg), calls: calls}
}

func TestDynamoStoreConformance(t *testing.T) {
	t.Parallel()
	env := setupDynamo(t) // one table; every case uses its own task ids
	leasetest.Run(t, func(t *testing.T, opts lease.Options) lease.Store {
		if opts.CallTimeout == 0 {
			// The emulator on a loaded machine answers far slower than
			// DynamoDB; the store's default of 5s failed a case under load
			// ("context deadline exceeded"). No case of the suite tests
			// the timeout itself (store_test.go's own stores do).
			opts.CallTimeout = awstest.Scale(30 * time.Second)
		}
		return testStore{dynamo.New(env.client, env.table, opts), env}
	})
}

// testStore adds the suite's hook to the store.
type testStore struct {
	*dynamo.Store
	env dynamoEnv
}

// MarkCancelRequested implements leasetest.CancelMarker with a raw write.
func (s testStore) MarkCancelRequested(ctx context.Context, id string) error {
	_, err := s.env.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &s.env.table,
		Key:                       map[string]types.AttributeValue{dynamo.AttrID: &types.AttributeValueMemberS{Value: id}},
		ConditionExpression:       aws.String("attribute_exists(id)"),
		UpdateExpression:          aws.String("SET cancel_requested = :true"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":true": &types.AttributeValueMemberBOOL{Value: true}},
	})
	return err
}

func TestDynamoStoreInlineTaskCostsTwoWrites(t *testing.T) {
	t.Parallel()
	env := setupDynamo(t)
	store := dynamo.New(env.client, env.table, lease.Options{})
	env.calls.Reset()

	task, err := store.CreateClaimed(t.Context(), lease.NewTask{ID: "inline-1", Kind: "k", Payload: []byte(`{"a":1}`), MaxAttempts: 3}, "w1")
	if err != nil {
		t.Fatalf("CreateClaimed: %v", err)
	}
	// A finish whose answer the SDK lost and retried is still one call here
	// (the counter sits before the retry loop) and meets its own write.
	awstest.Finish(t, t.Context(), store, task.LeaseOf(), []byte(`{"ok":true}`))
	want := map[string]int{"PutItem": 1, "UpdateItem": 1}
	if got := env.calls.Snapshot(); !maps.Equal(got, want) {
		t.Fatalf("calls %v, want %v", got, want)
	}
}

// rawItem reads the stored item as DynamoDB holds it.
func (env dynamoEnv) rawItem(t *testing.T, id string) map[string]types.AttributeValue {
	t.Helper()
	out, err := env.client.GetItem(t.Context(), &dynamodb.GetItemInput{
		TableName:      &env.table,
		Key:            map[string]types.AttributeValue{dynamo.AttrID: &types.AttributeValueMemberS{Value: id}},
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		t.Fatalf("GetItem(%s): %v", id, err)
	}
	return out.Item
}

// TestDynamoStoreIndexAttributes checks the attributes the table's indexes
// and TTL read: the sparse sweep keys exist exactly while the task waits for
// a dispatch, the status shard follows the status, expires_at is in seconds.
func TestDynamoStoreIndexAttributes(t *testing.T) {
	t.Parallel()
	env := setupDynamo(t)
	at := time.Date(2031, time.March, 14, 15, 9, 26, 0, time.UTC)
	clock := clockwork.NewFakeClockAt(at)
	store := dynamo.New(env.client, env.table, lease.Options{Clock: clock})
	ctx := t.Context()

	check := func(step string, task lease.Task) {
		t.Helper()
		item := env.rawItem(t, task.ID)
		wantS := func(name, want string) {
			t.Helper()
			v, ok := item[name].(*types.AttributeValueMemberS)
			if !ok || v.Value != want {
				t.Fatalf("%s: %s = %#v, want S %q", step, name, item[name], want)
			}
		}
		wantN := func(name string, want int64) {
			t.Helper()
			v, ok := item[name].(*types.AttributeValueMemberN)
			if !ok || v.Value != strconv.FormatInt(want, 10) {
				t.Fatalf("%s: %s = %#v, want N %d", step, name, item[name], want)
			}
		}
		wantAbsent := func(names ...string) {
			t.Helper()
			for _, name := range names {
				if v, ok := item[name]; ok {
					t.Fatalf("%s: %s = %#v, want it absent", step, name, v)
				}
			}
		}
		wantS(dynamo.AttrStatus, string(task.Status))
		wantS(dynamo.AttrListShard, lease.Shard(task.ID))
		wantS(dynamo.AttrPayload, string(task.Payload))
		wantN(dynamo.AttrRunAt, task.RunAt.UnixMilli())
		wantN(dynamo.AttrFence, task.Fence)
		if task.DispatchAt.IsZero() {
			wantAbsent(dynamo.AttrSweepShard, dynamo.AttrSweepAt)
		} else {
			wantS(dynamo.AttrSweepShard, lease.Shard(task.ID))
			wantN(dynamo.AttrSweepAt, task.DispatchAt.UnixMilli())
		}
		if task.Status == lease.StatusRunning {
			wantS(dynamo.AttrLeaseOwner, task.LeaseOwner)
			wantN(dynamo.AttrLeaseUntil, task.LeaseUntil.UnixMilli())
		} else {
			wantAbsent(dynamo.AttrLeaseOwner, dynamo.AttrLeaseUntil)
		}
		if task.Status.Terminal() {
			wantN(dynamo.AttrFinishedAt, task.FinishedAt.UnixMilli())
			wantN(dynamo.AttrExpiresAt, task.ExpiresAt.Unix())
		} else {
			wantAbsent(dynamo.AttrFinishedAt, dynamo.AttrExpiresAt)
		}
		if _, ok := item[dynamo.AttrCancelRequested].(*types.AttributeValueMemberBOOL); !ok {
			t.Fatalf("%s: cancel_requested = %#v, want BOOL", step, item[dynamo.AttrCancelRequested])
		}
		hist, ok := item[dynamo.AttrHistory].(*types.AttributeValueMemberL)
		if !ok || len(hist.Value) != len(task.History) {
			t.Fatalf("%s: history = %#v, want L of %d", step, item[dynamo.AttrHistory], len(task.History))
		}
		for _, h := range hist.Value {
			if _, ok := h.(*types.AttributeValueMemberM); !ok {
				t.Fatalf("%s: history entry %#v, want M", step, h)
			}
		}
	}

	task, err := store.Create(ctx, lease.NewTask{ID: "idx-1", Kind: "k", Payload: []byte(`{"p":1}`), MaxAttempts: 2})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	check("created", task)
	task = awstest.Claim(t, ctx, store, task.ID, "w1")
	check("claimed", task)
	if task, err = store.Release(ctx, task.LeaseOf(), lease.Release{Status: lease.StatusPending, RunAt: at.Add(time.Minute), Error: "retry"}); err != nil {
		t.Fatalf("Release: %v", err)
	}
	check("released", task)
	if _, err = store.Claim(ctx, task.ID, "w2"); !errors.Is(err, lease.ErrNotDue) {
		t.Fatalf("Claim before run-at: %v", err)
	}
	clock.Advance(time.Minute)
	task = awstest.Claim(t, ctx, store, task.ID, "w2")
	check("claimed again", task)
	if task, err = store.Release(ctx, task.LeaseOf(), lease.Release{Status: lease.StatusFailed, Error: "gave up"}); err != nil {
		t.Fatalf("Release FAILED: %v", err)
	}
	check("failed", task)

	claimed, err := store.CreateClaimed(ctx, lease.NewTask{ID: "idx-2", Kind: "k", Payload: []byte(`{"p":2}`), MaxAttempts: 2}, "w1")
	if err != nil {
		t.Fatalf("CreateClaimed: %v", err)
	}
	check("created claimed", claimed)
	done, err := store.Finish(ctx, claimed.LeaseOf(), []byte(`{"r":1}`))
	if err != nil {
		t.Fatalf("Finish: %v", err)
	}
	check("finished", done)
}

// stubClient answers every call with err and records how long each call's
// context had left.
type stubClient struct {
	err  error
	mu   sync.Mutex
	left []time.Duration
}

func (c *stubClient) record(ctx context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, ok := ctx.Deadline()
	if !ok {
		c.left = append(c.left, -1)
		return
	}
	c.left = append(c.left, time.Until(d))
}

func (c *stubClient) PutItem(ctx context.Context, _ *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	c.record(ctx)
	return nil, c.err
}

func (c *stubClient) UpdateItem(ctx context.Context, _ *dynamodb.UpdateItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	c.record(ctx)
	return nil, c.err
}

func (c *stubClient) GetItem(ctx context.Context, _ *dynamodb.GetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	c.record(ctx)
	return nil, c.err
}

func (c *stubClient) Query(ctx context.Context, _ *dynamodb.QueryInput, _ ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	c.record(ctx)
	return nil, c.err
}

func (c *stubClient) BatchGetItem(ctx context.Context, _ *dynamodb.BatchGetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error) {
	c.record(ctx)
	return nil, c.err
}

// TestDynamoStoreBoundary checks, without a table, that every call runs
// under CallTimeout and that a service failure comes back as ErrBackend
// still wrapping the SDK's error.
func TestDynamoStoreBoundary(t *testing.T) {
	t.Parallel()
	throttled := &types.ProvisionedThroughputExceededException{Message: aws.String("slow down")}
	client := &stubClient{err: throttled}
	store := dynamo.New(client, "tasks", lease.Options{CallTimeout: 3 * time.Second})
	ctx := t.Context()
	task := lease.NewTask{ID: "b1", Kind: "k", MaxAttempts: 1}
	held := lease.Lease{TaskID: "b1", Owner: "w1", Fence: 1, Attempt: 1}

	calls := map[string]func() error{
		"Create":        func() error { _, err := store.Create(ctx, task); return err },
		"CreateClaimed": func() error { _, err := store.CreateClaimed(ctx, task, "w1"); return err },
		"Claim":         func() error { _, err := store.Claim(ctx, "b1", "w1"); return err },
		"Renew":         func() error { _, err := store.Renew(ctx, held); return err },
		"Finish":        func() error { _, err := store.Finish(ctx, held, nil); return err },
		"Release": func() error {
			_, err := store.Release(ctx, held, lease.Release{Status: lease.StatusFailed})
			return err
		},
		"Get": func() error { _, err := store.Get(ctx, "b1"); return err },
	}
	for name, call := range calls {
		err := call()
		var got *types.ProvisionedThroughputExceededException
		if !errors.Is(err, lease.ErrBackend) || !errors.As(err, &got) {
			t.Errorf("%s: error %v, want ErrBackend wrapping the SDK error", name, err)
		}
	}
	if len(client.left) != len(calls) {
		t.Fatalf("%d calls reached the client, want %d", len(client.left), len(calls))
	}
	for i, left := range client.left {
		if left <= 0 || left > 3*time.Second {
			t.Errorf("call %d ran with %s left, want a deadline within 3s", i, left)
		}
	}
}

// losingStore is a store on a new table of the local stack whose client
// can be told to lose the response of a write that landed.
func losingStore(t *testing.T) (*dynamo.Store, *awstest.LosingHTTP) {
	t.Helper()
	cfg := awstest.Config(t)
	table := awstest.NewTable(t, cfg)
	losing := awstest.NewLosingHTTP(cfg.HTTPClient)
	lcfg := cfg.Copy()
	lcfg.HTTPClient = losing
	return dynamo.New(dynamodb.NewFromConfig(lcfg), table, lease.Options{}), losing
}

// A create whose response is lost after the put landed is retried by the
// SDK; the retry finds the item this very call wrote and must report it as
// created, not as a duplicate (bulk enqueues counted such tasks as "already
// existed" under load).
func TestDynamoCreateRecognisesItsOwnLostResponse(t *testing.T) {
	t.Parallel()
	store, losing := losingStore(t)

	losing.LoseNext("DynamoDB_20120810.PutItem", `"own-1"`)
	task, err := store.Create(t.Context(), lease.NewTask{ID: "own-1", Kind: "k", Payload: []byte(`{"a":1}`), MaxAttempts: 3})
	if losing.Dropped() != 1 {
		t.Fatalf("%d responses dropped, want 1: the test did not hit the put", losing.Dropped())
	}
	if err != nil || task.ID != "own-1" || task.Status != lease.StatusPending {
		t.Fatalf("Create after a lost response: %+v, %v; want the created task and no error", task, err)
	}
	// A second, separate create of the same task is a duplicate as before.
	if _, err := store.Create(t.Context(), lease.NewTask{ID: "own-1", Kind: "k", Payload: []byte(`{"a":1}`), MaxAttempts: 3}); !errors.Is(err, lease.ErrAlreadyExists) {
		t.Fatalf("second Create: %v, want ErrAlreadyExists", err)
	}
}

// lateClient lands the first PutItem but answers it only when the call's
// deadline has passed, as a table too slow for the call timeout does.
type lateClient struct {
	dynamo.Client
	puts atomic.Int32
}

func (c *lateClient) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if c.puts.Add(1) > 1 {
		return c.Client.PutItem(ctx, in, opts...)
	}
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), awstest.Scale(30*time.Second))
	defer cancel()
	if _, err := c.Client.PutItem(lctx, in, opts...); err != nil {
		return nil, err
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

// A create whose call timed out although the put landed is not a failure:
// the put is sent again and finds its own item (bulk enqueues against a slow
// stack reported such tasks as failed).
func TestDynamoCreateAfterItsCallTimedOut(t *testing.T) {
	t.Parallel()
	cfg := awstest.Config(t)
	table := awstest.NewTable(t, cfg)
	client := &lateClient{Client: dynamodb.NewFromConfig(cfg)}
	store := dynamo.New(client, table, lease.Options{CallTimeout: awstest.Scale(2 * time.Second)})
	task, err := store.Create(t.Context(), lease.NewTask{ID: "late-1", Kind: "k", MaxAttempts: 3})
	if err != nil || task.ID != "late-1" || task.Status != lease.StatusPending {
		t.Fatalf("Create whose first call timed out after landing: %+v, %v; want the created task", task, err)
	}
	if n := client.puts.Load(); n != 2 {
		t.Fatalf("%d puts, want 2: the timed-out put and its retry", n)
	}
}

// The admin writes a user makes (cancel, retry, a callback's answer) also
// meet their own write when the SDK retries one whose response was lost:
// the caller is told it landed, not "already finished" or "already used".
func TestDynamoAdminWritesRecogniseTheirOwnLostResponse(t *testing.T) {
	t.Parallel()
	store, losing := losingStore(t)
	ctx := t.Context()
	lose := func(marker string) {
		t.Helper()
		losing.LoseNext("DynamoDB_20120810.UpdateItem", marker)
	}
	dropped := 0
	checkDropped := func(what string) {
		t.Helper()
		dropped++
		if losing.Dropped() != dropped {
			t.Fatalf("%s: %d responses dropped, want %d: the test did not hit the write", what, losing.Dropped(), dropped)
		}
	}

	// Cancel of a PENDING task.
	if _, err := store.Create(ctx, lease.NewTask{ID: "lost-cancel", Kind: "k", MaxAttempts: 3}); err != nil {
		t.Fatal(err)
	}
	lose(`"CANCELLED"`)
	got, err := store.RequestCancel(ctx, "lost-cancel")
	checkDropped("cancel")
	if err != nil || got.Status != lease.StatusCancelled {
		t.Fatalf("RequestCancel after a lost response: %s, %v; want CANCELLED and no error", got.Status, err)
	}
	var finished *lease.FinishedError
	if _, err := store.RequestCancel(ctx, "lost-cancel"); !errors.As(err, &finished) {
		t.Fatalf("a second, separate cancel: %v, want FinishedError", err)
	}

	// Retry of that CANCELLED task.
	lose(`#max_attempts = #attempt + :extra`)
	got, err = store.Retry(ctx, "lost-cancel", 2)
	checkDropped("retry")
	if err != nil || got.Status != lease.StatusPending || got.MaxAttempts != got.Attempt+2 {
		t.Fatalf("Retry after a lost response: %+v, %v; want PENDING with 2 attempts more and no error", got, err)
	}
	if _, err := store.Retry(ctx, "lost-cancel", 2); !errors.Is(err, query.ErrNotRetryable) {
		t.Fatalf("a second, separate retry: %v, want ErrNotRetryable", err)
	}

	// A callback's answer.
	held, err := store.CreateClaimed(ctx, lease.NewTask{ID: "lost-callback", Kind: "k", MaxAttempts: 3}, "w1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := store.Suspend(ctx, held.LeaseOf(), lease.Wait{Mode: lease.WaitCallback, Until: time.Now().Add(time.Hour), Nonce: "n0nce"}); err != nil {
		t.Fatal(err)
	}
	end := lease.WaitEnd{ID: held.ID, Fence: held.Fence, Attempt: held.Attempt, Nonce: "n0nce", Status: lease.StatusSucceeded, Result: []byte(`{"ok":true}`)}
	lose(`"SUCCEEDED"`)
	got, err = store.EndWait(ctx, end)
	checkDropped("callback")
	if err != nil || got.Status != lease.StatusSucceeded || string(got.Result) != `{"ok":true}` {
		t.Fatalf("EndWait after a lost response: %s, %v; want SUCCEEDED and no error", got.Status, err)
	}
	// The same token again is refused: it was accepted once.
	if _, err := store.EndWait(ctx, end); !errors.Is(err, lease.ErrFinished) {
		t.Fatalf("the token again: %v, want ErrFinished", err)
	}
}

// An item whose steps or history is not a list does not decode: the store
// reports it instead of reading a task without them.
func TestTaskFromItemRefusesAMalformedList(t *testing.T) {
	t.Parallel()
	for _, attr := range []string{dynamo.AttrSteps, dynamo.AttrHistory} {
		item := map[string]types.AttributeValue{
			dynamo.AttrID:     &types.AttributeValueMemberS{Value: "t1"},
			dynamo.AttrKind:   &types.AttributeValueMemberS{Value: "k"},
			dynamo.AttrStatus: &types.AttributeValueMemberS{Value: "RUNNING"},
			attr:              &types.AttributeValueMemberS{Value: "not a list"},
		}
		if _, err := dynamo.TaskFromItem(item); err == nil {
			t.Errorf("%s as a string: decoded without an error", attr)
		}
	}
}

// losingPair is a store whose responses can be lost, and a plain store on
// the same table for what other callers do meanwhile.
func losingPair(t *testing.T) (*dynamo.Store, *dynamo.Store, *awstest.LosingHTTP, dynamoEnv) {
	t.Helper()
	cfg := awstest.Config(t)
	env := dynamoEnv{client: dynamodb.NewFromConfig(cfg), table: awstest.NewTable(t, cfg)}
	losing := awstest.NewLosingHTTP(cfg.HTTPClient)
	lcfg := cfg.Copy()
	lcfg.HTTPClient = losing
	// The losing store's calls outlast what other callers do while its
	// response is lost (LoseNextThen).
	return dynamo.New(dynamodb.NewFromConfig(lcfg), env.table, lease.Options{CallTimeout: awstest.Scale(30 * time.Second)}),
		dynamo.New(env.client, env.table, lease.Options{}), losing, env
}

// Each user write takes effect at most once and reports its own effect,
// even when its response is lost and the task moves on before the retry
// (issue 18, items 3 to 5).
func TestDynamoCancelTakesEffectOnceUnderALostResponse(t *testing.T) {
	t.Parallel()
	store, other, losing, _ := losingPair(t)
	ctx := t.Context()
	const update = "DynamoDB_20120810.UpdateItem"
	// Only the cancel's flag write sets the flag and the time alone.
	const flagWrite = "#cancel_requested = :true, #updated_at = :now"
	running := func(id string) lease.Task {
		t.Helper()
		task, err := other.CreateClaimed(ctx, lease.NewTask{ID: id, Kind: "k", MaxAttempts: 3}, "w1")
		if err != nil {
			t.Fatal(err)
		}
		return task
	}
	get := func(id string) lease.Task {
		t.Helper()
		task, err := other.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return task
	}

	t.Run("FlagThenFinish", func(t *testing.T) {
		// The flag lands on the running task, its answer is lost, and the
		// task finishes before the retry: the cancel did take effect first.
		held := running("flag-finish")
		losing.LoseNextThen(update, flagWrite, func() {
			if _, err := other.Finish(ctx, held.LeaseOf(), []byte(`1`)); err != nil {
				t.Errorf("finish meanwhile: %v", err)
			}
		})
		if _, err := store.RequestCancel(ctx, held.ID); err != nil {
			t.Fatalf("RequestCancel whose flag landed before the finish: %v; want success", err)
		}
		if got := get(held.ID); got.Status != lease.StatusSucceeded || !got.CancelRequested {
			t.Fatalf("task %s flag %v, want SUCCEEDED with the flag", got.Status, got.CancelRequested)
		}
	})

	t.Run("FlagThenRelease", func(t *testing.T) {
		// The flag lands, its answer is lost, the holder releases the task
		// to PENDING without honouring it. The retry finds its own flag on
		// a flagged PENDING task, which the flag dooms (its next claim would
		// cancel it): the cancel ends it now, once.
		held := running("flag-release")
		losing.LoseNextThen(update, flagWrite, func() {
			if _, err := other.Release(ctx, held.LeaseOf(), lease.Release{Status: lease.StatusPending, RunAt: time.Now()}); err != nil {
				t.Errorf("release meanwhile: %v", err)
			}
		})
		got, err := store.RequestCancel(ctx, held.ID)
		if err != nil || got.Status != lease.StatusCancelled {
			t.Fatalf("RequestCancel: %s, %v; want CANCELLED", got.Status, err)
		}
		stored := get(held.ID)
		if stored.Status != lease.StatusCancelled || !stored.CancelRequested {
			t.Fatalf("task %s flag %v, want CANCELLED with the flag", stored.Status, stored.CancelRequested)
		}
		if h := stored.History; len(h) != 2 || h[0].Status != lease.StatusPending || h[1].Status != lease.StatusCancelled {
			t.Fatalf("history %+v, want the release, then one cancel", h)
		}
	})

	t.Run("CancelThenRetryAndClaim", func(t *testing.T) {
		// The cancel of a PENDING task lands, its answer is lost, a retry
		// and a claim land: the cancel must not flag the new attempt.
		id := "cancel-retry-claim"
		if _, err := other.Create(ctx, lease.NewTask{ID: id, Kind: "k", MaxAttempts: 3}); err != nil {
			t.Fatal(err)
		}
		losing.LoseNextThen(update, `"CANCELLED"`, func() {
			if _, err := other.Retry(ctx, id, 1); err != nil {
				t.Errorf("retry meanwhile: %v", err)
			}
			if _, err := other.Claim(ctx, id, "w2"); err != nil {
				t.Errorf("claim meanwhile: %v", err)
			}
		})
		if _, err := store.RequestCancel(ctx, id); err != nil {
			t.Fatalf("RequestCancel: %v", err)
		}
		if got := get(id); got.Status != lease.StatusRunning || got.CancelRequested {
			t.Fatalf("task %s flag %v, want RUNNING without the flag: the earlier cancel undid the later retry", got.Status, got.CancelRequested)
		}
	})

	t.Run("CallbackThenRetry", func(t *testing.T) {
		// A callback's FAIL lands, its answer is lost, a retry lands: the
		// callback still reports its own effect.
		held := running("callback-retry")
		if _, err := other.Suspend(ctx, held.LeaseOf(), lease.Wait{Mode: lease.WaitCallback, Until: time.Now().Add(time.Hour), Nonce: "n1"}); err != nil {
			t.Fatal(err)
		}
		losing.LoseNextThen(update, `"FAILED"`, func() {
			if _, err := other.Retry(ctx, held.ID, 1); err != nil {
				t.Errorf("retry meanwhile: %v", err)
			}
		})
		end := lease.WaitEnd{ID: held.ID, Fence: held.Fence, Attempt: held.Attempt, Nonce: "n1", Status: lease.StatusFailed, Error: "no"}
		if _, err := store.EndWait(ctx, end); err != nil {
			t.Fatalf("EndWait whose write landed before the retry: %v; want success", err)
		}
	})
}

// A checkpoint whose response is lost is retried by the SDK; the step is
// recorded once (issue 18, item 2).
func TestDynamoCheckpointRecordsAStepOnceUnderALostResponse(t *testing.T) {
	t.Parallel()
	store, other, losing, env := losingPair(t)
	ctx := t.Context()
	held, err := other.CreateClaimed(ctx, lease.NewTask{ID: "step-once", Kind: "k", MaxAttempts: 3}, "w1")
	if err != nil {
		t.Fatal(err)
	}
	losing.LoseNext("DynamoDB_20120810.UpdateItem", `"s2"`)
	got, err := store.Checkpoint(ctx, held.LeaseOf(), lease.Step{Name: "s2", Result: []byte(`"two"`)})
	if losing.Dropped() != 1 {
		t.Fatalf("%d responses dropped, want 1", losing.Dropped())
	}
	if err != nil || len(got.Steps) != 1 {
		t.Fatalf("Checkpoint after a lost response: %+v, %v; want the step and no error", got.Steps, err)
	}
	steps, ok := env.rawItem(t, held.ID)[dynamo.AttrSteps].(*types.AttributeValueMemberL)
	if !ok || len(steps.Value) != 1 {
		t.Fatalf("the item holds steps %#v, want 1: the retried write appended the step again", steps)
	}
}

// The item's list of user-call ids stays bounded, and a call whose write
// trimmed it still recognises its own landing.
func TestDynamoCallListIsBounded(t *testing.T) {
	t.Parallel()
	store, other, losing, env := losingPair(t)
	ctx := t.Context()
	id := "calls-bounded"
	if _, err := other.Create(ctx, lease.NewTask{ID: id, Kind: "k", MaxAttempts: 3}); err != nil {
		t.Fatal(err)
	}
	calls := func() []types.AttributeValue {
		t.Helper()
		l, _ := env.rawItem(t, id)["calls"].(*types.AttributeValueMemberL)
		if l == nil {
			return nil
		}
		return l.Value
	}
	for i := range 9 { // 18 user writes: the 17th trims the list
		if _, err := other.RequestCancel(ctx, id); err != nil {
			t.Fatalf("cancel %d: %v", i, err)
		}
		if _, err := other.Retry(ctx, id, 1); err != nil {
			t.Fatalf("retry %d: %v", i, err)
		}
		if n := len(calls()); n < 1 || n > 16 {
			t.Fatalf("after %d cycles the call list holds %d ids, want 1..16", i+1, n)
		}
	}
	// Fill the list up to its bound, then lose the answer of the write that
	// has to trim it.
	for len(calls()) < 16 {
		if _, err := other.RequestCancel(ctx, id); err != nil {
			t.Fatal(err)
		}
		if len(calls()) == 16 {
			break
		}
		if _, err := other.Retry(ctx, id, 1); err != nil {
			t.Fatal(err)
		}
	}
	before := calls()
	last := before[len(before)-1].(*types.AttributeValueMemberS).Value
	var task lease.Task
	var err error
	// Only the trimming write pins the list's last id.
	losing.LoseNext("DynamoDB_20120810.UpdateItem", `:calls_last`)
	if got, _ := other.Get(ctx, id); got.Status == lease.StatusCancelled {
		task, err = store.Retry(ctx, id, 1)
	} else {
		task, err = store.RequestCancel(ctx, id)
	}
	if err != nil || losing.Dropped() != 1 {
		t.Fatalf("the trimming write after a lost response: %s, %v (%d dropped); want success", task.Status, err, losing.Dropped())
	}
	after := calls()
	if len(after) != 9 {
		t.Fatalf("the trimmed list holds %d ids, want the newest 8 and the call's own", len(after))
	}
	if got := after[7].(*types.AttributeValueMemberS).Value; got != last {
		t.Fatalf("the trimmed list's 8th id is %q, want the newest before the trim, %q", got, last)
	}
}

// TestDynamoStoreKeepsNoCallbackNonce: the item of a task waiting for a
// callback holds no trace of the token's nonce, only its hash, so GetItem
// on the table is not enough to answer the wait (issue 18, item 16).
func TestDynamoStoreKeepsNoCallbackNonce(t *testing.T) {
	t.Parallel()
	env := setupDynamo(t)
	store := dynamo.New(env.client, env.table, lease.Options{})
	ctx := t.Context()
	held, err := store.CreateClaimed(ctx, lease.NewTask{ID: "nonce-hashed", Kind: "k", MaxAttempts: 3}, "w1")
	if err != nil {
		t.Fatal(err)
	}
	const nonce = "QWERTYUIOPASDFGHJKLZXCVBNM"
	if _, err := store.Suspend(ctx, held.LeaseOf(), lease.Wait{Mode: lease.WaitCallback, Until: time.Now().Add(time.Hour), Nonce: nonce}); err != nil {
		t.Fatal(err)
	}
	item := env.rawItem(t, held.ID)
	if name, ok := holds(item, nonce); ok {
		t.Fatalf("the item's %s holds the raw nonce", name)
	}
	v, ok := item[dynamo.AttrCallback].(*types.AttributeValueMemberS)
	if !ok || v.Value == "" {
		t.Fatalf("callback = %#v, want the nonce's hash", item[dynamo.AttrCallback])
	}
}

// holds reports which attribute of item (searched through lists and maps)
// has a string or binary value containing s.
func holds(item map[string]types.AttributeValue, s string) (string, bool) {
	var in func(v types.AttributeValue) bool
	in = func(v types.AttributeValue) bool {
		switch v := v.(type) {
		case *types.AttributeValueMemberS:
			return strings.Contains(v.Value, s)
		case *types.AttributeValueMemberB:
			return strings.Contains(string(v.Value), s)
		case *types.AttributeValueMemberSS:
			return slices.ContainsFunc(v.Value, func(x string) bool { return strings.Contains(x, s) })
		case *types.AttributeValueMemberL:
			return slices.ContainsFunc(v.Value, in)
		case *types.AttributeValueMemberM:
			_, ok := holds(v.Value, s)
			return ok
		}
		return false
	}
	for name, v := range item {
		if in(v) {
			return name, true
		}
	}
	return "", false
}
