package dynamo

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/rules"
)

// CreateCancelled implements lease.Store: one conditional put
// (attribute_not_exists), like any create.
func (s *Store) CreateCancelled(ctx context.Context, id, parent, reason string) (lease.Task, error) {
	t, n, err := rules.Placeholder(id, parent, reason, s.now(), s.opts.Retention)
	if err != nil {
		return lease.Task{}, err
	}
	got, err := s.put(ctx, t, n)
	if errors.Is(err, lease.ErrConflict) {
		// Any stored task keeps the id: report it, as taken.
		err = fmt.Errorf("cancel child %s: %w", lease.DisplayID(id), lease.ErrAlreadyExists)
	}
	return got, err
}

// EndWaiting implements lease.Store.
func (s *Store) EndWaiting(ctx context.Context, prev lease.Task, status lease.Status, reason string) (lease.Task, error) {
	if err := rules.CheckEndWaiting(prev, status); err != nil {
		return lease.Task{}, err
	}
	now := s.now()
	reason = lease.Truncate(reason, lease.MaxErrorBytes)
	values := map[string]types.AttributeValue{
		":waiting": avS(string(lease.StatusWaiting)),
		":attempt": avN(int64(prev.Attempt)),
		":fence":   avN(prev.Fence),
		":status":  avS(string(status)),
		":now":     avMillis(now),
		":error":   avS(reason),
	}
	// The condition pins attempt and fence: DynamoDB cannot copy the
	// stored attempt into the history entry. prev was read whole, so its
	// history is known.
	e := &ending{cond: "#status = :waiting AND #attempt = :attempt AND #fence = :fence", values: values}
	e.appendHistory(prev.History, true, lease.Attempt{Attempt: prev.Attempt, Fence: prev.Fence, Status: status, Error: reason, At: now})
	set := "SET #status = :status, #updated_at = :now, #finished_at = :now, #error = :error, " + strings.Join(e.set, ", ") + s.listFailed(prev.ID, status, values)
	if s.opts.Retention > 0 {
		set += ", #expires_at = :expires_at"
		values[":expires_at"] = avN(now.Add(s.opts.Retention).Unix())
	}
	return s.update(ctx, "end waiting", prev.ID, e.cond,
		set+" REMOVE #sweep_shard, #sweep_at, #lease_owner, #lease_until, #wait_until, #callback, #callback_step",
		values, func(old *lease.Task) error { return rules.ClassifyEndWaiting(prev, old) })
}
