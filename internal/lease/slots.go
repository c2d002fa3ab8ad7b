package lease

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/leasehold/leasehold/settings"
)

// A slot set bounds how many attempts of one kind run at once across every
// worker of the table (docs/worker.md, "Flow control"). It is one item of
// the tasks table, its id starting with a control character like a rate
// window's, holding a map of its holders (an attempt's task id and fence)
// to the time each holds its slot until. An attempt takes a slot after its
// claim and gives it back when it ends; a holder that never gives it back
// (its worker died) loses it once its time has passed, plus the store's
// skew.

// slotsPrefix starts every slot set's id.
const slotsPrefix = "\x1eslots/"

// MaxSlots bounds a slot set: each holder is an entry of one item, whose
// every write costs a write unit per KB.
const MaxSlots = settings.MaxKindConcurrency

// AttrHolders is a slot set's map of holders to their times (unix ms).
const AttrHolders = "holders"

// maxSlotTries bounds the writes of one AcquireSlot: its take, and the
// first holder's create or the removal of expired holders before taking
// again.
const maxSlotTries = 4

// SlotLimiter is a store that keeps slot sets: both stores implement it.
type SlotLimiter interface {
	// AcquireSlot takes one of the max slots of key (a kind) for holder
	// until until, and reports whether it got one. A holder that holds
	// one already gets it again, with the new time. Holders whose time
	// has passed by more than the store's skew are dropped to make room.
	AcquireSlot(ctx context.Context, key, holder string, max int, until time.Time) (bool, error)
	// ReleaseSlot gives holder's slot of key back; one not held is no
	// error.
	ReleaseSlot(ctx context.Context, key, holder string) error
	// FreeLostSlots reads key's set and, for at most checks of its holders,
	// those with the earliest times, reads the holder's task, and gives
	// back the slot of each whose attempt is over or lost (SlotLost): its
	// worker died or lost the lease, and the slot would otherwise stay
	// taken until its time. It returns how many it gave back. A worker
	// calls it when it finds the set full.
	FreeLostSlots(ctx context.Context, key string, checks int) (int, error)
}

// ParseSlotHolder splits a SlotHolder into its task id and fence.
func ParseSlotHolder(h string) (id string, fence int64, ok bool) {
	i := strings.LastIndexByte(h, '@')
	if i <= 0 {
		return "", 0, false
	}
	fence, err := strconv.ParseInt(h[i+1:], 10, 64)
	if err != nil || fence < 1 {
		return "", 0, false
	}
	return h[:i], fence, true
}

// SlotLost reports whether the attempt fence of a task no longer runs
// under its lease, given the task as read (found false: there is no such
// task): the task is gone, was claimed again (a newer fence), is not
// RUNNING, or its lease ended more than skew before now. Such an attempt
// cannot finish the task; its handler, if it still runs somewhere, has
// been or will be cancelled when its renewal fails.
func SlotLost(t Task, found bool, fence int64, now time.Time, skew time.Duration) bool {
	return !found || t.Fence != fence || t.Status != StatusRunning || t.LeaseUntil.Add(skew).Before(now)
}

// OldestHolders returns at most n holders of a set, earliest time first
// (then by name): the ones FreeLostSlots checks.
func OldestHolders(set map[string]time.Time, n int) []string {
	hs := make([]string, 0, len(set))
	for h := range set {
		hs = append(hs, h)
	}
	slices.SortFunc(hs, func(a, b string) int {
		return cmp.Or(set[a].Compare(set[b]), strings.Compare(a, b))
	})
	return hs[:min(n, len(hs))]
}

// SlotsID is the id of key's slot set.
func SlotsID(key string) string { return slotsPrefix + key }

// IsSlotsID reports whether id names a slot set.
func IsSlotsID(id string) bool { return strings.HasPrefix(id, slotsPrefix) }

// SlotHolder names an attempt as a slot's holder: its task and fence.
func SlotHolder(taskID string, fence int64) string {
	return taskID + "@" + strconv.FormatInt(fence, 10)
}

// CheckAcquireSlot validates AcquireSlot's arguments.
func CheckAcquireSlot(key, holder string, max int, until time.Time) error {
	switch {
	case key == "" || holder == "":
		return fmt.Errorf("%w: a slot needs a key and a holder", ErrInvalid)
	case max < 1 || max > MaxSlots:
		return fmt.Errorf("%w: %d slots is outside 1..%d", ErrInvalid, max, MaxSlots)
	case until.IsZero():
		return fmt.Errorf("%w: a slot needs the time it is held until", ErrInvalid)
	}
	return nil
}

// AcquireSlot implements SlotLimiter. Taking a free slot is one
// conditional UpdateItem; the first holder of a key creates the item
// (PutItem) instead; a full set whose holders have expired costs one more
// UpdateItem that removes them. Each write costs a write unit per KB of
// the item: about 40 holders of 20-byte task ids a KB.
func (s *DynamoStore) AcquireSlot(ctx context.Context, key, holder string, max int, until time.Time) (bool, error) {
	if err := CheckAcquireSlot(key, holder, max, until); err != nil {
		return false, fmt.Errorf("acquire slot: %w", err)
	}
	id := SlotsID(key)
	ctx, cancel := context.WithTimeout(ctx, s.opts.CallTimeout)
	defer cancel()
	names := map[string]string{"#holders": AttrHolders, "#h": holder, "#expires_at": AttrExpiresAt}
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
		held, ok := ccf.Item[AttrHolders].(*types.AttributeValueMemberM)
		if !ok {
			// No set yet: the first holder creates it.
			_, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{
				TableName:                &s.table,
				Item:                     map[string]types.AttributeValue{AttrID: avS(id), AttrHolders: &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{holder: avMillis(until)}}, AttrExpiresAt: values[":expires_at"]},
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
func (s *DynamoStore) expiredHolders(holders map[string]types.AttributeValue) map[string]types.AttributeValue {
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
func (s *DynamoStore) dropHolders(ctx context.Context, id string, drop map[string]types.AttributeValue) error {
	names := map[string]string{"#holders": AttrHolders}
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

// ReleaseSlot implements SlotLimiter: one UpdateItem that removes the
// holder (and writes nothing if the set is gone).
func (s *DynamoStore) ReleaseSlot(ctx context.Context, key, holder string) error {
	if key == "" || holder == "" {
		return fmt.Errorf("release slot: %w: a slot needs a key and a holder", ErrInvalid)
	}
	id := SlotsID(key)
	ctx, cancel := context.WithTimeout(ctx, s.opts.CallTimeout)
	defer cancel()
	_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                &s.table,
		Key:                      map[string]types.AttributeValue{AttrID: avS(id)},
		ConditionExpression:      aws.String("attribute_exists(#holders)"),
		UpdateExpression:         aws.String("REMOVE #holders.#h"),
		ExpressionAttributeNames: map[string]string{"#holders": AttrHolders, "#h": holder},
	})
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		return backendErr("release slot", id, err)
	}
	return nil
}

// FreeLostSlots implements SlotLimiter: a strongly consistent GetItem of
// the set, one of each holder checked (Get), and for each lost one an
// UpdateItem that removes it only while it keeps the time it was read
// with.
func (s *DynamoStore) FreeLostSlots(ctx context.Context, key string, checks int) (int, error) {
	if key == "" || checks < 1 {
		return 0, fmt.Errorf("free lost slots: %w: a key and at least one check", ErrInvalid)
	}
	id := SlotsID(key)
	cctx, cancel := context.WithTimeout(ctx, s.opts.CallTimeout)
	out, err := s.client.GetItem(cctx, &dynamodb.GetItemInput{
		TableName:                &s.table,
		Key:                      map[string]types.AttributeValue{AttrID: avS(id)},
		ConsistentRead:           aws.Bool(true),
		ProjectionExpression:     aws.String("#holders"),
		ExpressionAttributeNames: map[string]string{"#holders": AttrHolders},
	})
	cancel()
	if err != nil {
		return 0, backendErr("read slots", id, err)
	}
	held, _ := out.Item[AttrHolders].(*types.AttributeValueMemberM)
	if held == nil {
		return 0, nil
	}
	freed := 0
	for _, h := range OldestHolders(holderTimes(held.Value), checks) {
		taskID, fence, ok := ParseSlotHolder(h)
		if !ok {
			continue // not a worker's: left to its time
		}
		t, err := s.Get(ctx, taskID)
		found := err == nil
		if err != nil && !errors.Is(err, ErrNotFound) {
			return freed, err
		}
		if !SlotLost(t, found, fence, s.now(), s.opts.Skew) {
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
