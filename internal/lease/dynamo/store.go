package dynamo

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/rules"
)

// Client lists the DynamoDB calls Store makes, with the SDK's
// signatures, so *dynamodb.Client satisfies it.
type Client interface {
	PutItem(ctx context.Context, params *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, params *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	GetItem(ctx context.Context, params *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	Query(ctx context.Context, params *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	// BatchGetItem reads the items behind a page of the listing index.
	BatchGetItem(ctx context.Context, params *dynamodb.BatchGetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchGetItemOutput, error)
}

// Attribute names of the tasks table. Times are unix milliseconds except
// expires_at (unix seconds, the TTL attribute).
const (
	AttrID              = "id"
	AttrKind            = "kind"
	AttrPayload         = "payload"
	AttrStatus          = "status"
	attrAttempt         = "attempt"
	attrMaxAttempts     = "max_attempts"
	AttrLeaseOwner      = "lease_owner"
	AttrLeaseUntil      = "lease_until"
	AttrFence           = "fence"
	AttrRunAt           = "run_at"
	attrResult          = "result"
	attrError           = "error"
	AttrCancelRequested = "cancel_requested"
	attrCreatedAt       = "created_at"
	attrUpdatedAt       = "updated_at"
	AttrFinishedAt      = "finished_at"
	AttrExpiresAt       = "expires_at"
	AttrHistory         = "history"
	attrHistoryDropped  = "history_dropped"
	attrSnoozes         = "snoozes"
	// attrQueue is the name of the task's queue (Task.Queue); absent for
	// the default work queue.
	attrQueue = "queue"
	// attrUnknownKindSince is Task.UnknownKindSince (unix ms).
	attrUnknownKindSince = "unknown_kind_since"
	// AttrSweepShard and AttrSweepAt key the sparse sweep index: both are
	// present exactly while Task.DispatchAt is set.
	AttrSweepShard = "sweep_shard"
	AttrSweepAt    = "sweep_at"
	// AttrListShard keys the listing index with created_at: Shard(id), set
	// by the create and never changed.
	AttrListShard = "list_shard"
	// attrListedIn is Task.ListedIn, the batch listing entry that lists a
	// task with no list_shard (lease/listing.go).
	attrListedIn = "listed_in"
	// attrListIDs holds a batch listing entry's task ids, a list.
	attrListIDs = "list_ids"
	// attrKindAt and attrQueueAt sort the listings by kind and by queue
	// (indexes by_kind and by_queue, keyed by list_shard as by_created
	// is): the kind, or the queue's name, and created_at (listSortKey).
	// Every task with a kind gets kind_at, and every task of a named queue
	// queue_at, at its create, listed or not, so that the write that
	// later gives it a list_shard (a batch-listed task's first retry, a
	// derived task's failure) lists it by kind and queue too without
	// knowing either; a batch listing entry carries its tasks' pair.
	attrKindAt  = "kind_at"
	attrQueueAt = "queue_at"
	// Waits (wait.go): Task.Parent, Task.Waiters (a string set of
	// Waiter.String), Task.Wait, Task.WaitFor (a list), Task.Ended (a string
	// set), Task.WaitUntil (unix ms) and Task.CallbackHash.
	attrParent    = "parent"
	attrWaiters   = "waiters"
	attrWait      = "wait"
	attrWaitFor   = "wait_for"
	attrEnded     = "ended"
	attrWaitUntil = "wait_until"
	AttrCallback  = "callback"
	// attrCallbackStep is Task.CallbackStep.
	attrCallbackStep = "callback_step"
	// attrBeatTimeout is Task.HeartbeatTimeout (ms) and attrBeatUntil
	// Task.BeatUntil (unix ms): both present only on a callback wait with
	// a heartbeat timeout.
	attrBeatTimeout = "beat_timeout"
	attrBeatUntil   = "beat_until"
	// attrWaitNote is Task.WaitNote.
	attrWaitNote = "wait_note"
	// attrRun is Task.Run (absent for the first run).
	attrRun = "run"
	// AttrSteps is Task.Steps: a list of maps {name, result}.
	AttrSteps = "steps"
	// attrThen is Task.Then: the chain's later links, a JSON array.
	attrThen = "then"
	// attrMetadata is Task.Metadata: a map of strings, left out when empty.
	attrMetadata = "md"
)

// Attribute names inside a history entry.
const (
	histAttempt = "attempt"
	histFence   = "fence"
	histStatus  = "status"
	histError   = "error"
	histAt      = "at"
)

// Store is the lease store on a DynamoDB table keyed by id. Every
// method is one call; a failed condition is classified from the item
// DynamoDB returns with the failure.
type Store struct {
	client Client
	table  string
	opts   lease.Options
	// listReads counts the task items the listings have read (ListReads).
	listReads atomic.Int64
}

var _ lease.Store = (*Store)(nil)

// New returns a store on table.
func New(client Client, table string, opts lease.Options) *Store {
	return &Store{client: client, table: table, opts: opts.WithDefaults()}
}

// Options returns the store's options, defaults applied.
func (s *Store) Options() lease.Options { return s.opts }

// ListReads is how many task items List and ListBy have read so far, what
// a listing pays for in read units besides its queries: the conformance
// suite holds a listing by kind to the items of that kind.
func (s *Store) ListReads() int64 { return s.listReads.Load() }

func (s *Store) now() time.Time { return lease.Millis(s.opts.Clock.Now()) }

// noSuchID reports an id no task can have (see CheckID): DynamoDB would
// reject it as a key instead of reporting it missing, or the SDK would turn
// bytes that are not UTF-8 into U+FFFD and so name another task.
func noSuchID(id string) bool { return lease.CheckID(id) != nil }

func backendErr(op, id string, err error) error {
	return fmt.Errorf("%s %s: %w: %w", op, id, lease.ErrBackend, err)
}

// newTask is the PENDING record of a submission.
func (s *Store) newTask(n lease.NewTask, now time.Time) lease.Task {
	runAt := lease.Millis(n.RunAt)
	if runAt.IsZero() {
		runAt = now
	}
	t := lease.Task{
		ID:          n.ID,
		Kind:        n.Kind,
		Payload:     bytes.Clone(n.Payload),
		Status:      lease.StatusPending,
		MaxAttempts: n.MaxAttempts,
		RunAt:       runAt,
		CreatedAt:   now,
		UpdatedAt:   now,
		Queue:       n.Queue,
	}
	if n.Listing.ID != "" && !n.Derived() && !s.opts.Unlisted {
		t.ListedIn = n.Listing.ID
	}
	rules.ApplyWaits(&t, n)
	return t
}

// Create implements lease.Store.
func (s *Store) Create(ctx context.Context, n lease.NewTask) (lease.Task, error) {
	if err := n.Validate(); err != nil {
		return lease.Task{}, fmt.Errorf("create %s: %w", n.ID, err)
	}
	t := s.newTask(n, s.now())
	switch {
	case t.Status == lease.StatusWaiting: // the ends of its dependencies wake it
		lease.ArmRegistrationCheck(&t, s.opts.DispatchGrace)
	case n.Carried: // its message brings it back; no sweep entry
	case !n.DispatchAt.IsZero():
		t.DispatchAt = lease.Millis(n.DispatchAt)
	default:
		t.DispatchAt = t.RunAt.Add(s.opts.DispatchGrace)
	}
	return s.put(ctx, t, n)
}

// CreateClaimed implements lease.Store.
func (s *Store) CreateClaimed(ctx context.Context, n lease.NewTask, owner string) (lease.Task, error) {
	if err := n.Validate(); err != nil {
		return lease.Task{}, fmt.Errorf("create %s: %w", n.ID, err)
	}
	if owner == "" {
		return lease.Task{}, fmt.Errorf("create %s: %w: owner is required", n.ID, lease.ErrInvalid)
	}
	if len(n.After) > 0 {
		return lease.Task{}, fmt.Errorf("create %s: %w: a task with dependencies is created WAITING, not claimed", n.ID, lease.ErrInvalid)
	}
	now := s.now()
	t := s.newTask(n, now)
	t.Status = lease.StatusRunning
	t.LeaseOwner = owner
	t.LeaseUntil = now.Add(s.opts.LeaseDuration)
	// No sweep entry: the message the task arrived in brings it back if
	// this worker dies (see Store.CreateClaimed).
	t.Attempt, t.Fence = 1, 1
	return s.put(ctx, t, n)
}

// CreateFailed implements lease.Store.
func (s *Store) CreateFailed(ctx context.Context, n lease.NewTask, reason string) (lease.Task, error) {
	if err := n.Validate(); err != nil {
		return lease.Task{}, fmt.Errorf("create %s: %w", n.ID, err)
	}
	now := s.now()
	t := s.newTask(n, now)
	t.Status = lease.StatusFailed
	t.Error = lease.Truncate(reason, lease.MaxErrorBytes)
	t.FinishedAt = now
	if s.opts.Retention > 0 {
		t.ExpiresAt = time.Unix(now.Add(s.opts.Retention).Unix(), 0).UTC()
	}
	return s.put(ctx, t, n)
}

// dispatchAfterLease is when the sweeper may re-dispatch a task whose lease
// runs until until and is then neither renewed nor given up.
func (s *Store) dispatchAfterLease(until time.Time) time.Time {
	return until.Add(s.opts.Skew + s.opts.DispatchGrace)
}

// attrCreateToken holds the token of the put that created an item.
const attrCreateToken = "create_token"

// attrCalls holds the ids of the latest user writes that landed on the
// item (a cancel, a retry, a callback's answer), oldest first: see withCall.
const attrCalls = "calls"

// maxCalls bounds attrCalls. A write that finds it full keeps the newest
// keptCalls ids and its own: an id is forgotten only after keptCalls
// later user writes landed on the task, far more than land while one call
// waits out a lost response.
const (
	maxCalls  = 16
	keptCalls = maxCalls / 2
)

// maxCallTrims bounds the writes of one update that finds the call list
// full (or trimmed under it) and has to build its write again.
const maxCallTrims = 3

// withCall stamps an update with a new random call id (see withCallID).
func withCall(values map[string]types.AttributeValue) map[string]types.AttributeValue {
	return withCallID(values, rand.Text())
}

// withCallID stamps an update with the call id call: update appends it to
// the item's call list (attrCalls) and adds to the condition that the list
// does not hold it yet. So each try of the call, whether the SDK's retry
// after a lost response or a later write of the same call, lands at most
// once: a try that finds the id in the item the condition failed on knows
// that its call already took effect, whatever happened to the task since,
// and reports that effect instead of acting again.
func withCallID(values map[string]types.AttributeValue, call string) map[string]types.AttributeValue {
	values[":call"] = avS(call)
	return values
}

// stampCall adds the call list's part to a stamped write's condition and
// update. With full nil the id is appended to a list that is not full;
// otherwise full is the full list the last try saw, which the write
// replaces by its newest ids and the call's, only if the list is still
// that one (every write ends the list with a new unique id, so its length
// and last id pin it).
func stampCall(cond, upd string, values map[string]types.AttributeValue, full []string) (string, string) {
	call := values[":call"]
	cond = "(" + cond + ") AND NOT contains(#calls, :call)"
	var set string
	if full == nil {
		cond += " AND (attribute_not_exists(#calls) OR size(#calls) < :max_calls)"
		set = "#calls = list_append(if_not_exists(#calls, :no_calls), :call_list)"
		values[":max_calls"] = avN(maxCalls)
		values[":no_calls"] = &types.AttributeValueMemberL{Value: []types.AttributeValue{}}
		values[":call_list"] = &types.AttributeValueMemberL{Value: []types.AttributeValue{call}}
	} else {
		cond += fmt.Sprintf(" AND size(#calls) = :calls_len AND #calls[%d] = :calls_last", len(full)-1)
		set = "#calls = :calls"
		kept := make([]types.AttributeValue, 0, keptCalls+1)
		for _, id := range full[len(full)-keptCalls:] {
			kept = append(kept, avS(id))
		}
		values[":calls"] = &types.AttributeValueMemberL{Value: append(kept, call)}
		values[":calls_len"] = avN(int64(len(full)))
		values[":calls_last"] = avS(full[len(full)-1])
	}
	if rest, ok := strings.CutPrefix(upd, "SET "); ok {
		return cond, "SET " + set + ", " + rest
	}
	return cond, "SET " + set + " " + upd
}

// callsOf reads the call list of a raw item.
func callsOf(item map[string]types.AttributeValue) []string {
	l, ok := item[attrCalls].(*types.AttributeValueMemberL)
	if !ok {
		return nil
	}
	out := make([]string, 0, len(l.Value))
	for _, v := range l.Value {
		if s, ok := v.(*types.AttributeValueMemberS); ok {
			out = append(out, s.Value)
		}
	}
	return out
}

// put writes t, the record of n, as a new item. When the id is taken it
// returns the stored task and CheckDuplicate's verdict.
//
// A put that got no answer within CallTimeout may still land (a slow table
// serves it after the caller gave up), so its outcome is unknown, not a
// failure: it is sent again, up to putAttempts calls in all, with the same
// token, and a later call that finds the item this token wrote reports the
// create. Only a put that never got an answer fails with the timeout.
func (s *Store) put(ctx context.Context, t lease.Task, n lease.NewTask) (lease.Task, error) {
	// A token unique to this create, so a retried put that finds its own
	// earlier landing can tell it from another caller's create.
	token := n.CreateToken
	if token == "" {
		token = rand.Text()
	}
	for attempt := 1; ; attempt++ {
		task, err := s.putOnce(ctx, t, n, token)
		if attempt == putAttempts || ctx.Err() != nil || !noAnswer(err) {
			return task, err
		}
	}
}

// noAnswer reports a call cut by its deadline or its HTTP timeout: whether
// it reached the table is unknown.
func noAnswer(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout())
}

// putAttempts bounds the calls of one put whose earlier calls got no answer.
const putAttempts = 3

func (s *Store) putOnce(ctx context.Context, t lease.Task, n lease.NewTask, token string) (lease.Task, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.CallTimeout)
	defer cancel()
	cond := "attribute_not_exists(#id)"
	item := itemOf(t)
	item[attrCreateToken] = avS(token)
	if s.opts.Unlisted || n.Derived() && !t.Status.Terminal() {
		delete(item, AttrListShard)
	}
	if s.opts.WorkQueue != "" && t.Queue == s.opts.WorkQueue {
		delete(item, attrQueueAt) // the default work queue: no listing by queue
	}
	_, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                           &s.table,
		Item:                                item,
		ConditionExpression:                 &cond,
		ExpressionAttributeNames:            namesIn(cond),
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err == nil {
		return t, nil
	}
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		return lease.Task{}, backendErr("create", t.ID, err)
	}
	old, err := decodeOld(ccf.Item)
	if err != nil {
		return lease.Task{}, backendErr("create", t.ID, err)
	}
	if old == nil {
		// The condition failed on an item DynamoDB did not return: it
		// was deleted in between. Report the id as taken; a retry
		// decides.
		return lease.Task{}, fmt.Errorf("create %s: %w", t.ID, lease.ErrAlreadyExists)
	}
	if seen, ok := ccf.Item[attrCreateToken].(*types.AttributeValueMemberS); ok && seen.Value == token {
		// The stored item carries this create's own token: the SDK (or
		// put, after a timeout) retried a put whose response was lost
		// after it landed, or the other holder of a shared token
		// (NewTask.CreateToken) wrote it. Either way it is this task.
		return rules.SameCreate(t, *old, n)
	}
	return *old, lease.CheckDuplicate(*old, n)
}

// Claim implements lease.Store.
func (s *Store) Claim(ctx context.Context, id, owner string) (lease.Task, error) {
	if owner == "" {
		return lease.Task{}, fmt.Errorf("claim %s: %w: owner is required", id, lease.ErrInvalid)
	}
	now := s.now()
	if noSuchID(id) {
		return lease.Task{}, rules.ClassifyClaim(id, nil, now, s.opts.Skew)
	}
	until := now.Add(s.opts.LeaseDuration)
	return s.update(ctx, "claim", id,
		"attribute_exists(#id) AND "+
			"((#status = :pending AND #run_at <= :now) OR (#status = :running AND #lease_until < :takeover)) AND "+
			"#attempt < #max_attempts",
		"SET #status = :running, #lease_owner = :owner, #lease_until = :until, "+
			"#attempt = #attempt + :one, #fence = #fence + :one, #updated_at = :now",
		map[string]types.AttributeValue{
			":pending":  avS(string(lease.StatusPending)),
			":running":  avS(string(lease.StatusRunning)),
			":now":      avMillis(now),
			":takeover": avMillis(now.Add(-s.opts.Skew)),
			":owner":    avS(owner),
			":until":    avMillis(until),
			":one":      avN(1),
		},
		func(old *lease.Task) error { return rules.ClassifyClaim(id, old, now, s.opts.Skew) })
}

// heldCond holds exactly when Holds(task, l) does.
const heldCond = "attribute_exists(#id) AND #status = :running AND #lease_owner = :owner AND #fence = :fence AND #attempt = :attempt"

func heldValues(l lease.Lease) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		":running": avS(string(lease.StatusRunning)),
		":owner":   avS(l.Owner),
		":fence":   avN(l.Fence),
		":attempt": avN(int64(l.Attempt)),
	}
}

// Renew implements lease.Store.
func (s *Store) Renew(ctx context.Context, l lease.Lease) (lease.Task, error) {
	if err := l.Validate(); err != nil {
		return lease.Task{}, fmt.Errorf("renew: %w", err)
	}
	now := s.now()
	until := now.Add(s.opts.LeaseDuration)
	values := heldValues(l)
	values[":until"] = avMillis(until)
	values[":now"] = avMillis(now)
	// The sweep entry stays where it is: moving its key would cost two
	// index writes per renewal. The sweep re-arms it while the lease is
	// live (MarkDispatched).
	return s.update(ctx, "renew", l.TaskID, heldCond,
		"SET #lease_until = :until, #updated_at = :now",
		values,
		func(old *lease.Task) error { return rules.ClassifyHeld("renew", l, old) })
}

// ending collects the update of a write that ends the attempt held under l,
// leaving the task in status.
type ending struct {
	cond             string
	set, remove, add []string
	values           map[string]types.AttributeValue
}

// appendHistory adds entry to the history update of e. Below MaxHistory it
// appends; at the bound it writes the known history's newest entries plus
// entry, counts the dropped ones, and pins the stored history's length to
// the known one in the condition.
func (e *ending) appendHistory(known []lease.Attempt, isKnown bool, entry lease.Attempt) {
	entry.Error = lease.Truncate(entry.Error, lease.MaxHistoryErrorBytes)
	if isKnown && lease.SuspendReplaces(known, entry) {
		// The attempt's last suspension is replaced (AppendHistory), at
		// the index the known history says, pinned by its length.
		e.cond += " AND size(#history) = :history_len"
		e.set = append(e.set, "#history["+strconv.Itoa(len(known)-1)+"] = :entry")
		e.values[":entry"] = attemptItem(entry)
		e.values[":history_len"] = avN(int64(len(known)))
		return
	}
	if !isKnown || len(known) < lease.MaxHistory {
		e.set = append(e.set, "#history = list_append(if_not_exists(#history, :no_history), :entry)")
		e.values[":no_history"] = &types.AttributeValueMemberL{Value: []types.AttributeValue{}}
		e.values[":entry"] = &types.AttributeValueMemberL{Value: []types.AttributeValue{attemptItem(entry)}}
		return
	}
	kept, dropped := rules.AppendHistory(known, entry)
	list := make([]types.AttributeValue, len(kept))
	for i, a := range kept {
		list[i] = attemptItem(a)
	}
	e.cond += " AND size(#history) = :history_len"
	e.set = append(e.set, "#history = :history", "#history_dropped = if_not_exists(#history_dropped, :zero) + :dropped")
	e.values[":history"] = &types.AttributeValueMemberL{Value: list}
	e.values[":history_len"] = avN(int64(len(known)))
	e.values[":dropped"] = avN(int64(dropped))
	e.values[":zero"] = avN(0)
}

func (s *Store) end(l lease.Lease, status lease.Status, errMsg string, now time.Time) *ending {
	e := &ending{
		cond: heldCond,
		set: []string{
			"#status = :status", "#updated_at = :now",
		},
		remove: []string{"#lease_owner", "#lease_until"},
		values: heldValues(l),
	}
	e.values[":status"] = avS(string(status))
	e.values[":now"] = avMillis(now)
	known, isKnown := l.KnownHistory()
	e.appendHistory(known, isKnown, lease.Attempt{Attempt: l.Attempt, Fence: l.Fence, Status: status, Error: errMsg, At: now})
	if l.ListedByEntry() && !status.Terminal() && !s.opts.Unlisted {
		// A task listed only by its batch's entry is listed on its own
		// from its first retry, wait or failure (lease/listing.go).
		e.set = append(e.set, "#list_shard = if_not_exists(#list_shard, :list_shard)")
		e.values[":list_shard"] = avS(lease.Shard(l.TaskID))
	}
	if status.Terminal() {
		e.set = append(e.set, "#finished_at = :now"+s.listFailed(l.TaskID, status, e.values))
		e.remove = append(e.remove, "#sweep_shard", "#sweep_at")
		if s.opts.Retention > 0 {
			e.set = append(e.set, "#expires_at = :expires_at")
			e.values[":expires_at"] = avN(now.Add(s.opts.Retention).Unix())
		}
	}
	return e
}

// listFailed is the SET clause, to follow another, that gives task id a
// listing entry if it has none when it ends with status otherwise than
// SUCCEEDED: a derived task (NewTask.Derived), created without one, is
// listed once it fails or is cancelled. For a task listed already the
// clause changes nothing, and an unchanged key writes nothing to the
// index. "" for SUCCEEDED and for a store whose tasks are unlisted.
func (s *Store) listFailed(id string, status lease.Status, values map[string]types.AttributeValue) string {
	if s.opts.Unlisted || !status.Unsuccessful() {
		return ""
	}
	values[":list_shard"] = avS(lease.Shard(id))
	return ", #list_shard = if_not_exists(#list_shard, :list_shard)"
}

// text sets name to the value v, or removes it when v is empty.
func (e *ending) text(name, v string) {
	if v == "" {
		e.remove = append(e.remove, "#"+name)
		return
	}
	e.set = append(e.set, "#"+name+" = :"+name)
	e.values[":"+name] = avS(v)
}

func (e *ending) expression() string {
	x := "SET " + strings.Join(e.set, ", ") + " REMOVE " + strings.Join(e.remove, ", ")
	if len(e.add) > 0 {
		x += " ADD " + strings.Join(e.add, ", ")
	}
	return x
}

// Finish implements lease.Store.
func (s *Store) Finish(ctx context.Context, l lease.Lease, result []byte) (lease.Task, error) {
	if err := l.Validate(); err != nil {
		return lease.Task{}, fmt.Errorf("finish: %w", err)
	}
	if err := lease.CheckResult(result); err != nil {
		return lease.Task{}, fmt.Errorf("finish %s: %w", l.TaskID, err)
	}
	e := s.end(l, lease.StatusSucceeded, "", s.now())
	e.text(attrResult, string(result))
	e.text(attrError, "")
	e.remove = append(e.remove, "#"+attrUnknownKindSince)
	return s.update(ctx, "finish", l.TaskID, e.cond, e.expression(), e.values,
		func(old *lease.Task) error { return rules.ClassifyHeld("finish", l, old) })
}

// Release implements lease.Store.
func (s *Store) Release(ctx context.Context, l lease.Lease, r lease.Release) (lease.Task, error) {
	if err := l.Validate(); err != nil {
		return lease.Task{}, fmt.Errorf("release: %w", err)
	}
	if err := r.Validate(); err != nil {
		return lease.Task{}, fmt.Errorf("release %s: %w", l.TaskID, err)
	}
	msg := lease.Truncate(r.Error, lease.MaxErrorBytes)
	e := s.end(l, r.Status, msg, s.now())
	e.text(attrError, msg)
	if r.Status == lease.StatusPending {
		runAt := lease.Millis(r.RunAt)
		dispatchAt := lease.Millis(r.DispatchAt)
		if dispatchAt.IsZero() {
			dispatchAt = runAt.Add(s.opts.DispatchGrace)
		}
		e.set = append(e.set, "#run_at = :run_at", "#sweep_shard = :sweep_shard", "#sweep_at = :sweep_at")
		e.values[":run_at"] = avMillis(runAt)
		e.values[":sweep_shard"] = avS(lease.Shard(l.TaskID))
		e.values[":sweep_at"] = avMillis(dispatchAt)
		switch {
		case r.UnknownKind:
			e.set = append(e.set, "#attempt = #attempt - :one", "#unknown_kind_since = if_not_exists(#unknown_kind_since, :now)")
			e.values[":one"] = avN(1)
		case r.RefundAttempt:
			e.set = append(e.set, "#attempt = #attempt - :one", "#snoozes = if_not_exists(#snoozes, :zero) + :one")
			e.values[":one"] = avN(1)
			e.values[":zero"] = avN(0)
		}
	}
	if !r.UnknownKind {
		e.remove = append(e.remove, "#"+attrUnknownKindSince)
	}
	if r.Continue != nil {
		// The next run: its input, no steps, no wait, its attempts
		// counted again.
		e.set = append(e.set, "#payload = :payload", "#run = if_not_exists(#run, :zero) + :one", "#attempt = :zero")
		e.values[":payload"], e.values[":zero"], e.values[":one"] = avS(string(r.Continue)), avN(0), avN(1)
		e.remove = append(e.remove, "#steps", "#"+attrStepNames, "#"+attrSpillFrom, "#wait", "#wait_for", "#"+attrWaitSpan, "#ended", "#"+attrEndedSub,
			"#wait_until", "#callback", "#callback_step", "#wait_note")
		if r.RefundAttempt {
			// (#attempt is set to zero above; a snooze's refund is moot.)
			e.set = slices.DeleteFunc(e.set, func(x string) bool { return x == "#attempt = #attempt - :one" })
		}
	}
	return s.update(ctx, "release", l.TaskID, e.cond, e.expression(), e.values,
		func(old *lease.Task) error { return rules.ClassifyHeld("release", l, old) })
}

// update runs one conditional UpdateItem returning the new item. When the
// condition fails, classify explains why from the item it saw (nil when
// there was none). A write stamped with a call id (withCall) that finds
// its id in that item has landed already: update returns that item, the
// task as it is now, and no error.
func (s *Store) update(ctx context.Context, op, id, cond, upd string,
	values map[string]types.AttributeValue, classify func(old *lease.Task) error,
) (lease.Task, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.CallTimeout)
	defer cancel()
	call, stamped := values[":call"].(*types.AttributeValueMemberS)
	var full []string // the full call list the last try saw
	for try := 0; ; try++ {
		c, u := cond, upd
		if stamped {
			c, u = stampCall(cond, upd, values, full)
		}
		out, err := s.client.UpdateItem(ctx, returnItems(s.updateItem(id, c, u, values)))
		if err == nil {
			t, err := TaskFromItem(out.Attributes)
			if err != nil {
				return lease.Task{}, backendErr(op, id, err)
			}
			return t, nil
		}
		var ccf *types.ConditionalCheckFailedException
		if !errors.As(err, &ccf) {
			return lease.Task{}, backendErr(op, id, err)
		}
		old, err := decodeOld(ccf.Item)
		if err != nil {
			return lease.Task{}, backendErr(op, id, err)
		}
		if stamped && old != nil {
			calls := callsOf(ccf.Item)
			if slices.Contains(calls, call.Value) {
				return *old, nil // this call's own write, whose response was lost
			}
			// A full list refuses the append: write again, trimming it.
			// A list trimmed meanwhile by another write: append again.
			isFull := len(calls) >= maxCalls
			switch {
			case try >= maxCallTrims:
			case isFull && !slices.Equal(calls, full):
				full = calls
				continue
			case !isFull && full != nil:
				full = nil
				continue
			}
		}
		return lease.Task{}, classify(old)
	}
}

// updateItem is the UpdateItem of the task id on cond and upd, with the
// names they use and those of values they use.
func (s *Store) updateItem(id, cond, upd string, values map[string]types.AttributeValue) *dynamodb.UpdateItemInput {
	return &dynamodb.UpdateItemInput{
		TableName:                 &s.table,
		Key:                       map[string]types.AttributeValue{AttrID: avS(id)},
		ConditionExpression:       &cond,
		UpdateExpression:          &upd,
		ExpressionAttributeNames:  namesIn(cond, upd),
		ExpressionAttributeValues: valuesIn(values, cond, upd),
	}
}

// returnItems has the update in return the new item, or the item it saw
// when its condition failed.
func returnItems(in *dynamodb.UpdateItemInput) *dynamodb.UpdateItemInput {
	in.ReturnValues = types.ReturnValueAllNew
	in.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	return in
}

// Get implements lease.Store.
func (s *Store) Get(ctx context.Context, id string) (lease.Task, error) {
	t, _, err := s.read(ctx, id, true)
	return t, err
}

// GetWithToken reads the task id and the create token of the write that
// stored it (NewTask.CreateToken, or the one put drew): a sender that left
// the create to its token's receiver (dispatch's CreateWait) tells by it
// the task it sent from one another call stored. The read is eventually
// consistent (half a read unit): it may miss a write of the last second,
// which such a sender reads again or answers with its own conditional
// create, but never returns a token that did not store the task.
func (s *Store) GetWithToken(ctx context.Context, id string) (lease.Task, string, error) {
	return s.read(ctx, id, false)
}

// read reads the task id and its create token.
func (s *Store) read(ctx context.Context, id string, consistent bool) (lease.Task, string, error) {
	if noSuchID(id) {
		return lease.Task{}, "", fmt.Errorf("get %s: %w", id, lease.ErrNotFound)
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.CallTimeout)
	defer cancel()
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      &s.table,
		Key:            map[string]types.AttributeValue{AttrID: avS(id)},
		ConsistentRead: &consistent,
	})
	if err != nil {
		return lease.Task{}, "", backendErr("get", id, err)
	}
	if len(out.Item) == 0 {
		return lease.Task{}, "", fmt.Errorf("get %s: %w", id, lease.ErrNotFound)
	}
	t, err := TaskFromItem(out.Item)
	if err != nil {
		return lease.Task{}, "", backendErr("get", id, err)
	}
	token, _ := out.Item[attrCreateToken].(*types.AttributeValueMemberS)
	if token == nil {
		return t, "", nil
	}
	return t, token.Value, nil
}

// namesIn maps every #name placeholder in exprs to the attribute name.
func namesIn(exprs ...string) map[string]string {
	names := map[string]string{}
	for _, p := range placeholders('#', exprs) {
		names[p] = p[1:]
	}
	return names
}

// valuesIn keeps the values exprs refer to: DynamoDB rejects unused ones.
func valuesIn(values map[string]types.AttributeValue, exprs ...string) map[string]types.AttributeValue {
	used := map[string]types.AttributeValue{}
	for _, p := range placeholders(':', exprs) {
		if v, ok := values[p]; ok {
			used[p] = v
		}
	}
	return used
}

// placeholders returns the tokens of exprs made of mark and a word.
func placeholders(mark byte, exprs []string) []string {
	var out []string
	for _, e := range exprs {
		for i := 0; i < len(e); i++ {
			if e[i] != mark {
				continue
			}
			j := i + 1
			for j < len(e) && (e[j] == '_' || 'a' <= e[j] && e[j] <= 'z' || '0' <= e[j] && e[j] <= '9') {
				j++
			}
			out = append(out, e[i:j])
			i = j - 1
		}
	}
	return out
}

func avS(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

func avN(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}

func avMillis(t time.Time) types.AttributeValue { return avN(t.UnixMilli()) }

// itemOf encodes t as an item; TaskFromItem is its inverse. Empty strings,
// zero times and an empty payload are left out.
func itemOf(t lease.Task) map[string]types.AttributeValue {
	item := map[string]types.AttributeValue{
		AttrID:              avS(t.ID),
		AttrStatus:          avS(string(t.Status)),
		attrAttempt:         avN(int64(t.Attempt)),
		attrMaxAttempts:     avN(int64(t.MaxAttempts)),
		AttrFence:           avN(t.Fence),
		AttrCancelRequested: &types.AttributeValueMemberBOOL{Value: t.CancelRequested},
	}
	if t.ListedIn != "" {
		item[attrListedIn] = avS(t.ListedIn)
	} else {
		item[AttrListShard] = avS(lease.Shard(t.ID))
	}
	if t.HistoryDropped != 0 {
		item[attrHistoryDropped] = avN(int64(t.HistoryDropped))
	}
	if t.Snoozes != 0 {
		item[attrSnoozes] = avN(int64(t.Snoozes))
	}
	if t.Run != 0 {
		item[attrRun] = avN(int64(t.Run))
	}
	text := func(name, v string) {
		if v != "" {
			item[name] = avS(v)
		}
	}
	millis := func(name string, v time.Time) {
		if !v.IsZero() {
			item[name] = avMillis(v)
		}
	}
	text(AttrKind, t.Kind) // (none only on a placeholder, IsPlaceholder)
	text(AttrPayload, string(t.Payload))
	text(AttrLeaseOwner, t.LeaseOwner)
	text(attrResult, string(t.Result))
	text(attrError, t.Error)
	text(attrQueue, t.Queue)
	if !t.CreatedAt.IsZero() {
		if t.Kind != "" {
			item[attrKindAt] = avS(listSortKey(t.Kind, t.CreatedAt.UnixMilli()))
		}
		if t.Queue != "" {
			item[attrQueueAt] = avS(listSortKey(t.Queue, t.CreatedAt.UnixMilli()))
		}
	}
	millis(attrUnknownKindSince, t.UnknownKindSince)
	millis(AttrLeaseUntil, t.LeaseUntil)
	millis(AttrRunAt, t.RunAt)
	millis(attrCreatedAt, t.CreatedAt)
	millis(attrUpdatedAt, t.UpdatedAt)
	millis(AttrFinishedAt, t.FinishedAt)
	if !t.ExpiresAt.IsZero() {
		item[AttrExpiresAt] = avN(t.ExpiresAt.Unix())
	}
	if !t.DispatchAt.IsZero() {
		item[AttrSweepShard] = avS(lease.Shard(t.ID))
		item[AttrSweepAt] = avMillis(t.DispatchAt)
	}
	history := make([]types.AttributeValue, len(t.History))
	for i, a := range t.History {
		history[i] = attemptItem(a)
	}
	item[AttrHistory] = &types.AttributeValueMemberL{Value: history}
	text(attrParent, t.Parent)
	text(attrWait, string(t.Wait))
	text(AttrCallback, t.CallbackHash)
	text(attrCallbackStep, t.CallbackStep)
	if t.HeartbeatTimeout > 0 {
		item[attrBeatTimeout] = avN(t.HeartbeatTimeout.Milliseconds())
	}
	millis(attrBeatUntil, t.BeatUntil)
	text(attrWaitNote, t.WaitNote)
	text(attrThen, encodeThen(t.Then))
	if len(t.Metadata) > 0 {
		md := make(map[string]types.AttributeValue, len(t.Metadata))
		for k, v := range t.Metadata {
			md[k] = avS(v)
		}
		item[attrMetadata] = &types.AttributeValueMemberM{Value: md}
	}
	millis(attrWaitUntil, t.WaitUntil)
	if len(t.Waiters) > 0 {
		ws := make([]string, len(t.Waiters))
		for i, w := range t.Waiters {
			ws[i] = w.String()
		}
		item[attrWaiters] = &types.AttributeValueMemberSS{Value: ws}
	}
	putWaitIDs(item, t)
	if t.Spilled {
		item[attrSpillFrom] = avN(int64(len(t.Steps)))
	}
	if len(t.Steps) > 0 {
		steps := make([]types.AttributeValue, len(t.Steps))
		for i, st := range t.Steps {
			steps[i] = stepItem(st)
		}
		item[AttrSteps] = &types.AttributeValueMemberL{Value: steps}
	}
	return item
}

func stepItem(s lease.Step) types.AttributeValue {
	m := map[string]types.AttributeValue{"name": avS(s.Name), "result": avS(string(s.Result))}
	if s.Op != "" {
		m["op"] = avS(s.Op)
	}
	return &types.AttributeValueMemberM{Value: m}
}

// avList encodes ids as a list of strings.
func avList(ids []string) types.AttributeValue {
	l := make([]types.AttributeValue, len(ids))
	for i, id := range ids {
		l[i] = avS(id)
	}
	return &types.AttributeValueMemberL{Value: l}
}

func attemptItem(a lease.Attempt) types.AttributeValue {
	m := map[string]types.AttributeValue{
		histAttempt: avN(int64(a.Attempt)),
		histFence:   avN(a.Fence),
		histStatus:  avS(string(a.Status)),
		histAt:      avMillis(a.At),
	}
	if a.Error != "" {
		m[histError] = avS(a.Error)
	}
	return &types.AttributeValueMemberM{Value: m}
}

// decodeOld decodes the item a failed condition saw; nil when there was none.
func decodeOld(item map[string]types.AttributeValue) (*lease.Task, error) {
	if len(item) == 0 {
		return nil, nil
	}
	t, err := TaskFromItem(item)
	if err != nil {
		return nil, err
	}
	return &t, nil
}

// TaskFromItem decodes an item of the tasks table. Attributes it does not
// know are ignored; a known one of the wrong type is an error.
func TaskFromItem(item map[string]types.AttributeValue) (lease.Task, error) {
	d := decoder{item: item}
	t := lease.Task{
		ID:               d.str(AttrID),
		Kind:             d.str(AttrKind),
		Status:           lease.Status(d.str(AttrStatus)),
		Attempt:          int(d.num(attrAttempt)),
		MaxAttempts:      int(d.num(attrMaxAttempts)),
		LeaseOwner:       d.str(AttrLeaseOwner),
		LeaseUntil:       d.millis(AttrLeaseUntil),
		Fence:            d.num(AttrFence),
		RunAt:            d.millis(AttrRunAt),
		Error:            d.str(attrError),
		CancelRequested:  d.boolean(AttrCancelRequested),
		CreatedAt:        d.millis(attrCreatedAt),
		UpdatedAt:        d.millis(attrUpdatedAt),
		FinishedAt:       d.millis(AttrFinishedAt),
		DispatchAt:       d.millis(AttrSweepAt),
		HistoryDropped:   int(d.num(attrHistoryDropped)),
		Snoozes:          int(d.num(attrSnoozes)),
		Queue:            d.str(attrQueue),
		UnknownKindSince: d.millis(attrUnknownKindSince),
		Parent:           d.str(attrParent),
		Wait:             lease.WaitMode(d.str(attrWait)),
		WaitFor:          d.strList(attrWaitFor),
		WaitUntil:        d.millis(attrWaitUntil),
		CallbackHash:     d.str(AttrCallback),
		CallbackStep:     d.str(attrCallbackStep),
		HeartbeatTimeout: time.Duration(d.num(attrBeatTimeout)) * time.Millisecond,
		BeatUntil:        d.millis(attrBeatUntil),
		WaitNote:         d.str(attrWaitNote),
		Run:              int32(d.num(attrRun)),
	}
	if _, own := item[AttrListShard]; !own {
		t.ListedIn = d.str(attrListedIn)
	}
	t.Ended = endedIDs(t.ID, d.strSet(attrEnded), d.strSet(attrEndedSub))
	if span := d.str(attrWaitSpan); span != "" {
		ids, ok := spanIDs(t.ID, span)
		if !ok && d.err == nil {
			d.err = fmt.Errorf("%s: %q is not COUNT FROM /NAME/", attrWaitSpan, span)
		}
		t.WaitFor = ids
	}
	for _, e := range d.strSet(attrWaiters) {
		w, err := lease.ParseWaiter(e)
		if err != nil && d.err == nil {
			d.err = err
		}
		if err == nil {
			t.Waiters = append(t.Waiters, w)
		}
	}
	if p := d.str(AttrPayload); p != "" {
		t.Payload = []byte(p)
	}
	if r := d.str(attrResult); r != "" {
		t.Result = []byte(r)
	}
	t.Metadata = d.strMap(attrMetadata)
	if then, err := decodeThen(d.str(attrThen)); err != nil && d.err == nil {
		d.err = err
	} else {
		t.Then = then
	}
	_, t.Spilled = item[attrSpillFrom]
	if sec := d.num(AttrExpiresAt); sec != 0 {
		t.ExpiresAt = time.Unix(sec, 0).UTC()
	}
	for _, e := range d.maps(AttrSteps) {
		st := lease.Step{Name: e.str("name"), Op: e.str("op"), Result: []byte(e.str("result"))}
		if e.err != nil {
			d.err = fmt.Errorf("steps: %w", e.err)
		}
		if _, dup := t.StepResult(st.Name); !dup { // a retried write's duplicate
			t.Steps = append(t.Steps, st)
		}
	}
	for _, e := range d.maps(AttrHistory) {
		t.History = append(t.History, lease.Attempt{
			Attempt: int(e.num(histAttempt)),
			Fence:   e.num(histFence),
			Status:  lease.Status(e.str(histStatus)),
			Error:   e.str(histError),
			At:      e.millis(histAt),
		})
		if e.err != nil {
			d.err = fmt.Errorf("history: %w", e.err)
		}
	}
	switch {
	case d.err != nil:
		return lease.Task{}, fmt.Errorf("decode task %q: %w", t.ID, d.err)
	case t.ID == "" || !t.Status.Valid():
		return lease.Task{}, fmt.Errorf("decode task %q: no id or bad status %q", t.ID, t.Status)
	}
	return t, nil
}

// decoder reads typed attributes and keeps the first type error.
type decoder struct {
	item map[string]types.AttributeValue
	err  error
}

func (d *decoder) fail(name, want string, got types.AttributeValue) {
	if d.err == nil {
		d.err = fmt.Errorf("attribute %s is %T, want %s", name, got, want)
	}
}

// attr returns the attribute name of d's item as the member type M, or
// false when the item has none, or has one of another type (which fails
// d, wanting the type named want).
func attr[M types.AttributeValue](d *decoder, name, want string) (M, bool) {
	var none M
	av, ok := d.item[name]
	if !ok {
		return none, false
	}
	v, ok := av.(M)
	if !ok {
		d.fail(name, want, av)
		return none, false
	}
	return v, true
}

func (d *decoder) str(name string) string {
	v, ok := attr[*types.AttributeValueMemberS](d, name, "S")
	if !ok {
		return ""
	}
	return v.Value
}

func (d *decoder) num(name string) int64 {
	v, ok := attr[*types.AttributeValueMemberN](d, name, "N")
	if !ok {
		return 0
	}
	n, err := strconv.ParseInt(v.Value, 10, 64)
	if err != nil && d.err == nil {
		d.err = fmt.Errorf("attribute %s: %w", name, err)
	}
	return n
}

func (d *decoder) strSet(name string) []string {
	v, ok := attr[*types.AttributeValueMemberSS](d, name, "SS")
	if !ok {
		return nil
	}
	out := slices.Clone(v.Value)
	slices.Sort(out)
	return out
}

// elems returns the elements of the list attribute name of d's item as
// the member type E: nil when the item has none, else those before the
// first element of another type, and whether there was none. An element
// of another type, or an attribute that is not a list, fails d.
func elems[E types.AttributeValue](d *decoder, name, want string) ([]E, bool) {
	l, ok := attr[*types.AttributeValueMemberL](d, name, "L")
	if !ok {
		return nil, false
	}
	out := make([]E, 0, len(l.Value))
	for _, av := range l.Value {
		e, ok := av.(E)
		if !ok {
			d.fail(name, want, av)
			return out, false
		}
		out = append(out, e)
	}
	return out, true
}

func (d *decoder) strList(name string) []string {
	l, all := elems[*types.AttributeValueMemberS](d, name, "L of S")
	if !all {
		return nil
	}
	out := make([]string, len(l))
	for i, s := range l {
		out[i] = s.Value
	}
	return out
}

// maps returns a decoder for each map of the list attribute name, up to
// the first element that is not a map.
func (d *decoder) maps(name string) []decoder {
	l, _ := elems[*types.AttributeValueMemberM](d, name, "L of M")
	out := make([]decoder, len(l))
	for i, m := range l {
		out[i] = decoder{item: m.Value}
	}
	return out
}

// strMap returns the map of strings name of d's item: nil when the item
// has none; a member that is not a string fails d.
func (d *decoder) strMap(name string) map[string]string {
	m, ok := attr[*types.AttributeValueMemberM](d, name, "M of S")
	if !ok || len(m.Value) == 0 {
		return nil
	}
	out := make(map[string]string, len(m.Value))
	for k, av := range m.Value {
		v, ok := av.(*types.AttributeValueMemberS)
		if !ok {
			d.fail(name+"."+k, "S", av)
			return nil
		}
		out[k] = v.Value
	}
	return out
}

func (d *decoder) millis(name string) time.Time {
	if _, ok := d.item[name]; !ok {
		return time.Time{}
	}
	return time.UnixMilli(d.num(name)).UTC()
}

func (d *decoder) boolean(name string) bool {
	v, ok := attr[*types.AttributeValueMemberBOOL](d, name, "BOOL")
	return ok && v.Value
}
