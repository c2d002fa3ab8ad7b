package dispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/query"
)

// SweepStats counts what one sweep did.
type SweepStats struct {
	// Due is how many index entries were found due.
	Due int `json:"due"`
	// Dispatched is how many tokens were sent.
	Dispatched int `json:"dispatched"`
	// Raced is how many entries moved before this sweep could take them:
	// another sweep dispatched them, or a worker claimed or finished them.
	Raced int `json:"raced"`
	// Failed is how many entries could not be marked or whose token could
	// not be sent. They stay due, or become due again after the grace, so a
	// later sweep retries them.
	Failed int `json:"failed"`
	// Redriven, DeadLettersLeft and DeadLetterQueuesUnread count the
	// sweep's dead-letter recovery (RedriveDeadLetters).
	Redriven               int `json:"redriven"`
	DeadLettersLeft        int `json:"dead_letters_left"`
	DeadLetterQueuesUnread int `json:"dead_letter_queues_unread"`
}

func (s *SweepStats) add(o SweepStats) {
	s.Due += o.Due
	s.Dispatched += o.Dispatched
	s.Raced += o.Raced
	s.Failed += o.Failed
	s.Redriven += o.Redriven
	s.DeadLettersLeft += o.DeadLettersLeft
	s.DeadLetterQueuesUnread += o.DeadLetterQueuesUnread
}

// ErrSweep wraps the error of a sweep that left work behind.
var ErrSweep = errors.New("sweep incomplete")

// budgetMargin is kept free before the invocation deadline: no new page is
// started inside it.
const budgetMargin = 5 * time.Second

// maxPagesPerShard bounds one shard's share of one sweep; what is left is
// taken by the next sweep.
const maxPagesPerShard = 50

// Sweep dispatches every task whose sweep-index time is at or before now:
// tasks delayed beyond SQS's cap, backoff retries beyond it, and tasks whose
// message was lost (PENDING past start plus grace, or RUNNING past lease
// expiry plus skew plus grace). Each of the lease.ShardCount shards is
// swept, SweepConcurrency at once. An entry is first moved to now plus the
// grace with a write conditional on the time seen, so of two sweeps that saw
// it only one sends a token; should that token be lost too, the entry is due
// again after the grace.
func (d *Dispatcher) Sweep(ctx context.Context, now time.Time) (SweepStats, error) {
	if d.store == nil {
		return SweepStats{}, fmt.Errorf("%w: this dispatcher has no store to sweep", ErrConfig)
	}
	shards := lease.Shards()
	var (
		mu    sync.Mutex
		total SweepStats
		errs  []error
	)
	started := each(ctx, len(shards), d.cfg.SweepConcurrency, func(i int) {
		st, err := d.sweepShard(ctx, shards[i], now)
		mu.Lock()
		defer mu.Unlock()
		total.add(st)
		if err != nil {
			errs = append(errs, fmt.Errorf("shard %s: %w", shards[i], err))
		}
	})
	if started < len(shards) {
		errs = append(errs, fmt.Errorf("%d shards not swept: %w", len(shards)-started, context.Cause(ctx)))
	}
	if d.budgetLeft(ctx) {
		rs, err := d.RedriveDeadLetters(ctx)
		total.Redriven, total.DeadLettersLeft, total.DeadLetterQueuesUnread = rs.Redriven, rs.Left, rs.Unread
		if err != nil {
			errs = append(errs, fmt.Errorf("dead letters: %w", err))
		}
	}
	level := slog.LevelInfo
	if total.Due == 0 && total.Redriven == 0 && len(errs) == 0 {
		level = slog.LevelDebug // an idle sweep, every period in every worker process
	}
	d.cfg.Logger.Log(ctx, level, "sweep done", "due", total.Due, "dispatched", total.Dispatched, "raced", total.Raced, "failed", total.Failed,
		"redriven", total.Redriven, "dead_letters_left", total.DeadLettersLeft, "dead_letter_queues_unread", total.DeadLetterQueuesUnread)
	if len(errs) > 0 || total.Failed > 0 {
		return total, fmt.Errorf("%w: %d entries failed: %w", ErrSweep, total.Failed, errors.Join(errs...))
	}
	return total, nil
}

// sweepShard takes one shard's due entries page by page, until a page is
// short, brings nothing new, or the budget runs out.
func (d *Dispatcher) sweepShard(ctx context.Context, shard string, now time.Time) (SweepStats, error) {
	var st SweepStats
	next := now.Add(d.cfg.DispatchGrace)
	seen := map[string]bool{}
	for range maxPagesPerShard {
		if err := context.Cause(ctx); err != nil {
			return st, err
		}
		if !d.budgetLeft(ctx) {
			d.cfg.Logger.WarnContext(ctx, "sweep stopped near the invocation deadline; the next sweep continues", "shard", shard)
			return st, nil
		}
		due, err := d.store.Due(ctx, shard, now, d.cfg.SweepPageSize)
		if err != nil {
			return st, err
		}
		// The index is eventually consistent: an entry this sweep moved
		// may still show in the next page. It is not counted twice.
		var fresh []query.DueTask
		for _, e := range due {
			if !seen[e.ID] {
				seen[e.ID] = true
				fresh = append(fresh, e)
			}
		}
		st.add(d.dispatchDue(ctx, fresh, next))
		if len(due) < d.cfg.SweepPageSize || len(fresh) == 0 {
			return st, nil
		}
	}
	return st, nil
}

// dispatchDue marks each entry dispatched and sends tokens for those this
// sweep won.
func (d *Dispatcher) dispatchDue(ctx context.Context, due []query.DueTask, next time.Time) SweepStats {
	st := SweepStats{Due: len(due)}
	outcome := make([]error, len(due))
	queue := make([]string, len(due))
	started := each(ctx, len(due), d.cfg.Concurrency, func(i int) {
		queue[i], outcome[i] = d.store.MarkDispatched(ctx, due[i].ID, due[i].DispatchAt, next)
	})
	var won []ref
	for i, err := range outcome {
		switch {
		case i >= started:
			st.Failed++
		case errors.Is(err, query.ErrDispatchRaced):
			st.Raced++
		case err != nil:
			st.Failed++
			d.cfg.Logger.WarnContext(ctx, "could not mark task dispatched", "task_id", due[i].ID, "error", err)
		default:
			won = append(won, ref{id: due[i].ID, queue: queue[i]})
		}
	}
	for j, err := range d.sendRefs(ctx, won) {
		if err != nil {
			// The entry now waits until next; a later sweep retries it.
			st.Failed++
			continue
		}
		st.Dispatched++
		d.cfg.Logger.DebugContext(ctx, "task dispatched by sweep", "task_id", won[j].id)
	}
	return st
}

// budgetLeft reports whether there is time for another page before the
// invocation's deadline.
func (d *Dispatcher) budgetLeft(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	return !ok || time.Until(dl) > budgetMargin
}
