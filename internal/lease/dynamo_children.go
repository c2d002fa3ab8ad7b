package lease

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// CreateCancelled implements Store: one conditional put
// (attribute_not_exists), like any create.
func (s *DynamoStore) CreateCancelled(ctx context.Context, id, parent, reason string) (Task, error) {
	t, n, err := Placeholder(id, parent, reason, s.now(), s.opts.Retention)
	if err != nil {
		return Task{}, err
	}
	got, err := s.put(ctx, t, n)
	if errors.Is(err, ErrConflict) {
		// Any stored task keeps the id: report it, as taken.
		err = fmt.Errorf("cancel child %s: %w", DisplayID(id), ErrAlreadyExists)
	}
	return got, err
}

// Placeholder is the record CreateCancelled stores, and the submission its
// put stands for (both stores build it here).
func Placeholder(id, parent, reason string, now time.Time, retention time.Duration) (Task, NewTask, error) {
	switch {
	case CheckID(id) != nil:
		return Task{}, NewTask{}, fmt.Errorf("cancel child: %w", CheckID(id))
	case parent != "" && CheckID(parent) != nil:
		return Task{}, NewTask{}, fmt.Errorf("cancel child %s: %w: parent: %w", DisplayID(id), ErrInvalid, CheckID(parent))
	case id == parent:
		return Task{}, NewTask{}, fmt.Errorf("cancel child %s: %w: a task is not its own child", DisplayID(id), ErrInvalid)
	}
	n := NewTask{ID: id, Parent: parent}
	t := Task{ID: id, Status: StatusCancelled, RunAt: now, CreatedAt: now, UpdatedAt: now, FinishedAt: now,
		Error: Truncate(reason, MaxErrorBytes), CancelRequested: true}
	ApplyWaits(&t, n)
	if retention > 0 {
		t.ExpiresAt = time.Unix(now.Add(retention).Unix(), 0).UTC()
	}
	return t, n, nil
}

// EndWaiting implements Store.
func (s *DynamoStore) EndWaiting(ctx context.Context, prev Task, status Status, reason string) (Task, error) {
	if err := CheckEndWaiting(prev, status); err != nil {
		return Task{}, err
	}
	now := s.now()
	reason = Truncate(reason, MaxErrorBytes)
	values := map[string]types.AttributeValue{
		":waiting": avS(string(StatusWaiting)),
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
	e.appendHistory(prev.History, true, Attempt{Attempt: prev.Attempt, Fence: prev.Fence, Status: status, Error: reason, At: now})
	set := "SET #status = :status, #updated_at = :now, #finished_at = :now, #error = :error, " + strings.Join(e.set, ", ") + s.listFailed(prev.ID, status, values)
	if s.opts.Retention > 0 {
		set += ", #expires_at = :expires_at"
		values[":expires_at"] = avN(now.Add(s.opts.Retention).Unix())
	}
	return s.update(ctx, "end waiting", prev.ID, e.cond,
		set+" REMOVE #sweep_shard, #sweep_at, #lease_owner, #lease_until, #wait_until, #callback, #callback_step",
		values, func(old *Task) error { return ClassifyEndWaiting(prev, old) })
}
