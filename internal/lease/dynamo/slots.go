package dynamo

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/limiter"
)

// maxSlotTries bounds the writes of one AcquireSlot: its take, and the
// first holder's create or the removal of expired holders before taking
// again.
const maxSlotTries = 4

// AcquireSlot implements limiter.SlotLimiter. Taking a free slot is one
// conditional UpdateItem; the first holder of a key creates the item
// (PutItem) instead; a full set whose holders have expired costs one more
// UpdateItem that removes them. Each write costs a write unit per KB of
// the item: about 40 holders of 20-byte task ids a KB.
func (s *Store) AcquireSlot(ctx context.Context, key, holder string, max int, until time.Time) (bool, error) {
	if err := limiter.CheckAcquireSlot(key, holder, max, until); err != nil {
		return false, fmt.Errorf("acquire slot: %w", err)
	}
	id := limiter.SlotsID(key)
	ctx, cancel := context.WithTimeout(ctx, s.opts.CallTimeout)
	defer cancel()
	names := map[string]string{"#holders": limiter.AttrHolders, "#h": holder, "#expires_at": AttrExpiresAt}
	values := map[string]types.AttributeValue{
		":until": avMillis(until), ":max": avN(int64(max)),
		// The set outlives every holder's time by a day.
		":expires_at": avN(until.Add(24 * time.Hour).Unix()),
	}
	for range maxSlotTries {
		_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                           &s.table,
			Key:                                 map[string]types.AttributeValue{AttrID: avS(id)},
			ConditionExpression:                 aws.String("attribute_exists(#holders) AND (size(#holders) < :max OR attribute_exists(#holders.#h))"),
			UpdateExpression:                    aws.String("SET #holders.#h = :until, #expires_at = :expires_at"),
			ExpressionAttributeNames:            names,
			ExpressionAttributeValues:           values,
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		})
		if err == nil {
			return true, nil
		}
		var ccf *types.ConditionalCheckFailedException
		if !errors.As(err, &ccf) {
			return false, backendErr("acquire slot", id, err)
		}
		held, ok := ccf.Item[limiter.AttrHolders].(*types.AttributeValueMemberM)
		if !ok {
			// No set yet: the first holder creates it.
			_, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{
				TableName:                &s.table,
				Item:                     map[string]types.AttributeValue{AttrID: avS(id), limiter.AttrHolders: &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{holder: avMillis(until)}}, AttrExpiresAt: values[":expires_at"]},
				ConditionExpression:      aws.String("attribute_not_exists(#id)"),
				ExpressionAttributeNames: map[string]string{"#id": AttrID},
			})
			if err == nil {
				return true, nil
			}
			if !errors.As(err, &ccf) {
				return false, backendErr("acquire slot", id, err)
			}
			continue // created meanwhile: take again
		}
		expired := s.expiredHolders(held.Value)
		if len(expired) == 0 {
			return false, nil
		}
		if err := s.dropHolders(ctx, id, expired); err != nil {
			return false, err
		}
	}
	return false, nil // the set kept changing under this call: no slot this time
}

// expiredHolders are the holders of a set whose time passed more than the
// store's skew ago, with the time each had.
func (s *Store) expiredHolders(holders map[string]types.AttributeValue) map[string]types.AttributeValue {
	cutoff := s.now().Add(-s.opts.Skew)
	out := map[string]types.AttributeValue{}
	for h, t := range holderTimes(holders) {
		if t.Before(cutoff) {
			out[h] = holders[h]
		}
	}
	return out
}

// holderTimes reads a set's holders map: each holder's time (unix ms).
func holderTimes(holders map[string]types.AttributeValue) map[string]time.Time {
	out := make(map[string]time.Time, len(holders))
	for h, v := range holders {
		if n, ok := v.(*types.AttributeValueMemberN); ok {
			if ms, err := strconv.ParseInt(n.Value, 10, 64); err == nil {
				out[h] = time.UnixMilli(ms)
			}
		}
	}
	return out
}

// dropHolders removes holders (expired or lost) from the set id, each only
// while it still has the time it was found with (it may have been taken
// again).
func (s *Store) dropHolders(ctx context.Context, id string, drop map[string]types.AttributeValue) error {
	names := map[string]string{"#holders": limiter.AttrHolders}
	values := map[string]types.AttributeValue{}
	var remove, cond []string
	i := 0
	for h, v := range drop {
		n, val := "#e"+strconv.Itoa(i), ":e"+strconv.Itoa(i)
		names[n], values[val] = h, v
		remove = append(remove, "#holders."+n)
		cond = append(cond, "#holders."+n+" = "+val)
		i++
	}
	_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 &s.table,
		Key:                       map[string]types.AttributeValue{AttrID: avS(id)},
		ConditionExpression:       aws.String(strings.Join(cond, " AND ")),
		UpdateExpression:          aws.String("REMOVE " + strings.Join(remove, ", ")),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: values,
	})
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		return backendErr("drop expired slot holders", id, err)
	}
	return nil // removed, or one of them was taken again: take again either way
}

// ReleaseSlot implements limiter.SlotLimiter: one UpdateItem that removes the
// holder (and writes nothing if the set is gone).
func (s *Store) ReleaseSlot(ctx context.Context, key, holder string) error {
	if key == "" || holder == "" {
		return fmt.Errorf("release slot: %w: a slot needs a key and a holder", lease.ErrInvalid)
	}
	id := limiter.SlotsID(key)
	ctx, cancel := context.WithTimeout(ctx, s.opts.CallTimeout)
	defer cancel()
	_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                &s.table,
		Key:                      map[string]types.AttributeValue{AttrID: avS(id)},
		ConditionExpression:      aws.String("attribute_exists(#holders)"),
		UpdateExpression:         aws.String("REMOVE #holders.#h"),
		ExpressionAttributeNames: map[string]string{"#holders": limiter.AttrHolders, "#h": holder},
	})
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		return backendErr("release slot", id, err)
	}
	return nil
}

// FreeLostSlots implements limiter.SlotLimiter: a strongly consistent GetItem of
// the set, one of each holder checked (Get), and for each lost one an
// UpdateItem that removes it only while it keeps the time it was read
// with.
func (s *Store) FreeLostSlots(ctx context.Context, key string, checks int) (int, error) {
	if key == "" || checks < 1 {
		return 0, fmt.Errorf("free lost slots: %w: a key and at least one check", lease.ErrInvalid)
	}
	id := limiter.SlotsID(key)
	cctx, cancel := context.WithTimeout(ctx, s.opts.CallTimeout)
	out, err := s.client.GetItem(cctx, &dynamodb.GetItemInput{
		TableName:                &s.table,
		Key:                      map[string]types.AttributeValue{AttrID: avS(id)},
		ConsistentRead:           aws.Bool(true),
		ProjectionExpression:     aws.String("#holders"),
		ExpressionAttributeNames: map[string]string{"#holders": limiter.AttrHolders},
	})
	cancel()
	if err != nil {
		return 0, backendErr("read slots", id, err)
	}
	held, _ := out.Item[limiter.AttrHolders].(*types.AttributeValueMemberM)
	if held == nil {
		return 0, nil
	}
	freed := 0
	for _, h := range limiter.OldestHolders(holderTimes(held.Value), checks) {
		taskID, fence, ok := limiter.ParseSlotHolder(h)
		if !ok {
			continue // not a worker's: left to its time
		}
		t, err := s.Get(ctx, taskID)
		found := err == nil
		if err != nil && !errors.Is(err, lease.ErrNotFound) {
			return freed, err
		}
		if !limiter.SlotLost(t, found, fence, s.now(), s.opts.Skew) {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, s.opts.CallTimeout)
		err = s.dropHolders(cctx, id, map[string]types.AttributeValue{h: held.Value[h]})
		cancel()
		if err != nil {
			return freed, err
		}
		freed++
	}
	return freed, nil
}
