package dynamo

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/query"
	"github.com/leasehold/leasehold/internal/lease/rules"
)

// Index names of the tasks table.
const (
	// indexSweep is the sparse sweep index: (sweep_shard, sweep_at), keys
	// only.
	indexSweep = "sweep"
	// indexByCreated is the listing index: (list_shard, created_at), keys
	// only. Its keys never change after the create, so no write but the
	// create touches it; List reads each task's status from the item.
	indexByCreated = "by_created"
)

var _ query.Admin = (*Store)(nil)

// Due implements query.Admin: one Query of the sweep index per page of results,
// until limit entries or the end of the due range.
func (s *Store) Due(ctx context.Context, shard string, now time.Time, limit int) ([]query.DueTask, error) {
	if err := query.CheckDue(shard, limit); err != nil {
		return nil, err
	}
	cond := "#sweep_shard = :shard AND #sweep_at <= :now"
	in := &dynamodb.QueryInput{
		TableName:                 &s.table,
		IndexName:                 aws.String(indexSweep),
		KeyConditionExpression:    &cond,
		ExpressionAttributeNames:  namesIn(cond),
		ExpressionAttributeValues: map[string]types.AttributeValue{":shard": avS(shard), ":now": avMillis(lease.Millis(now))},
		ScanIndexForward:          aws.Bool(true),
	}
	var due []query.DueTask
	for {
		in.Limit = aws.Int32(int32(limit - len(due)))
		out, err := s.query(ctx, in)
		if err != nil {
			return nil, backendErr("due", shard, err)
		}
		for _, item := range out.Items {
			d := decoder{item: item}
			e := query.DueTask{ID: d.str(AttrID), DispatchAt: d.millis(AttrSweepAt)}
			if d.err != nil || e.ID == "" {
				return nil, backendErr("due", shard, fmt.Errorf("sweep index entry %q: %v", e.ID, d.err))
			}
			due = append(due, e)
		}
		if len(out.LastEvaluatedKey) == 0 || len(due) >= limit {
			return due, nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

func (s *Store) query(ctx context.Context, in *dynamodb.QueryInput) (*dynamodb.QueryOutput, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.CallTimeout)
	defer cancel()
	return s.client.Query(ctx, in)
}

// MarkDispatched implements query.Admin.
func (s *Store) MarkDispatched(ctx context.Context, id string, seen, next time.Time) (string, error) {
	if err := query.CheckMarkDispatched(id, seen, next); err != nil {
		return "", err
	}
	if noSuchID(id) {
		return "", fmt.Errorf("mark dispatched %s: %w", id, query.ErrDispatchRaced)
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.CallTimeout)
	defer cancel()
	now := s.now()
	cond := "#sweep_at = :seen AND (#status <> :running OR #lease_until <= :expired)"
	upd := "SET #sweep_at = :next"
	// The new item comes back for its queue (the sweep index projects
	// keys only); returned values cost no capacity.
	out, err := s.client.UpdateItem(ctx, returnItems(s.updateItem(id, cond, upd, map[string]types.AttributeValue{
		":seen":    avMillis(lease.Millis(seen)),
		":next":    avMillis(lease.Millis(next)),
		":running": avS(string(lease.StatusRunning)),
		":expired": avMillis(now.Add(-s.opts.Skew - s.opts.DispatchGrace)),
	})))
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf):
		old, derr := decodeOld(ccf.Item)
		if derr == nil && old != nil && old.DispatchAt.Equal(lease.Millis(seen)) && rules.HolderWaits(*old, now, s.opts.Skew, s.opts.DispatchGrace) {
			return "", s.rearm(ctx, *old)
		}
		return "", fmt.Errorf("mark dispatched %s: %w", id, query.ErrDispatchRaced)
	case err != nil:
		return "", backendErr("mark dispatched", id, err)
	}
	d := decoder{item: out.Attributes}
	queue := d.str(attrQueue)
	if d.err != nil {
		return "", backendErr("mark dispatched", id, d.err)
	}
	return queue, nil
}

// rearm moves the sweep entry of old, which HolderWaits, to the
// lease's expiry plus skew plus grace, if neither has changed since.
func (s *Store) rearm(ctx context.Context, old lease.Task) error {
	cond := "#sweep_at = :seen AND #lease_until = :until"
	upd := "SET #sweep_at = :next"
	_, err := s.client.UpdateItem(ctx, s.updateItem(old.ID, cond, upd, map[string]types.AttributeValue{
		":seen":  avMillis(old.DispatchAt),
		":until": avMillis(old.LeaseUntil),
		":next":  avMillis(s.dispatchAfterLease(old.LeaseUntil)),
	}))
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		return backendErr("mark dispatched", old.ID, err)
	}
	return fmt.Errorf("mark dispatched %s: %w: its lease is live", old.ID, query.ErrDispatchRaced)
}

// errConditionFailed marks a conditional write whose condition failed; the
// caller decides from the item it saw.
var errConditionFailed = errors.New("condition failed")

// maxCancelTries bounds the writes of each step of one RequestCancel: the
// flag's (which only a call list trimmed under it refuses) and the pinned
// writes that end a flagged PENDING or WAITING task (each refused one
// hands back the item it saw, and the next is built for it).
const maxCancelTries = 4

// RequestCancel implements query.Admin. It makes no read, and no other writer can
// make it fail:
//
//  1. The first write assumes a PENDING task that never ran and ends it
//     CANCELLED (cancelPending); for a task queued and never claimed, the
//     common case, that is the whole cancel.
//  2. Otherwise (the item that write saw says the task moved on, and has not
//     ended) one write sets cancel_requested on the task, conditioned only
//     on its existence and a status that is not terminal (flagCancel):
//     claims, renewals, checkpoints, releases and suspensions leave both
//     alone, so none of them can make it fail. It is the cancel's
//     linearization point: from it on the task is doomed, whoever ends
//     it. The workers honour the flag (internal/lifecycle): the holder's
//     next renewal cancels the handler, a claim or a resume of a flagged
//     task ends it CANCELLED without running it, a suspension or a release
//     to PENDING of a flagged attempt ends the task cancelled at once.
//  3. A flagged task that is PENDING or WAITING is ended CANCELLED at once
//     with the pinned write of step 1, built for the item the flag's write
//     returned (endFlagged); a write refused because another writer moved
//     the task is built again for the item it saw, while the task is
//     flagged, PENDING or WAITING, up to maxCancelTries writes. A RUNNING
//     one is left to its holder.
//
// Every write of steps 1 and 2 carries the call id (withCallID), so once
// one of them has landed the others (the SDK's retries after a lost
// response, the next step) find it in the item and report that write's
// effect instead of acting again: a later retry of the task is never
// undone by the cancel. Step 3's writes carry an id of their own, and are
// conditioned on the flag, which a retry clears.
func (s *Store) RequestCancel(ctx context.Context, id string) (lease.Task, error) {
	if noSuchID(id) {
		return lease.Task{}, fmt.Errorf("request cancel %s: %w", id, lease.ErrNotFound)
	}
	call := rand.Text()
	var seen *lease.Task
	saw := func(old *lease.Task) error { seen = old; return errConditionFailed }
	t, err := s.cancelPending(ctx, lease.Task{ID: id, Status: lease.StatusPending}, false, call, saw)
	switch {
	case err == nil:
		return t, nil
	case !errors.Is(err, errConditionFailed):
		return lease.Task{}, err
	case seen == nil:
		return lease.Task{}, fmt.Errorf("request cancel %s: %w", id, lease.ErrNotFound)
	case seen.Status.Terminal():
		return lease.Task{}, &lease.FinishedError{TaskID: id, Status: seen.Status}
	}
	if t, err = s.flagCancel(ctx, id, call); err != nil {
		return lease.Task{}, err
	}
	return s.endFlagged(ctx, t)
}

// flagCancel sets cancel_requested on task id, which has not ended (step 2
// of RequestCancel). Its condition holds for every task that has not
// ended, so only the call list can refuse it: a full list trimmed by
// another user write in between (update tries again), or, after
// maxCallTrims such trims, a refusal flagCancel tries again itself. A task
// found flagged by another cancel needs no write.
func (s *Store) flagCancel(ctx context.Context, id, call string) (lease.Task, error) {
	for range maxCancelTries {
		var seen *lease.Task
		t, err := s.update(ctx, "request cancel", id,
			"attribute_exists(#id) AND "+notEndedCond,
			"SET #cancel_requested = :true, #updated_at = :now",
			terminalValues(withCallID(map[string]types.AttributeValue{
				":true": &types.AttributeValueMemberBOOL{Value: true},
				":now":  avMillis(s.now()),
			}, call)),
			func(old *lease.Task) error { seen = old; return errConditionFailed })
		switch {
		case err == nil:
			return t, nil
		case !errors.Is(err, errConditionFailed):
			return lease.Task{}, err
		case seen == nil:
			return lease.Task{}, fmt.Errorf("request cancel %s: %w", id, lease.ErrNotFound)
		case seen.Status.Terminal():
			return lease.Task{}, &lease.FinishedError{TaskID: id, Status: seen.Status}
		case seen.CancelRequested:
			return *seen, nil
		}
	}
	return lease.Task{}, fmt.Errorf("request cancel %s: %w: its call list kept changing", id, lease.ErrBackend)
}

// endFlagged ends t, as the write that flagged it returned it, CANCELLED if
// it is PENDING or WAITING (step 3 of RequestCancel). It returns the task
// as last seen: CANCELLED, RUNNING with the flag (its holder ends it),
// ended otherwise, or, should every try meet another move of the task,
// still flagged and PENDING or WAITING, which its next claim or resume
// ends. A refused try means another writer moved the task: a claim, or a
// resume that claims, makes it RUNNING (endFlagged stops there); most
// other moves end it. Only the end of a callback wait (WAITING to
// PENDING, once per wait) or a writer that ignores the flag keeps it
// PENDING or WAITING, so the tries are not used up in practice.
func (s *Store) endFlagged(ctx context.Context, t lease.Task) (lease.Task, error) {
	call := rand.Text()
	for range maxCancelTries {
		if t.Status != lease.StatusPending && t.Status != lease.StatusWaiting || !t.CancelRequested {
			return t, nil
		}
		var seen *lease.Task
		got, err := s.cancelPending(ctx, t, true, call, func(old *lease.Task) error { seen = old; return errConditionFailed })
		switch {
		case err == nil:
			return got, nil
		case !errors.Is(err, errConditionFailed):
			return lease.Task{}, err
		case seen == nil: // gone since: its retention ran out
			return t, nil
		}
		t = *seen
	}
	return t, nil
}

// cancelPending ends prev, a PENDING or WAITING task at the attempt and
// fence of prev (and, if flagged, still carrying the cancel flag), as
// CANCELLED, with a history entry: DynamoDB cannot copy the stored attempt
// into the entry, so the condition pins it.
func (s *Store) cancelPending(ctx context.Context, prev lease.Task, flagged bool, call string, classify func(*lease.Task) error) (lease.Task, error) {
	now := s.now()
	values := withCallID(map[string]types.AttributeValue{
		":pending": avS(string(prev.Status)), // PENDING or WAITING
		":attempt": avN(int64(prev.Attempt)),
		":fence":   avN(prev.Fence),
		":status":  avS(string(lease.StatusCancelled)),
		":now":     avMillis(now),
		":error":   avS(query.CancelledWhilePending),
		":true":    &types.AttributeValueMemberBOOL{Value: true},
	}, call)
	// prev was read whole, so its history is known (the condition pins it).
	cond := "attribute_exists(#id) AND #status = :pending AND #attempt = :attempt AND #fence = :fence"
	if flagged {
		// A retry clears the flag: the task it put back is not this
		// cancel's to end.
		cond += " AND #cancel_requested = :true"
	}
	e := &ending{cond: cond, values: values}
	e.appendHistory(prev.History, true, lease.Attempt{Attempt: prev.Attempt, Fence: prev.Fence, Status: lease.StatusCancelled, Error: query.CancelledWhilePending, At: now})
	set := "SET #status = :status, #updated_at = :now, #finished_at = :now, " +
		"#error = :error, #cancel_requested = :true, " + strings.Join(e.set, ", ") + s.listFailed(prev.ID, lease.StatusCancelled, values)
	if s.opts.Retention > 0 {
		set += ", #expires_at = :expires_at"
		values[":expires_at"] = avN(now.Add(s.opts.Retention).Unix())
	}
	return s.update(ctx, "request cancel", prev.ID, e.cond,
		set+" REMOVE #sweep_shard, #sweep_at, #lease_owner, #lease_until, #wait_until, #callback, #callback_step",
		values, classify)
}

// Retry implements query.Admin.
func (s *Store) Retry(ctx context.Context, id string, extraAttempts int) (lease.Task, error) {
	if err := query.CheckRetry(id, extraAttempts); err != nil {
		return lease.Task{}, err
	}
	if noSuchID(id) {
		return lease.Task{}, query.ClassifyRetry(id, nil, extraAttempts)
	}
	now := s.now()
	return s.update(ctx, "retry", id,
		"attribute_exists(#id) AND attribute_exists(#kind) AND #status IN (:failed, :cancelled) AND #attempt <= :most",
		"SET #status = :pending, #run_at = :now, #max_attempts = #attempt + :extra, "+
			"#updated_at = :now, #cancel_requested = :false, #sweep_shard = :sweep_shard, #sweep_at = :sweep_at "+
			"REMOVE #result, #finished_at, #expires_at",
		withCall(map[string]types.AttributeValue{
			":failed":      avS(string(lease.StatusFailed)),
			":cancelled":   avS(string(lease.StatusCancelled)),
			":most":        avN(int64(lease.MaxAttemptsLimit - extraAttempts)),
			":pending":     avS(string(lease.StatusPending)),
			":now":         avMillis(now),
			":extra":       avN(int64(extraAttempts)),
			":false":       &types.AttributeValueMemberBOOL{Value: false},
			":sweep_shard": avS(lease.Shard(id)),
			":sweep_at":    avMillis(now.Add(s.opts.DispatchGrace)),
		}),
		func(old *lease.Task) error { return query.ClassifyRetry(id, old, extraAttempts) })
}

// listPos is a position in one shard of the listing index: the key of the
// last entry taken or passed over and, inside a batch listing entry of
// which only the first N tasks are, N (0: the whole entry).
type listPos struct {
	CreatedAt int64  `json:"c"`
	ID        string `json:"i"`
	N         int    `json:"n,omitempty"`
}

// dynamoCursor is List's cursor: where each shard of the listing index
// stands. A shard in neither map is read from its newest task.
type dynamoCursor struct {
	Status lease.Status `json:"s"`
	Kind   string       `json:"k,omitempty"`
	Queue  string       `json:"q,omitempty"`
	// Scan: the listing by kind or queue reads by_created and filters,
	// its own index being missing or still backfilling (ListBy).
	Scan  bool               `json:"x,omitempty"`
	After map[string]listPos `json:"a,omitempty"`
	Done  []string           `json:"d,omitempty"`
}

func (c dynamoCursor) encode() (string, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

func decodeDynamoCursor(s string, status lease.Status, by query.ListBy) (dynamoCursor, error) {
	bad := fmt.Errorf("list %s: %w", status, query.ErrBadCursor)
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return dynamoCursor{}, bad
	}
	var c dynamoCursor
	if err := json.Unmarshal(raw, &c); err != nil || c.Status != status || c.Kind != by.Kind || c.Queue != by.Queue || len(c.After)+len(c.Done) == 0 {
		return dynamoCursor{}, bad
	}
	known := map[string]bool{}
	for _, sh := range lease.Shards() {
		known[sh] = true
	}
	for sh, p := range c.After {
		entry := query.IsListingID(p.ID)
		if !known[sh] || p.ID == "" || !entry && noSuchID(p.ID) || p.N < 0 || p.N > 0 && !entry {
			return dynamoCursor{}, bad
		}
	}
	for _, sh := range c.Done {
		if _, dup := c.After[sh]; !known[sh] || dup {
			return dynamoCursor{}, bad
		}
	}
	return c, nil
}

// listEntry is one task of the listing index (an entry of its own, or one
// of a batch listing entry's) and, when the task has the listed status, its
// list view.
type listEntry struct {
	pos  listPos
	task *lease.Task // nil: another status, or gone since the index was read
}

// listStream is one shard of the listing index, read newest first a chunk
// at a time.
type listStream struct {
	shard  string
	key    map[string]types.AttributeValue // ExclusiveStartKey of the next chunk; nil: from the newest
	resume *listPos                        // a batch entry the cursor stopped inside, read before the next chunk
	buf    []listEntry                     // read, not yet taken
	ended  bool                            // no chunk after buf
	after  *listPos                        // last entry taken or passed over, or where the cursor started
}

// skip passes over the entries at the head of st that are not listed.
func (st *listStream) skip() {
	for len(st.buf) > 0 && st.buf[0].task == nil {
		p := st.buf[0].pos
		st.after = &p
		st.buf = st.buf[1:]
	}
}

// List implements query.Admin. The listing index is sharded by id and keyed on
// creation time only, so a page merges the shards: each is read newest
// first a chunk at a time, a batch listing entry (lease/listing.go) standing for
// its tasks, listed at its time; each task's item is read for its
// status; the newest matching head is taken until the page is full, and
// the cursor records each shard's position. Every task of the status is
// listed once across the pages, none missing, as long as it keeps its
// status meanwhile. Entries of other statuses cost their item reads: a rare
// status costs a read of every task newer than its tasks
// (docs/performance.md).
func (s *Store) List(ctx context.Context, status lease.Status, limit int, cursor string) ([]lease.Task, string, error) {
	return s.ListBy(ctx, status, query.ListBy{}, limit, cursor)
}

// ListBy implements query.Admin: List over the listing of by's kind
// (by_kind; a queue also given is filtered) or of by's named queue
// (by_queue), which hold only the entries of that kind or queue, sharded
// and ordered as by_created is, so the same merge reads only them. On a
// table whose index for by is missing or still backfilling (an upgrade
// under way), a listing started then reads by_created and keeps by's
// tasks, and its cursor keeps to that.
func (s *Store) ListBy(ctx context.Context, status lease.Status, by query.ListBy, limit int, cursor string) ([]lease.Task, string, error) {
	if err := query.CheckListBy(status, by, limit); err != nil {
		return nil, "", err
	}
	cur := dynamoCursor{Status: status, Kind: by.Kind, Queue: by.Queue}
	if cursor != "" {
		var err error
		if cur, err = decodeDynamoCursor(cursor, status, by); err != nil {
			return nil, "", err
		}
	}
	ix := indexFor(by)
	if cur.Scan {
		ix = indexFor(query.ListBy{})
	}
	// A chunk is a fair share of the page with room to spare; a shard that
	// holds more of the newest tasks is read again as needed.
	chunk := min(limit, max(2*((limit+lease.ShardCount-1)/lease.ShardCount), 10))
	start := time.Now()
	streams, err := s.firstChunks(ctx, status, by, ix, cur, chunk)
	if err != nil && cursor == "" && ix.prefix != "" && indexUnready(err, ix.name) {
		// A table not upgraded yet, or whose new index still backfills
		// (docs/operations.md, Upgrade): the listing by status, filtered,
		// as before the listings by kind existed; the cursor keeps to it.
		ix, cur.Scan = indexFor(query.ListBy{}), true
		start = time.Now()
		streams, err = s.firstChunks(ctx, status, by, ix, cur, chunk)
	}
	if err != nil {
		return nil, "", err
	}
	// Each later chunk is read only if ctx's stop-by time and deadline
	// leave time for it (query.Stopping, at the pace of the slowest read so
	// far); otherwise the page ends short, with the cursor of where each
	// shard stands.
	slowest := time.Since(start)

	var page []lease.Task
	stopped := false
	for len(page) < limit && !stopped {
		var next *listStream
		for _, st := range streams {
			for st.skip(); len(st.buf) == 0 && !st.ended; st.skip() {
				if query.Stopping(ctx, slowest) {
					stopped = true
					break
				}
				at := time.Now()
				if err := s.readChunk(ctx, status, by, ix, st, chunk); err != nil {
					return nil, "", err
				}
				slowest = max(slowest, time.Since(at))
			}
			if stopped {
				break
			}
			if len(st.buf) == 0 {
				continue
			}
			if next == nil || st.buf[0].pos.CreatedAt > next.buf[0].pos.CreatedAt {
				next = st
			}
		}
		if next == nil || stopped {
			break
		}
		e := next.buf[0]
		next.buf = next.buf[1:]
		next.after = &e.pos
		page = append(page, *e.task)
	}

	out := dynamoCursor{Status: status, Kind: by.Kind, Queue: by.Queue, Scan: cur.Scan, After: map[string]listPos{}, Done: slices.Clone(cur.Done)}
	for _, st := range streams {
		st.skip()
		switch {
		case len(st.buf) == 0 && st.ended:
			out.Done = append(out.Done, st.shard)
		case st.after != nil:
			out.After[st.shard] = *st.after
		}
	}
	if len(out.Done) == lease.ShardCount {
		return page, "", nil
	}
	next, err := out.encode()
	if err != nil {
		return nil, "", fmt.Errorf("list %s: encode cursor: %w", status, err)
	}
	return page, next, nil
}

// firstChunks sets up a stream per shard of ix that cur has not finished,
// from where cur stands, and reads the first chunk of each at once.
func (s *Store) firstChunks(ctx context.Context, status lease.Status, by query.ListBy, ix listIndex, cur dynamoCursor, chunk int) ([]*listStream, error) {
	var streams []*listStream
	for _, shard := range lease.Shards() {
		if slices.Contains(cur.Done, shard) {
			continue
		}
		st := &listStream{shard: shard}
		if p, ok := cur.After[shard]; ok {
			st.after = &p
			st.key = map[string]types.AttributeValue{
				AttrID:        avS(p.ID),
				AttrListShard: avS(shard),
				ix.sortAttr:   ix.sortValue(p.CreatedAt),
			}
			if p.N > 0 {
				st.resume = &p
			}
		}
		streams = append(streams, st)
	}
	errs := make([]error, len(streams))
	var wg sync.WaitGroup
	for i, st := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.readChunk(ctx, status, by, ix, st, chunk)
		}()
	}
	wg.Wait()
	return streams, errors.Join(errs...)
}

// readChunk reads into st's buffer the rest of the batch entry its cursor
// stopped inside, if any, else up to n more entries of its shard; and the
// items of their tasks.
func (s *Store) readChunk(ctx context.Context, status lease.Status, by query.ListBy, ix listIndex, st *listStream, n int) error {
	if st.resume != nil {
		entries, err := s.expand(ctx, status, by, []listPos{*st.resume})
		if err != nil {
			return err
		}
		st.resume = nil
		st.buf = append(st.buf, entries...)
		return nil
	}
	cond, values := ix.keyCondition(st.shard)
	out, err := s.query(ctx, &dynamodb.QueryInput{
		TableName:                 &s.table,
		IndexName:                 aws.String(ix.name),
		KeyConditionExpression:    &cond,
		ExpressionAttributeNames:  namesIn(cond),
		ExpressionAttributeValues: values,
		ScanIndexForward:          aws.Bool(false),
		ExclusiveStartKey:         st.key,
		Limit:                     aws.Int32(int32(n)),
	})
	if err != nil {
		return backendErr("list", string(status), err)
	}
	positions := make([]listPos, len(out.Items))
	for i, item := range out.Items {
		d := decoder{item: item}
		positions[i] = listPos{CreatedAt: ix.positionAt(&d), ID: d.str(AttrID)}
		if d.err != nil || positions[i].ID == "" {
			return backendErr("list", string(status), fmt.Errorf("listing index entry %q: %v", positions[i].ID, d.err))
		}
	}
	entries, err := s.expand(ctx, status, by, positions)
	if err != nil {
		return err
	}
	st.buf = append(st.buf, entries...)
	st.key = out.LastEvaluatedKey
	st.ended = len(out.LastEvaluatedKey) == 0
	return nil
}

// expand turns positions of the listing index into the tasks they list, in
// order: a task's own entry is that task; a batch listing entry is the
// tasks it names that it still lists (their ListedIn is this entry), from
// its N-th on. Each task's item is read for its status; the last task of a
// batch entry, or a placeholder when none is left, has N = 0.
func (s *Store) expand(ctx context.Context, status lease.Status, by query.ListBy, positions []listPos) ([]listEntry, error) {
	var batchIDs []string
	for _, p := range positions {
		if query.IsListingID(p.ID) {
			batchIDs = append(batchIDs, p.ID)
		}
	}
	named := map[string][]string{}
	if len(batchIDs) > 0 {
		proj := "#id, #list_ids"
		err := s.batchGetItems(ctx, "list", batchIDs, types.KeysAndAttributes{ProjectionExpression: &proj, ExpressionAttributeNames: namesIn(proj)},
			func(item map[string]types.AttributeValue) error {
				d := decoder{item: item}
				id, ids := d.str(AttrID), d.strList(attrListIDs)
				named[id] = ids
				return d.err
			})
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", status, err)
		}
	}
	var ids []string
	for _, p := range positions {
		if query.IsListingID(p.ID) {
			ids = append(ids, named[p.ID]...)
		} else {
			ids = append(ids, p.ID)
		}
	}
	views, err := s.getViews(ctx, ids)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", status, err)
	}
	var entries []listEntry
	for _, p := range positions {
		if !query.IsListingID(p.ID) {
			e := listEntry{pos: p}
			if t, ok := views[p.ID]; ok && t.Status == status && by.Matches(t) {
				e.task = &t
			}
			entries = append(entries, e)
			continue
		}
		// An id an entry names twice (a token delivered again to the
		// worker that keeps the entry open) is listed at its first place.
		names := named[p.ID]
		if p.N >= len(names) {
			entries = append(entries, listEntry{pos: listPos{CreatedAt: p.CreatedAt, ID: p.ID}})
			continue
		}
		for k := p.N; k < len(names); k++ {
			e := listEntry{pos: listPos{CreatedAt: p.CreatedAt, ID: p.ID, N: k + 1}}
			if k+1 == len(names) {
				e.pos.N = 0
			}
			if t, ok := views[names[k]]; ok && t.ListedIn == p.ID && t.Status == status && by.Matches(t) && !slices.Contains(names[:k], names[k]) {
				t.ListedIn = ""
				e.task = &t
			}
			entries = append(entries, e)
		}
	}
	return entries, nil
}

// maxBatchGet is the most keys one BatchGetItem takes.
const maxBatchGet = 100

// batchGetBackoff is the first wait before unprocessed keys are asked for
// again; it doubles each round.
const batchGetBackoff = 25 * time.Millisecond

// maxBatchGetRounds bounds the calls spent on one batch's unprocessed keys.
const maxBatchGetRounds = 8

// getViews reads the list views of the tasks ids with BatchGetItem,
// eventually consistent (half the read units of Get), only the attributes
// ListView keeps and those that say how the task is listed. A task that is
// gone is left out. The views keep ListedIn.
func (s *Store) getViews(ctx context.Context, ids []string) (map[string]lease.Task, error) {
	proj := "#id, #kind, #status, #attempt, #max_attempts, #run_at, #error, #created_at, #updated_at, #finished_at, #queue, #list_shard, #listed_in"
	keys := slices.DeleteFunc(slices.Compact(slices.Sorted(slices.Values(ids))), noSuchID)
	s.listReads.Add(int64(len(keys)))
	views := make(map[string]lease.Task, len(keys))
	err := s.batchGetEach(ctx, "list", keys, types.KeysAndAttributes{ProjectionExpression: &proj, ExpressionAttributeNames: namesIn(proj)},
		func(t lease.Task) {
			v := query.ListView(t)
			v.ListedIn = t.ListedIn
			views[t.ID] = v
		})
	if err != nil {
		return nil, err
	}
	return views, nil
}

// GetMany implements query.ManyGetter: BatchGetItem, strongly consistent, up to
// maxBatchGet keys a call.
func (s *Store) GetMany(ctx context.Context, ids []string) ([]lease.Task, error) {
	// BatchGetItem refuses a repeated key; the order of keys is free.
	keys := slices.DeleteFunc(slices.Compact(slices.Sorted(slices.Values(ids))), noSuchID)
	found := make(map[string]lease.Task, len(keys))
	err := s.batchGetEach(ctx, "get many", keys, types.KeysAndAttributes{ConsistentRead: aws.Bool(true)},
		func(t lease.Task) { found[t.ID] = t })
	if err != nil {
		return nil, err
	}
	return query.ManyInOrder(ids, found), nil
}

// batchGetEach is batchGetItems that decodes each item as a task.
func (s *Store) batchGetEach(ctx context.Context, op string, ids []string, in types.KeysAndAttributes, each func(lease.Task)) error {
	return s.batchGetItems(ctx, op, ids, in, func(item map[string]types.AttributeValue) error {
		t, err := TaskFromItem(item)
		if err != nil {
			return err
		}
		each(t)
		return nil
	})
}

// batchGetItems reads the items of ids (distinct ids; in as the template
// of each request: projection, consistency) with BatchGetItem, maxBatchGet
// keys a call, asking again for unprocessed keys with backoff, and calls
// each with every item found.
func (s *Store) batchGetItems(ctx context.Context, op string, ids []string, in types.KeysAndAttributes, each func(map[string]types.AttributeValue) error) error {
	for lo := 0; lo < len(ids); lo += maxBatchGet {
		keys := make([]map[string]types.AttributeValue, 0, maxBatchGet)
		for _, id := range ids[lo:min(lo+maxBatchGet, len(ids))] {
			keys = append(keys, map[string]types.AttributeValue{AttrID: avS(id)})
		}
		page := in
		page.Keys = keys
		req := map[string]types.KeysAndAttributes{s.table: page}
		for round := 0; len(req) > 0; round++ {
			if round == maxBatchGetRounds {
				return backendErr(op, "", errors.New("unprocessed keys after every retry"))
			}
			out, err := s.batchGet(ctx, req)
			if err != nil {
				return backendErr(op, "", err)
			}
			for _, item := range out.Responses[s.table] {
				if err := each(item); err != nil {
					return backendErr(op, "", err)
				}
			}
			req = out.UnprocessedKeys
			if len(req) > 0 {
				// Throttled keys: back off before asking again, as
				// DynamoDB advises for unprocessed keys.
				select {
				case <-ctx.Done():
					return backendErr(op, "", context.Cause(ctx))
				case <-time.After(batchGetBackoff << round):
				}
			}
		}
	}
	return nil
}

func (s *Store) batchGet(ctx context.Context, req map[string]types.KeysAndAttributes) (*dynamodb.BatchGetItemOutput, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.CallTimeout)
	defer cancel()
	return s.client.BatchGetItem(ctx, &dynamodb.BatchGetItemInput{RequestItems: req})
}

var _ query.Lister = (*Store)(nil)

// WriteListing implements query.Lister: one PutItem of an item that the listing
// indexes key like a task (list_shard, created_at; kind_at and queue_at
// for by's kind and named queue) and that holds the ids.
// It expires ListingSlack after the store's retention would expire a task
// created with it.
func (s *Store) WriteListing(ctx context.Context, by query.ListBy, ids []string) (lease.Listing, error) {
	if err := query.CheckListing(ids, query.MinListing); err != nil {
		return lease.Listing{}, fmt.Errorf("write listing: %w", err)
	}
	if s.opts.Unlisted {
		return lease.Listing{}, nil
	}
	l := lease.Listing{ID: query.NewListingID(), At: s.now()}
	item := map[string]types.AttributeValue{
		AttrID:        avS(l.ID),
		AttrListShard: avS(lease.Shard(l.ID)),
		attrCreatedAt: avMillis(l.At),
		attrListIDs:   avList(ids),
	}
	entryKeys(item, by, l.At.UnixMilli())
	if s.opts.Retention > 0 {
		item[AttrExpiresAt] = avN(l.At.Add(s.opts.Retention + query.ListingSlack).Unix())
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.CallTimeout)
	defer cancel()
	// A fresh id: no condition is needed, and a retry after a lost answer
	// writes the same item again.
	if _, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: &s.table, Item: item}); err != nil {
		return lease.Listing{}, backendErr("write listing", "", err)
	}
	return l, nil
}

// AppendListing implements query.Lister: one UpdateItem of the entry's ids,
// whose keys it leaves alone, so no index write.
func (s *Store) AppendListing(ctx context.Context, l lease.Listing, ids []string) error {
	if err := query.CheckAppend(l, ids); err != nil {
		return fmt.Errorf("append listing: %w", err)
	}
	if s.opts.Unlisted {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.CallTimeout)
	defer cancel()
	cond := "attribute_exists(#id) AND size(#list_ids) <= :most"
	upd := "SET #list_ids = list_append(#list_ids, :ids)"
	_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           &s.table,
		Key:                                 map[string]types.AttributeValue{AttrID: avS(l.ID)},
		ConditionExpression:                 &cond,
		UpdateExpression:                    &upd,
		ExpressionAttributeNames:            namesIn(cond, upd),
		ExpressionAttributeValues:           map[string]types.AttributeValue{":most": avN(int64(query.MaxListingIDs - len(ids))), ":ids": avList(ids)},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf) && len(ccf.Item) == 0:
		return fmt.Errorf("append listing %s: %w", l.ID, lease.ErrNotFound)
	case errors.As(err, &ccf):
		return fmt.Errorf("append listing %s: %w", l.ID, query.ErrListingFull)
	case err != nil:
		return backendErr("append listing", l.ID, err)
	}
	return nil
}
