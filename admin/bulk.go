package admin

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/query"
)

// A bulk action changes many tasks at once: the ones a Selection picks from
// the listing. `leasehold cancel|retry --status ...` and the inspector's
// bulk actions share it.

// Selection picks tasks from the listing: by status (newest first within
// each), kind, queue and age. Zero fields select everything.
type Selection struct {
	Statuses []leasehold.Status
	Kind     string
	// Queue selects the tasks of the queue of this name; "-" those of
	// the default work queue (no queue name).
	Queue string
	// Prefix selects the tasks whose id starts with it.
	Prefix string
	// Since selects tasks created at most this long before now.
	Since time.Duration
	// StopBy, when set, is when SelectPage should have answered: it ends
	// short, with a Next, rather than make a listing call it expects to
	// end past it (see leasehold.ListOptions.StopBy).
	StopBy time.Time
}

// Tasks is the part of a *leasehold.Client the verbs on tasks use
// (Config.Tasks).
type Tasks interface {
	List(ctx context.Context, o leasehold.ListOptions) (leasehold.Page, error)
	Cancel(ctx context.Context, id string) (leasehold.TaskInfo, error)
	Retry(ctx context.Context, id string, extraAttempts int) (leasehold.TaskInfo, error)
}

var _ Tasks = (*leasehold.Client)(nil)

// CancelStatuses and RetryStatuses are the statuses each bulk action takes,
// and its default selection.
var (
	CancelStatuses = []leasehold.Status{leasehold.StatusPending, leasehold.StatusRunning, leasehold.StatusWaiting}
	RetryStatuses  = []leasehold.Status{leasehold.StatusFailed, leasehold.StatusCancelled}
)

// errSelection: a selection that the action cannot take. It matches
// leasehold.ErrInvalid, which callers test.
var errSelection = matching{errors.New("invalid selection"), leasehold.ErrInvalid}

// Check returns s with its statuses defaulted to allowed, or why it is not
// one the action takes (an error matching leasehold.ErrInvalid).
func (s Selection) Check(allowed []leasehold.Status) (Selection, error) {
	if s.Since < 0 {
		return s, fmt.Errorf("%w: since cannot be negative", errSelection)
	}
	if len(s.Statuses) == 0 {
		s.Statuses = slices.Clone(allowed)
		return s, nil
	}
	for _, st := range s.Statuses {
		if !slices.Contains(allowed, st) {
			return s, fmt.Errorf("%w: status %s: want one of %s", errSelection, st, statusNames(allowed))
		}
	}
	return s, nil
}

// statusNames joins statuses with commas.
func statusNames(ss []leasehold.Status) string {
	names := make([]string, len(ss))
	for i, s := range ss {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}

// Select lists the ids of the tasks s picks, as of now. The listing is
// newest first within a status, so Since stops a status's pages at the
// first older task. limit, when positive, stops at that many ids and
// reports whether more were left. It reads to the end: with a deadline on
// ctx, SelectPage answers in parts instead.
func (a *Admin) Select(ctx context.Context, s Selection, now time.Time, limit int) (ids []string, more bool, err error) {
	for cursor := ""; ; {
		got, err := a.SelectPage(ctx, s, cursor, now, limit-len(ids))
		for _, t := range got.Tasks {
			ids = append(ids, t.ID)
		}
		if err != nil || got.More || got.Next == "" {
			return ids, got.More, err
		}
		cursor = got.Next
		if limit > 0 && len(ids) == limit {
			// Full, with the rest not read: whether more match is unknown
			// until one more does.
			rest, err := a.SelectPage(ctx, s, cursor, now, 1)
			return ids, len(rest.Tasks) > 0 || rest.Next != "", err
		}
	}
}

// selectPageSize is the listing page a time-bound SelectPage reads at
// a time: small pages keep each call's first read short (the listing reads
// a chunk of every shard at once).
const selectPageSize = 50

// SelectPage is Select from cursor ("" from the start; a Next of an
// earlier one with the same selection otherwise): the tasks it picks, More
// when more than limit matched, and Scanned. It stops short with a Next when
// s.StopBy (or ctx's deadline) leaves no time for another listing call, as
// long as the slowest so far: the inspector's dry run answers within its
// budget and offers to go on. With an error, it returns what it read before it and,
// in Next, where the failed call started.
func (a *Admin) SelectPage(ctx context.Context, s Selection, cursor string, now time.Time, limit int) (FilteredPage, error) {
	var out FilteredPage
	i, inner, err := decodeSelectCursor(cursor, len(s.Statuses))
	if err != nil {
		return out, err
	}
	cutoff := time.Time{}
	if s.Since > 0 {
		cutoff = now.Add(-s.Since)
	}
	size := query.MaxListLimit
	if _, ok := ctx.Deadline(); ok || !s.StopBy.IsZero() {
		size = selectPageSize
	}
	stopCtx := query.WithStopBy(ctx, s.StopBy)
	match := Filter{Kind: s.Kind, Queue: s.Queue, Prefix: s.Prefix}
	var slowest time.Duration
	for ; i < len(s.Statuses); i, inner = i+1, "" {
	pages:
		for {
			if slowest > 0 && query.Stopping(stopCtx, slowest) {
				out.Next = encodeSelectCursor(i, inner)
				return out, nil
			}
			at := time.Now()
			o := leasehold.ListOptions{Status: s.Statuses[i], Limit: size, Cursor: inner, StopBy: s.StopBy}
			match.narrow(&o)
			page, err := a.tasks.List(ctx, o)
			if err != nil {
				out.Next = encodeSelectCursor(i, inner)
				return out, err
			}
			slowest = max(slowest, time.Since(at))
			for _, t := range page.Tasks {
				out.Scanned++
				if !cutoff.IsZero() && t.CreatedAt.Before(cutoff) {
					break pages
				}
				if match.Matches(t) {
					if limit > 0 && len(out.Tasks) == limit {
						out.More = true
						return out, nil
					}
					out.Tasks = append(out.Tasks, t)
				}
			}
			if page.Next == "" {
				break
			}
			inner = page.Next
		}
	}
	return out, nil
}

// encodeSelectCursor is a SelectPage's Next: the index of the status the
// reading stopped in and the listing's cursor within it.
func encodeSelectCursor(status int, inner string) string {
	return strconv.Itoa(status) + "." + inner
}

func decodeSelectCursor(c string, statuses int) (int, string, error) {
	if c == "" {
		return 0, "", nil
	}
	n, inner, ok := strings.Cut(c, ".")
	i, err := strconv.Atoi(n)
	if !ok || err != nil || i < 0 || i >= statuses {
		return 0, "", fmt.Errorf("%w: a cursor not issued for this selection", errSelection)
	}
	return i, inner, nil
}

// queueMatches reports whether a task of queue q matches the selection's
// queue sel ("" any, "-" the default work queue).
func queueMatches(sel, q string) bool {
	switch sel {
	case "":
		return true
	case "-":
		return q == ""
	}
	return q == sel
}

// Action is one bulk action on one task: the word for its outcome
// ("cancelled", "already ended", ...), and an error for a failure (whose
// word is "failed").
type Action func(ctx context.Context, id string) (string, error)

// CancelOne is bulk cancel's action: a.CancelOne is an Action.
func (a *Admin) CancelOne(ctx context.Context, id string) (string, error) {
	info, err := a.tasks.Cancel(ctx, id)
	switch {
	case errors.Is(err, leasehold.ErrFinished):
		return "already ended", nil
	case err != nil:
		return "failed", err
	case info.Status == leasehold.StatusCancelled:
		return "cancelled", nil
	case info.Status == leasehold.StatusRunning:
		return "cancellation requested (running)", nil
	case !info.Status.Terminal():
		// Other writers kept moving it (docs/states.md, "What a cancel
		// guarantees"): it is cancelled when a worker next takes it.
		return "cancellation requested (" + strings.ToLower(string(info.Status)) + ")", nil
	}
	// Its holder finished before it saw the cancellation.
	return "already ended", nil
}

// RetryOne is bulk retry's action, each task getting attempts more.
func (a *Admin) RetryOne(attempts int) Action {
	return func(ctx context.Context, id string) (string, error) {
		_, err := a.tasks.Retry(ctx, id, attempts)
		switch {
		case errors.Is(err, leasehold.ErrNotRetryable):
			return "no longer retryable", nil
		case err != nil:
			return "failed", err
		}
		return "retried", nil
	}
}

// maxBulkErrors bounds the errors a BulkReport keeps.
const maxBulkErrors = 20

// BulkReport is what a bulk action did.
type BulkReport struct {
	// Selected is how many tasks it was given; Counts how many ended with
	// each outcome word; Done how many it acted on (less than Selected if
	// ctx ended first).
	Selected, Done int
	Counts         map[string]int
	// Errors are the first failures, each naming its task.
	Errors []string
}

// Failed is how many tasks the action failed on.
func (r BulkReport) Failed() int { return r.Counts["failed"] }

// Summary is one line: each outcome and its count, in order of the words.
func (r BulkReport) Summary() string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(r.Counts)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, r.Counts[k]))
	}
	if len(parts) == 0 {
		return "no task selected"
	}
	return strings.Join(parts, ", ")
}

// Bulk runs act on each of ids, concurrency at a time, and reports what it
// did; progress, when not nil, hears the count done after each task (from
// the goroutines doing them, one call at a time). It stops feeding tasks
// when ctx ends and returns once every started task is done.
func (a *Admin) Bulk(ctx context.Context, ids []string, concurrency int, act Action, progress func(done int)) BulkReport {
	r := BulkReport{Selected: len(ids), Counts: map[string]int{}}
	var mu sync.Mutex
	work := make(chan string)
	var wg sync.WaitGroup
	for range min(max(concurrency, 1), max(len(ids), 1)) {
		wg.Go(func() {
			for id := range work {
				what, err := act(ctx, id)
				mu.Lock()
				r.Counts[what]++
				r.Done++
				if err != nil && len(r.Errors) < maxBulkErrors {
					r.Errors = append(r.Errors, fmt.Sprintf("%s: %v", lease.DisplayID(id), err))
				}
				if progress != nil {
					progress(r.Done)
				}
				mu.Unlock()
			}
		})
	}
feed:
	for _, id := range ids {
		select {
		case work <- id:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	return r
}
