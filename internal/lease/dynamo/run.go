package dynamo

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/rules"
)

// ArchiveRun keeps a workflow's ended run (continue-as-new; the
// executor's runArchiver): one PutItem of the archived
// run (a write unit per KB of it), which replaces an archive written under
// an earlier fence (a continue retried by the task's next holder) and
// leaves one written under a later fence. The archive has no listing,
// sweep or lease attributes, so no index holds it.
func (s *Store) ArchiveRun(ctx context.Context, l lease.Lease, run lease.Task) (string, error) {
	if err := l.Validate(); err != nil {
		return "", fmt.Errorf("archive run: %w", err)
	}
	now := s.now()
	a := rules.ArchivedRun(run, now)
	a.Fence = l.Fence
	if s.opts.Retention > 0 {
		a.ExpiresAt = now.Add(s.opts.Retention)
	}
	item := itemOf(a)
	delete(item, AttrListShard)
	wrote, had, err := s.putUnless(ctx, item, " OR (#parent = :parent AND #status = :succeeded AND #fence <= :fence)",
		map[string]types.AttributeValue{":parent": avS(run.ID), ":succeeded": avS(string(lease.StatusSucceeded)), ":fence": avN(l.Fence)})
	switch {
	case err != nil:
		return "", backendErr("archive run", a.ID, err)
	case wrote:
		return a.ID, nil
	}
	old, derr := decodeOld(had)
	if derr == nil && old != nil && old.Parent == run.ID && old.Status == lease.StatusSucceeded {
		return a.ID, nil // archived under a later fence: that one stands
	}
	return "", fmt.Errorf("archive run %s: %w: the id is taken by another task", a.ID, lease.ErrConflict)
}

// putUnless writes item, under the call timeout, where no item has its id
// or (when more is given, " OR ..." with its values) where the item there
// meets more, and reports whether it wrote. When the condition fails it
// returns the item that stood there (nil if it went in between) and no
// error, so that a first-writer-wins write learns what was written first
// at no extra read.
func (s *Store) putUnless(ctx context.Context, item map[string]types.AttributeValue, more string, values map[string]types.AttributeValue) (wrote bool, had map[string]types.AttributeValue, err error) {
	cond := "attribute_not_exists(#id)" + more
	ctx, cancel := context.WithTimeout(ctx, s.opts.CallTimeout)
	defer cancel()
	_, err = s.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                           &s.table,
		Item:                                item,
		ConditionExpression:                 &cond,
		ExpressionAttributeNames:            namesIn(cond),
		ExpressionAttributeValues:           values,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case err == nil:
		return true, nil, nil
	case errors.As(err, &ccf):
		return false, ccf.Item, nil
	}
	return false, nil, err
}
