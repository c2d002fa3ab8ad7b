package leasemem

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/query"
	"github.com/leasehold/leasehold/internal/lease/rules"
)

var _ query.Admin = (*Store)(nil)

// Due implements query.Admin.
func (s *Store) Due(ctx context.Context, shard string, now time.Time, limit int) ([]query.DueTask, error) {
	if err := query.CheckDue(shard, limit); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin(ctx, false); err != nil {
		return nil, err
	}
	now = ms(now)
	var due []query.DueTask
	for id, rec := range s.tasks {
		if !rec.DispatchAt.IsZero() && !rec.DispatchAt.After(now) && lease.Shard(id) == shard {
			due = append(due, query.DueTask{ID: id, DispatchAt: rec.DispatchAt})
		}
	}
	slices.SortFunc(due, func(a, b query.DueTask) int {
		return cmp.Or(a.DispatchAt.Compare(b.DispatchAt), cmp.Compare(a.ID, b.ID))
	})
	return due[:min(len(due), limit)], nil
}

// MarkDispatched implements query.Admin.
func (s *Store) MarkDispatched(ctx context.Context, id string, seen, next time.Time) (string, error) {
	if err := query.CheckMarkDispatched(id, seen, next); err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin(ctx, true); err != nil {
		return "", err
	}
	rec, ok := s.tasks[id]
	if !ok || rec.DispatchAt.IsZero() || !rec.DispatchAt.Equal(ms(seen)) {
		return "", fmt.Errorf("mark dispatched %s: %w", id, query.ErrDispatchRaced)
	}
	if rules.HolderWaits(*rec, s.now(), s.opts.Skew, s.opts.DispatchGrace) {
		rec.DispatchAt = rec.LeaseUntil.Add(s.opts.Skew + s.opts.DispatchGrace)
		return "", fmt.Errorf("mark dispatched %s: %w: its lease is live", id, query.ErrDispatchRaced)
	}
	rec.DispatchAt = ms(next)
	return rec.Queue, nil
}

// RequestCancel implements query.Admin.
func (s *Store) RequestCancel(ctx context.Context, id string) (lease.Task, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin(ctx, true); err != nil {
		return lease.Task{}, err
	}
	rec, ok := s.tasks[id]
	if !ok {
		return lease.Task{}, fmt.Errorf("request cancel %s: %w", id, lease.ErrNotFound)
	}
	now := s.now()
	switch rec.Status {
	case lease.StatusPending, lease.StatusWaiting:
		// Not running anywhere: cancel it outright. A token still in the
		// queue finds it finished and is acknowledged.
		s.end(rec, lease.StatusCancelled, query.CancelledWhilePending, now)
		rec.Error = query.CancelledWhilePending
		rec.CancelRequested = true
		rec.WaitUntil, rec.CallbackHash, rec.CallbackStep = time.Time{}, "", ""
	case lease.StatusRunning:
		rec.CancelRequested = true
		rec.UpdatedAt = now
	default:
		return lease.Task{}, &lease.FinishedError{TaskID: id, Status: rec.Status}
	}
	return clone(rec), nil
}

// Retry implements query.Admin.
func (s *Store) Retry(ctx context.Context, id string, extraAttempts int) (lease.Task, error) {
	if err := query.CheckRetry(id, extraAttempts); err != nil {
		return lease.Task{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin(ctx, true); err != nil {
		return lease.Task{}, err
	}
	rec, old := s.find(id, func(t *lease.Task) bool {
		return (t.Status == lease.StatusFailed || t.Status == lease.StatusCancelled) && !lease.IsPlaceholder(*t) && t.Attempt+extraAttempts <= lease.MaxAttemptsLimit
	})
	if rec == nil {
		return lease.Task{}, query.ClassifyRetry(id, old, extraAttempts)
	}
	now := s.now()
	delete(s.derived, id) // listed since it failed or was cancelled
	rec.Status = lease.StatusPending
	rec.RunAt = now
	rec.MaxAttempts = rec.Attempt + extraAttempts
	rec.Result = nil
	rec.FinishedAt = time.Time{}
	rec.ExpiresAt = time.Time{}
	rec.CancelRequested = false
	rec.UpdatedAt = now
	rec.DispatchAt = now.Add(s.opts.DispatchGrace)
	return clone(rec), nil
}

// listCursor is the position after the last task of a page, in the order
// List walks: created_at descending, then id ascending.
type listCursor struct {
	Status    lease.Status `json:"s"`
	Kind      string       `json:"k,omitempty"`
	Queue     string       `json:"q,omitempty"`
	CreatedAt int64        `json:"c"`
	ID        string       `json:"i"`
}

// List implements query.Admin.
func (s *Store) List(ctx context.Context, status lease.Status, limit int, cursor string) ([]lease.Task, string, error) {
	return s.ListBy(ctx, status, query.ListBy{}, limit, cursor)
}

// ListBy implements query.Admin. It keeps the DynamoDB store's indexes in
// mind: a task is in the listing of its kind, and of its queue if it has
// a name, when it is listed at all; a batch listing entry stands for its
// tasks in the listings of the kind and queue it was written for. The
// tasks in the listing it reads count in ListReads, whatever their status,
// as the DynamoDB store reads each one's item.
func (s *Store) ListBy(ctx context.Context, status lease.Status, by query.ListBy, limit int, cursor string) ([]lease.Task, string, error) {
	if err := query.CheckListBy(status, by, limit); err != nil {
		return nil, "", err
	}
	var after *listCursor
	if cursor != "" {
		c, err := decodeCursor(cursor)
		if err != nil || c.Status != status || c.Kind != by.Kind || c.Queue != by.Queue {
			return nil, "", fmt.Errorf("list %s: %w", status, query.ErrBadCursor)
		}
		after = &c
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin(ctx, false); err != nil {
		return nil, "", err
	}
	type listed struct {
		at   int64 // the listing time: its creation, or its batch entry's
		task lease.Task
	}
	// indexed: the listing by reads holds a task listed on its own, or an
	// entry written for kind and queue.
	indexed := func(kind, queue string) bool {
		switch {
		case by.Kind != "":
			return kind == by.Kind
		case by.Queue != "":
			return queue == by.Queue
		}
		return true
	}
	var all []listed
	for _, rec := range s.tasks {
		if s.hidden[rec.ID] || s.derived[rec.ID] && !rec.Status.Unsuccessful() {
			continue
		}
		at := rec.CreatedAt.UnixMilli()
		if rec.ListedIn != "" {
			l := s.listings[rec.ListedIn]
			if l == nil || !slices.Contains(l.ids, rec.ID) || !indexed(l.by.Kind, l.by.Queue) {
				continue
			}
			at = l.at.UnixMilli()
		} else if !indexed(rec.Kind, rec.Queue) {
			continue
		}
		if after != nil && (at > after.CreatedAt || at == after.CreatedAt && rec.ID <= after.ID) {
			continue
		}
		s.listReads++
		if rec.Status != status || !by.Matches(*rec) {
			continue
		}
		all = append(all, listed{at, query.ListView(*rec)})
	}
	slices.SortFunc(all, func(a, b listed) int {
		return cmp.Or(cmp.Compare(b.at, a.at), cmp.Compare(a.task.ID, b.task.ID))
	})
	page := make([]lease.Task, 0, min(limit, len(all)))
	for _, l := range all[:min(limit, len(all))] {
		page = append(page, l.task)
	}
	if len(all) <= limit {
		return page, "", nil
	}
	last := all[limit-1]
	next, err := json.Marshal(listCursor{Status: status, Kind: by.Kind, Queue: by.Queue, CreatedAt: last.at, ID: last.task.ID})
	if err != nil {
		return nil, "", fmt.Errorf("list %s: encode cursor: %w", status, err)
	}
	return page, base64.RawURLEncoding.EncodeToString(next), nil
}

func decodeCursor(cursor string) (listCursor, error) {
	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil {
		return listCursor{}, err
	}
	var c listCursor
	if err := json.Unmarshal(raw, &c); err != nil {
		return listCursor{}, err
	}
	if c.ID == "" {
		return listCursor{}, fmt.Errorf("cursor has no position")
	}
	return c, nil
}

// Live returns the ids of up to limit tasks that are PENDING or RUNNING,
// listed or not (PENDING first, each oldest first): for the test kit,
// which must see every task time can still move on, derived ones too.
func (s *Store) Live(limit int) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for _, st := range []lease.Status{lease.StatusPending, lease.StatusRunning} {
		var recs []*lease.Task
		for _, rec := range s.tasks {
			if rec.Status == st {
				recs = append(recs, rec)
			}
		}
		slices.SortFunc(recs, func(a, b *lease.Task) int {
			return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), strings.Compare(a.ID, b.ID))
		})
		for _, rec := range recs {
			ids = append(ids, rec.ID)
		}
	}
	return ids[:min(len(ids), limit)]
}

var _ query.Lister = (*Store)(nil)

// WriteListing implements query.Lister.
func (s *Store) WriteListing(ctx context.Context, by query.ListBy, ids []string) (lease.Listing, error) {
	if err := query.CheckListing(ids, query.MinListing); err != nil {
		return lease.Listing{}, fmt.Errorf("write listing: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.opts.Unlisted {
		return lease.Listing{}, nil
	}
	if err := s.begin(ctx, true); err != nil {
		return lease.Listing{}, err
	}
	l := lease.Listing{ID: query.NewListingID(), At: s.now()}
	s.listings[l.ID] = &listing{at: l.At, ids: slices.Clone(ids), by: by}
	return l, nil
}

// AppendListing implements query.Lister.
func (s *Store) AppendListing(ctx context.Context, l lease.Listing, ids []string) error {
	if err := query.CheckAppend(l, ids); err != nil {
		return fmt.Errorf("append listing: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.opts.Unlisted {
		return nil
	}
	if err := s.begin(ctx, true); err != nil {
		return err
	}
	e := s.listings[l.ID]
	switch {
	case e == nil:
		return fmt.Errorf("append listing %s: %w", l.ID, lease.ErrNotFound)
	case len(e.ids)+len(ids) > query.MaxListingIDs:
		return fmt.Errorf("append listing %s: %w", l.ID, query.ErrListingFull)
	}
	e.ids = append(e.ids, ids...)
	return nil
}
