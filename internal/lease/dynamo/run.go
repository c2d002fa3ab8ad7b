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
	cond := "attribute_not_exists(#id) OR (#parent = :parent AND #status = :succeeded AND #fence <= :fence)"
	values := map[string]types.AttributeValue{":parent": avS(run.ID), ":succeeded": avS(string(lease.StatusSucceeded)), ":fence": avN(l.Fence)}
	ctx, cancel := context.WithTimeout(ctx, s.opts.CallTimeout)
	defer cancel()
	_, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{
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
		return a.ID, nil
	case !errors.As(err, &ccf):
		return "", backendErr("archive run", a.ID, err)
	}
	old, derr := decodeOld(ccf.Item)
	if derr == nil && old != nil && old.Parent == run.ID && old.Status == lease.StatusSucceeded {
		return a.ID, nil // archived under a later fence: that one stands
	}
	return "", fmt.Errorf("archive run %s: %w: the id is taken by another task", a.ID, lease.ErrConflict)
}
