package dynamo

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/leasehold/leasehold/internal/lease/limiter"
)

// TakeRedrive implements limiter.RedriveCounter: one UpdateItem that adds one to
// the count only while it is below limit (1 write unit, also when the
// condition fails).
func (s *Store) TakeRedrive(ctx context.Context, key string, limit int) (bool, error) {
	if err := limiter.CheckTakeRedrive(key, limit); err != nil {
		return false, fmt.Errorf("take redrive: %w", err)
	}
	id := limiter.RedriveCountID(key)
	ctx, cancel := context.WithTimeout(ctx, s.opts.CallTimeout)
	defer cancel()
	_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                &s.table,
		Key:                      map[string]types.AttributeValue{AttrID: avS(id)},
		ConditionExpression:      aws.String("attribute_not_exists(#n) OR #n < :limit"),
		UpdateExpression:         aws.String("ADD #n :one SET #expires_at = :expires_at"),
		ExpressionAttributeNames: map[string]string{"#n": limiter.AttrRedriveCount, "#expires_at": AttrExpiresAt},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":one": avN(1), ":limit": avN(int64(limit)),
			":expires_at": avN(s.now().Add(limiter.RedriveCountTTL).Unix()),
		},
	})
	if err == nil {
		return true, nil
	}
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return false, nil
	}
	return false, backendErr("take redrive", id, err)
}
