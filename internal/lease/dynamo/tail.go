package dynamo

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/rules"
)

// A history's spilled tail (docs/workflows.md, "History beyond the item"):
// the task item's spill_from freezes its inline steps at that count, and
// each later operation is an item of its own keyed lease.StepKey, holding
// only these attributes and the TTL: no index attribute, so neither index
// sees it.
const (
	// attrSpillFrom is Task.Spilled: the number of inline steps, set once.
	attrSpillFrom = "spill_from"
	stepName      = "name"
	stepOp        = "op"
	stepResult    = "result"
)

// errFrozen: a checkpoint into the inline steps of a task whose history
// has spilled.
var errFrozen = fmt.Errorf("%w: the task's inline steps are frozen: its history goes on in step items", lease.ErrInvalid)

// Spill implements lease.Store: one UpdateItem under the lease, on the
// count of inline steps.
func (s *Store) Spill(ctx context.Context, l lease.Lease, n int) (lease.Task, error) {
	if err := l.Validate(); err != nil {
		return lease.Task{}, fmt.Errorf("spill: %w", err)
	}
	values := heldValues(l)
	values[":n"] = avN(int64(n))
	values[":now"] = avMillis(s.now())
	head := "size(#steps) = :n"
	if n == 0 {
		head = "attribute_not_exists(#steps)"
	}
	var seen lease.Task
	t, err := s.update(ctx, "spill", l.TaskID,
		heldCond+" AND ((attribute_not_exists(#spill_from) AND "+head+") OR #spill_from = :n)",
		"SET #spill_from = :n, #updated_at = :now",
		values,
		func(old *lease.Task) error {
			if old != nil && rules.Holds(*old, l) {
				seen = *old
				return fmt.Errorf("spill %s: %w: the head has %d steps, not %d", l.TaskID, lease.ErrInvalid, len(old.Steps), n)
			}
			return rules.ClassifyHeld("spill", l, old)
		})
	if err != nil {
		return seen, err
	}
	return t, nil
}

// PutStep implements lease.Store: one PutItem on the position's key, only
// where none is; a failed condition returns the item there, so the
// recorded operation costs no read.
func (s *Store) PutStep(ctx context.Context, id string, pos int, st lease.Step) (lease.Step, error) {
	if err := lease.CheckTail(id, pos, 1); err != nil {
		return lease.Step{}, fmt.Errorf("put step: %w", err)
	}
	item := map[string]types.AttributeValue{
		AttrID:     avS(lease.StepKey(id, pos)),
		stepName:   avS(st.Name),
		stepResult: avS(string(st.Result)),
	}
	if st.Op != "" {
		item[stepOp] = avS(st.Op)
	}
	if s.opts.Retention > 0 {
		item[AttrExpiresAt] = avN(s.now().Add(s.opts.Retention + lease.SpilledStepHorizon).Unix())
	}
	wrote, had, err := s.putUnless(ctx, item, "", nil)
	switch {
	case err != nil:
		return lease.Step{}, backendErr("put step", id, err)
	case wrote:
		return st, nil
	}
	// The first writer's, or this call's own whose response was lost.
	first, err := stepFromItem(had)
	if err != nil {
		return lease.Step{}, backendErr("put step", id, err)
	}
	return first, nil
}

// ReadSteps implements lease.Store: one BatchGetItem, strongly consistent
// (a later run must not miss an operation an earlier one recorded).
func (s *Store) ReadSteps(ctx context.Context, id string, from, n int) ([]lease.Step, error) {
	if err := lease.CheckTail(id, from, n); err != nil {
		return nil, fmt.Errorf("read steps: %w", err)
	}
	keys := make([]string, n)
	for i := range keys {
		keys[i] = lease.StepKey(id, from+i)
	}
	found := make(map[string]lease.Step, n)
	err := s.batchGetItems(ctx, "read steps", keys, types.KeysAndAttributes{ConsistentRead: aws.Bool(true)},
		func(item map[string]types.AttributeValue) error {
			st, err := stepFromItem(item)
			if err != nil {
				return err
			}
			key, _ := item[AttrID].(*types.AttributeValueMemberS)
			if key != nil {
				found[key.Value] = st
			}
			return nil
		})
	if err != nil {
		return nil, err
	}
	var out []lease.Step
	for _, k := range keys {
		st, ok := found[k]
		if !ok {
			break
		}
		out = append(out, st)
	}
	return out, nil
}

// stepFromItem decodes a tail item.
func stepFromItem(item map[string]types.AttributeValue) (lease.Step, error) {
	d := decoder{item: item}
	st := lease.Step{Name: d.str(stepName), Op: d.str(stepOp), Result: []byte(d.str(stepResult))}
	if d.err != nil {
		return lease.Step{}, d.err
	}
	if st.Name == "" {
		return lease.Step{}, errors.New("a step item without a name")
	}
	return st, nil
}
