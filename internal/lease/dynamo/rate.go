package dynamo

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/leasehold/leasehold/internal/lease/limiter"
)

// TakeStart implements limiter.RateLimiter: one UpdateItem that adds one to the
// window's count only while it is below limit (1 write unit).
func (s *Store) TakeStart(ctx context.Context, key string, window time.Time, per time.Duration, limit int) (bool, error) {
	if err := limiter.CheckTakeStart(key, window, per, limit); err != nil {
		return false, fmt.Errorf("take start: %w", err)
	}
	id := limiter.RateWindowID(key, window)
	ctx, cancel := context.WithTimeout(ctx, s.opts.CallTimeout)
	defer cancel()
	_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                &s.table,
		Key:                      map[string]types.AttributeValue{AttrID: avS(id)},
		ConditionExpression:      aws.String("attribute_not_exists(#starts) OR #starts < :limit"),
		UpdateExpression:         aws.String("ADD #starts :one SET #expires_at = :expires_at"),
		ExpressionAttributeNames: map[string]string{"#starts": limiter.AttrStarts, "#expires_at": AttrExpiresAt},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":one": avN(1), ":limit": avN(int64(limit)),
			":expires_at": avN(window.Add(per + limiter.RateWindowSlack).Unix()),
		},
	})
	if err == nil {
		return true, nil
	}
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return false, nil
	}
	return false, backendErr("take start", id, err)
}
