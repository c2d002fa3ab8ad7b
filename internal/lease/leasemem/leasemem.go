// Package leasemem is an in-memory lease.Store for fast unit tests. It passes
// the same conformance suite (package leasetest) as the DynamoDB store: each
// method applies the same condition and the same update under one lock, and
// times are kept at the millisecond precision the table stores.
package leasemem

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/mapstate"
	"github.com/leasehold/leasehold/internal/lease/query"
	"github.com/leasehold/leasehold/internal/lease/rules"
)

// Store is an in-memory lease.Store. The zero value is not usable; call New.
type Store struct {
	opts lease.Options

	mu     sync.Mutex
	tasks  map[string]*lease.Task
	tokens map[string]string // id: the create token of the create that stored it
	hidden map[string]bool   // ids created without a listing entry (Options.Unlisted)
	// derived are the ids of derived tasks (NewTask.Derived) created
	// without a listing entry: listed only while they have ended otherwise
	// than SUCCEEDED, and for good from then (a retry keeps it listed).
	derived map[string]bool
	// listings are the batch listing entries written (WriteListing). A
	// task whose ListedIn is set is listed only if its entry names it, at
	// the entry's time.
	listings map[string]*listing
	// rates are the rate windows (TakeStart), by id.
	rates map[string]*rateWindow
	// slots are the slot sets (AcquireSlot): key, holder, its time.
	slots map[string]map[string]time.Time
	// redrives are the redrive counts (TakeRedrive), by id.
	redrives map[string]*redriveCount
	// tail holds the operations of spilled histories, by lease.StepKey.
	tail map[string]lease.Step
	// groups and pages are the sliding maps' items (mapstate.Store).
	groups map[string]mapstate.Group
	pages  map[string][][]byte
	// inboxes are the workflows' inboxes and events (inbox.Store).
	inboxes map[string]*memInbox
	calls   Calls
	// listReads counts the tasks the listings read (ListReads).
	listReads int64
}

// listing is a batch listing entry: when it was opened, its ids, and the
// kind and queue of its tasks.
type listing struct {
	at  time.Time
	ids []string
	by  query.ListBy
}

// Calls counts the store's operations, for tests that assert how many a path
// makes.
type Calls struct {
	Writes int
	Reads  int
	// ManyReads counts the GetMany calls (each also counts in Reads), and
	// ManyMostIDs is the most ids one of them took: what the DynamoDB
	// store reads in BatchGetItem calls of up to 100 keys.
	ManyReads, ManyMostIDs int
}

var _ lease.Store = (*Store)(nil)

// New returns an empty store.
func New(opts lease.Options) *Store {
	return &Store{opts: opts.WithDefaults(), tasks: map[string]*lease.Task{}, tokens: map[string]string{}, hidden: map[string]bool{}, derived: map[string]bool{}, listings: map[string]*listing{}, rates: map[string]*rateWindow{}, slots: map[string]map[string]time.Time{}, redrives: map[string]*redriveCount{},
		groups: map[string]mapstate.Group{}, pages: map[string][][]byte{}, inboxes: map[string]*memInbox{}}
}

// Calls returns the operation counts so far.
func (s *Store) Calls() Calls {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// ListReads is how many tasks List and ListBy have read: those in the
// listing they walk (all of it, or one kind's or queue's), up to the
// cursor, of any status.
func (s *Store) ListReads() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.listReads
}

// Options returns the store's options, defaults applied.
func (s *Store) Options() lease.Options { return s.opts }

func ms(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return time.UnixMilli(t.UnixMilli()).UTC()
}

func (s *Store) now() time.Time { return ms(s.opts.Clock.Now()) }

func clone(t *lease.Task) lease.Task {
	c := *t
	c.Payload = bytes.Clone(t.Payload)
	c.Result = bytes.Clone(t.Result)
	c.History = slices.Clone(t.History)
	c.Waiters = slices.Clone(t.Waiters)
	c.WaitFor = slices.Clone(t.WaitFor)
	c.Ended = slices.Clone(t.Ended)
	c.Steps = slices.Clone(t.Steps)
	c.Then = lease.CloneThen(t.Then)
	c.Metadata = maps.Clone(t.Metadata)
	return c
}

func (s *Store) begin(ctx context.Context, write bool) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%w: %w", lease.ErrBackend, err)
	}
	if write {
		s.calls.Writes++
	} else {
		s.calls.Reads++
	}
	return nil
}

func (s *Store) newRecord(t lease.NewTask, now time.Time) *lease.Task {
	runAt := ms(t.RunAt)
	if runAt.IsZero() {
		runAt = now
	}
	rec := &lease.Task{
		ID:          t.ID,
		Kind:        t.Kind,
		Payload:     bytes.Clone(t.Payload),
		Status:      lease.StatusPending,
		MaxAttempts: t.MaxAttempts,
		RunAt:       runAt,
		CreatedAt:   now,
		UpdatedAt:   now,
		Queue:       t.Queue,
	}
	if t.Listing.ID != "" && !t.Derived() && !s.opts.Unlisted {
		rec.ListedIn = t.Listing.ID
	}
	rules.ApplyWaits(rec, t)
	return rec
}

// Create implements lease.Store.
func (s *Store) Create(ctx context.Context, t lease.NewTask) (lease.Task, error) {
	if err := t.Validate(); err != nil {
		return lease.Task{}, fmt.Errorf("create %s: %w", t.ID, err)
	}
	return s.create(ctx, t, func(rec *lease.Task, _ time.Time) {
		switch {
		case rec.Status == lease.StatusWaiting: // the ends of its dependencies wake it
			lease.ArmRegistrationCheck(rec, s.opts.DispatchGrace)
		case t.Carried: // its message brings it back; no sweep entry
		case !t.DispatchAt.IsZero():
			rec.DispatchAt = ms(t.DispatchAt)
		default:
			rec.DispatchAt = rec.RunAt.Add(s.opts.DispatchGrace)
		}
	})
}

// CreateClaimed implements lease.Store.
func (s *Store) CreateClaimed(ctx context.Context, t lease.NewTask, owner string) (lease.Task, error) {
	if err := t.Validate(); err != nil {
		return lease.Task{}, fmt.Errorf("create %s: %w", t.ID, err)
	}
	if owner == "" {
		return lease.Task{}, fmt.Errorf("create %s: %w: owner is required", t.ID, lease.ErrInvalid)
	}
	if len(t.After) > 0 {
		return lease.Task{}, fmt.Errorf("create %s: %w: a task with dependencies is created WAITING, not claimed", t.ID, lease.ErrInvalid)
	}
	return s.create(ctx, t, func(rec *lease.Task, now time.Time) {
		s.hold(rec, owner, now)
		rec.Attempt, rec.Fence = 1, 1
	})
}

// create stores the record of t, which fill completes (now is the call's
// time), unless its id is taken (taken).
func (s *Store) create(ctx context.Context, t lease.NewTask, fill func(rec *lease.Task, now time.Time)) (lease.Task, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin(ctx, true); err != nil {
		return lease.Task{}, err
	}
	now := s.now()
	rec := s.newRecord(t, now)
	fill(rec, now)
	if old, ok := s.tasks[t.ID]; ok {
		return s.taken(*rec, old, t)
	}
	s.store(rec, t)
	return clone(rec), nil
}

// CreateFailed implements lease.Store.
func (s *Store) CreateFailed(ctx context.Context, t lease.NewTask, reason string) (lease.Task, error) {
	if err := t.Validate(); err != nil {
		return lease.Task{}, fmt.Errorf("create %s: %w", t.ID, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin(ctx, true); err != nil {
		return lease.Task{}, err
	}
	if old, ok := s.tasks[t.ID]; ok {
		return clone(old), fmt.Errorf("create %s: %w", t.ID, lease.ErrAlreadyExists)
	}
	now := s.now()
	rec := s.newRecord(t, now)
	rec.Status = lease.StatusFailed
	rec.Error = lease.Truncate(reason, lease.MaxErrorBytes)
	rec.FinishedAt = now
	if s.opts.Retention > 0 {
		rec.ExpiresAt = time.Unix(now.Add(s.opts.Retention).Unix(), 0).UTC()
	}
	s.store(rec, t)
	return clone(rec), nil
}

// taken answers a create of want (the record it would store, of t) whose id
// is taken by old: old is this very task when it was stored under t's own
// create token, else a duplicate or a conflict.
func (s *Store) taken(want lease.Task, old *lease.Task, t lease.NewTask) (lease.Task, error) {
	if t.CreateToken != "" && s.tokens[t.ID] == t.CreateToken {
		return rules.SameCreate(want, clone(old), t)
	}
	return clone(old), lease.CheckDuplicate(*old, t)
}

// store keeps rec, created by t.
func (s *Store) store(rec *lease.Task, t lease.NewTask) {
	s.tasks[t.ID] = rec
	if s.opts.Unlisted {
		s.hidden[t.ID] = true
	} else if t.Derived() && !rec.Status.Terminal() {
		s.derived[t.ID] = true
	}
	if t.CreateToken != "" {
		s.tokens[t.ID] = t.CreateToken
	}
}

// hold puts rec under a fresh lease for owner.
func (s *Store) hold(rec *lease.Task, owner string, now time.Time) {
	rec.Status = lease.StatusRunning
	rec.LeaseOwner = owner
	rec.LeaseUntil = now.Add(s.opts.LeaseDuration)
	// The sweep entry is left as it is: a task claimed from a message has
	// that message to bring it back, and an entry already in the index
	// keeps its time (the sweep re-arms it while the lease is live, see
	// MarkDispatched).
	rec.UpdatedAt = now
}

// Claim implements lease.Store.
func (s *Store) Claim(ctx context.Context, id, owner string) (lease.Task, error) {
	if owner == "" {
		return lease.Task{}, fmt.Errorf("claim %s: %w: owner is required", id, lease.ErrInvalid)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin(ctx, true); err != nil {
		return lease.Task{}, err
	}
	now := s.now()
	rec, old := s.find(id, func(t *lease.Task) bool { return rules.Claimable(*t, now, s.opts.Skew) })
	if rec == nil {
		return lease.Task{}, rules.ClassifyClaim(id, old, now, s.opts.Skew)
	}
	s.hold(rec, owner, now)
	rec.Attempt++
	rec.Fence++
	return clone(rec), nil
}

func (s *Store) held(op string, l lease.Lease) (*lease.Task, error) {
	rec, old := s.find(l.TaskID, func(t *lease.Task) bool { return rules.Holds(*t, l) })
	if rec == nil {
		return nil, rules.ClassifyHeld(op, l, old)
	}
	return rec, nil
}

// find returns the record of id when there is one and fits says the call
// may write it. Otherwise it returns nil, and a copy of the record as it
// is (nil when there is none) for the call's classified error.
func (s *Store) find(id string, fits func(rec *lease.Task) bool) (rec, old *lease.Task) {
	rec, ok := s.tasks[id]
	switch {
	case !ok:
		return nil, nil
	case !fits(rec):
		c := clone(rec)
		return nil, &c
	}
	return rec, nil
}

// value is *t, or no task when t is nil.
func value(t *lease.Task) lease.Task {
	if t == nil {
		return lease.Task{}
	}
	return *t
}

// underLease is every write of a lease holder: it checks l and the write's
// own arguments (args, already checked: nil when they are valid), then,
// under the store's lock, applies write to the task l holds and returns a
// copy of it. A lease that no longer holds gives the classified error.
func (s *Store) underLease(ctx context.Context, op string, l lease.Lease, args error, write func(rec *lease.Task, now time.Time)) (lease.Task, error) {
	if err := l.Validate(); err != nil {
		return lease.Task{}, fmt.Errorf("%s: %w", op, err)
	}
	if args != nil {
		return lease.Task{}, fmt.Errorf("%s %s: %w", op, l.TaskID, args)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin(ctx, true); err != nil {
		return lease.Task{}, err
	}
	rec, err := s.held(op, l)
	if err != nil {
		return lease.Task{}, err
	}
	write(rec, s.now())
	return clone(rec), nil
}

// Renew implements lease.Store.
func (s *Store) Renew(ctx context.Context, l lease.Lease) (lease.Task, error) {
	return s.underLease(ctx, "renew", l, nil, func(rec *lease.Task, now time.Time) {
		rec.LeaseUntil = now.Add(s.opts.LeaseDuration)
		rec.UpdatedAt = now
	})
}

func (s *Store) end(rec *lease.Task, status lease.Status, errMsg string, now time.Time) {
	var dropped int
	rec.History, dropped = rules.AppendHistory(rec.History, lease.Attempt{
		Attempt: rec.Attempt, Fence: rec.Fence, Status: status, Error: errMsg, At: now,
	})
	rec.HistoryDropped += dropped
	rec.Status = status
	rec.LeaseOwner = ""
	rec.LeaseUntil = time.Time{}
	rec.UpdatedAt = now
	if status != lease.StatusSucceeded {
		rec.ListedIn = "" // listed on its own from its first retry, wait or failure
	}
	if status.Terminal() {
		rec.FinishedAt = now
		rec.DispatchAt = time.Time{}
		if s.opts.Retention > 0 {
			rec.ExpiresAt = time.Unix(now.Add(s.opts.Retention).Unix(), 0).UTC()
		}
	}
}

// Finish implements lease.Store.
func (s *Store) Finish(ctx context.Context, l lease.Lease, result []byte) (lease.Task, error) {
	return s.underLease(ctx, "finish", l, lease.CheckResult(result), func(rec *lease.Task, now time.Time) {
		s.end(rec, lease.StatusSucceeded, "", now)
		rec.Result = bytes.Clone(result)
		rec.Error = ""
		rec.UnknownKindSince = time.Time{}
	})
}

// Release implements lease.Store.
func (s *Store) Release(ctx context.Context, l lease.Lease, r lease.Release) (lease.Task, error) {
	return s.underLease(ctx, "release", l, r.Validate(), func(rec *lease.Task, now time.Time) {
		msg := lease.Truncate(r.Error, lease.MaxErrorBytes)
		s.end(rec, r.Status, msg, now)
		rec.Error = msg
		if r.Status == lease.StatusPending {
			rec.RunAt = ms(r.RunAt)
			rec.DispatchAt = ms(r.DispatchAt)
			if rec.DispatchAt.IsZero() {
				rec.DispatchAt = rec.RunAt.Add(s.opts.DispatchGrace)
			}
			switch {
			case r.UnknownKind:
				rec.Attempt--
				if rec.UnknownKindSince.IsZero() {
					rec.UnknownKindSince = now
				}
			case r.RefundAttempt:
				rec.Attempt--
				rec.Snoozes++
			}
		}
		if !r.UnknownKind {
			rec.UnknownKindSince = time.Time{}
		}
		if r.Continue != nil {
			rec.Payload, rec.Steps, rec.Spilled, rec.Run, rec.Attempt = bytes.Clone(r.Continue), nil, false, rec.Run+1, 0
			rec.Wait, rec.WaitFor, rec.Ended, rec.WaitUntil, rec.WaitNote = "", nil, nil, time.Time{}, ""
			rec.CallbackHash, rec.CallbackStep = "", ""
		}
	})
}

// ArchiveRun keeps a workflow's ended run (continue-as-new), as the
// DynamoDB store's does.
func (s *Store) ArchiveRun(ctx context.Context, l lease.Lease, run lease.Task) (string, error) {
	if err := l.Validate(); err != nil {
		return "", fmt.Errorf("archive run: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin(ctx, true); err != nil {
		return "", err
	}
	now := s.now()
	a := rules.ArchivedRun(clone(&run), now)
	a.Fence = l.Fence
	if s.opts.Retention > 0 {
		a.ExpiresAt = now.Add(s.opts.Retention)
	}
	if old, ok := s.tasks[a.ID]; ok {
		if old.Parent != run.ID || old.Status != lease.StatusSucceeded {
			return "", fmt.Errorf("archive run %s: %w: the id is taken by another task", a.ID, lease.ErrConflict)
		}
		if old.Fence > l.Fence {
			return a.ID, nil
		}
	}
	s.tasks[a.ID] = &a
	s.hidden[a.ID] = true
	return a.ID, nil
}

// Get implements lease.Store.
func (s *Store) Get(ctx context.Context, id string) (lease.Task, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin(ctx, false); err != nil {
		return lease.Task{}, err
	}
	rec, ok := s.tasks[id]
	if !ok {
		return lease.Task{}, fmt.Errorf("get %s: %w", id, lease.ErrNotFound)
	}
	return clone(rec), nil
}

// GetWithToken reads the task id, as Get does, and the create token it was
// stored under (NewTask.CreateToken; empty when its create gave none, as
// this store draws none of its own).
func (s *Store) GetWithToken(ctx context.Context, id string) (lease.Task, string, error) {
	t, err := s.Get(ctx, id)
	if err != nil {
		return lease.Task{}, "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return t, s.tokens[id], nil
}

// GetMany implements query.ManyGetter.
func (s *Store) GetMany(ctx context.Context, ids []string) ([]lease.Task, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin(ctx, false); err != nil {
		return nil, err
	}
	s.calls.ManyReads++
	s.calls.ManyMostIDs = max(s.calls.ManyMostIDs, len(ids))
	found := make(map[string]lease.Task, len(ids))
	for _, id := range ids {
		if rec, ok := s.tasks[id]; ok {
			found[id] = clone(rec)
		}
	}
	return query.ManyInOrder(ids, found), nil
}

// Expire removes task id if it has finished, as DynamoDB's TTL removes a
// finished task once its retention has passed, and says whether it did.
// It stands in for that passing of time in tests and benchmarks; the store
// never expires a task by itself.
func (s *Store) Expire(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.tasks[id]
	if !ok || !rec.Status.Terminal() {
		return false
	}
	delete(s.tasks, id)
	delete(s.tokens, id)
	delete(s.hidden, id)
	delete(s.derived, id)
	return true
}
