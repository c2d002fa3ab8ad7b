package dynamo

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/mapstate"
)

var _ mapstate.Store = (*Store)(nil)

// Attribute names of a map's group and page items (mapstate).
const (
	attrMapShape    = "shape"
	attrMapN        = "n"
	attrMapC        = "c"
	attrMapFirst    = "first"
	attrMapMin      = "min"
	attrMapTolerate = "tolerate"
	attrMapSeq      = "seq"
	attrMapOK       = "ok"
	attrMapFailed   = "failed"
	attrMapFailures = "failures"
	attrMapProduced = "produced"
	attrMapIdle     = "idle"
	attrMapStopped  = "stopped"
	attrMapVersion  = "ver"
	attrMapItems    = "items"
)

// maxGroupTries bounds the writes of one group update that lost a race
// with another slot's report (each retry is conditional on the version it
// saw).
const maxGroupTries = 8

// CreateGroup implements mapstate.Store: one conditional PutItem.
func (s *Store) CreateGroup(ctx context.Context, g mapstate.Group) (mapstate.Group, error) {
	if err := g.Check(); err != nil {
		return mapstate.Group{}, fmt.Errorf("create map group: %w", err)
	}
	g.Version = 1
	wrote, had, err := s.putUnless(ctx, groupItem(g), "", nil)
	switch {
	case err != nil:
		return mapstate.Group{}, backendErr("create map group", g.ID, err)
	case wrote:
		return g, nil
	}
	got, err := groupFromItem(had)
	if err != nil {
		return mapstate.Group{}, err
	}
	return got, lease.ErrAlreadyExists
}

// GetGroup implements mapstate.Store: one strongly consistent GetItem.
func (s *Store) GetGroup(ctx context.Context, id string) (mapstate.Group, error) {
	item, err := s.getMapItem(ctx, "get map group", id)
	if err != nil {
		return mapstate.Group{}, err
	}
	return groupFromItem(item)
}

// Report implements mapstate.Store: one UpdateItem (1 write unit: a
// group stays under 1 KB) conditional on the slot's count and the group's
// slots (and, for a failure, room in the list of first failures). When
// that condition fails, the group it saw says why: a child counted already
// (ErrCounted), or a failure past the list's room, which is then written
// whole, conditional on the group's version.
func (s *Store) Report(ctx context.Context, r mapstate.Report) (mapstate.Group, error) {
	if err := r.Check(); err != nil {
		return mapstate.Group{}, fmt.Errorf("report to map group: %w", err)
	}
	j := r.Slot % mapstate.SlotsPerGroup
	seq := fmt.Sprintf("#seq[%d]", j)
	names := map[string]string{"#seq": attrMapSeq, "#first": attrMapFirst, "#c": attrMapC, "#ver": attrMapVersion}
	values := map[string]types.AttributeValue{
		":k": avN(int64(r.Rank)), ":k1": avN(int64(r.Rank + 1)), ":first": avN(int64(r.Slot - j)), ":one": avN(1), ":c": avN(int64(r.C)),
	}
	cond := seq + " = :k AND #first = :first AND #c = :c"
	set := "SET " + seq + " = :k1, #ver = #ver + :one"
	add := ""
	if r.OK {
		names["#ok"] = attrMapOK
		add = "#ok :one"
	} else {
		names["#failed"], names["#failures"] = attrMapFailed, attrMapFailures
		values[":maxf"], values[":il"] = avN(mapstate.MaxFailures), &types.AttributeValueMemberL{Value: []types.AttributeValue{avN(int64(r.Index))}}
		cond += " AND size(#failures) < :maxf"
		set += ", #failures = list_append(#failures, :il)"
		add = "#failed :one"
	}
	if !r.Started {
		// A next child not started leaves the slot idle; with no next
		// child, the group's N says so and the slot stays as it is.
		names["#n"], names["#idle"] = attrMapN, attrMapIdle
		values[":next"] = avN(int64(r.Index + r.C))
		values[":slot"] = &types.AttributeValueMemberNS{Value: []string{strconv.Itoa(r.Slot)}}
		cond += " AND #n > :next"
		add += ", #idle :slot"
	}
	update := set + " ADD " + add
	cctx, cancel := context.WithTimeout(ctx, s.opts.CallTimeout)
	out, err := s.client.UpdateItem(cctx, &dynamodb.UpdateItemInput{
		TableName:                           &s.table,
		Key:                                 map[string]types.AttributeValue{AttrID: avS(r.Group)},
		ConditionExpression:                 aws.String(cond),
		UpdateExpression:                    aws.String(update),
		ExpressionAttributeNames:            names,
		ExpressionAttributeValues:           values,
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	cancel()
	if err == nil {
		return groupFromItem(out.Attributes)
	}
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		return mapstate.Group{}, backendErr("report to map group", r.Group, err)
	}
	return s.rewriteGroup(ctx, r.Group, ccf.Item, func(g mapstate.Group) (mapstate.Group, error) { return g.Apply(r) })
}

// Raise implements mapstate.Store: one conditional UpdateItem.
func (s *Store) Raise(ctx context.Context, id string, produced int) (mapstate.Group, error) {
	return s.setGroup(ctx, "raise map group", id, "#produced < :p", "SET #produced = :p, #ver = #ver + :one",
		map[string]string{"#produced": attrMapProduced, "#ver": attrMapVersion},
		map[string]types.AttributeValue{":p": avN(int64(produced)), ":one": avN(1)}, nil)
}

// Stop implements mapstate.Store: one conditional UpdateItem.
func (s *Store) Stop(ctx context.Context, id, reason string) (mapstate.Group, error) {
	if reason == "" {
		return mapstate.Group{}, fmt.Errorf("stop map group: %w: no reason", lease.ErrInvalid)
	}
	return s.setGroup(ctx, "stop map group", id, "attribute_not_exists(#stopped)", "SET #stopped = :r, #ver = #ver + :one",
		map[string]string{"#stopped": attrMapStopped, "#ver": attrMapVersion},
		map[string]types.AttributeValue{":r": avS(reason), ":one": avN(1)}, nil)
}

// Unpark implements mapstate.Store: one conditional UpdateItem.
func (s *Store) Unpark(ctx context.Context, id string, slot, seq int) (mapstate.Group, error) {
	j := slot % mapstate.SlotsPerGroup
	return s.setGroup(ctx, "unpark map slot", id, fmt.Sprintf("#first = :first AND #seq[%d] = :k", j), "DELETE #idle :s SET #ver = #ver + :one",
		map[string]string{"#first": attrMapFirst, "#seq": attrMapSeq, "#idle": attrMapIdle, "#ver": attrMapVersion},
		map[string]types.AttributeValue{":first": avN(int64(slot - j)), ":k": avN(int64(seq)), ":one": avN(1),
			":s": &types.AttributeValueMemberNS{Value: []string{strconv.Itoa(slot)}}},
		func(g mapstate.Group) error {
			if g.First != slot-j || j >= len(g.Seq) {
				return fmt.Errorf("%w: slot %d is not in group %q", lease.ErrInvalid, slot, id)
			}
			return mapstate.ErrCounted
		})
}

// setGroup is one conditional UpdateItem of group id; a failed condition
// returns the group as it was, with the error failed gives (nil: none).
func (s *Store) setGroup(ctx context.Context, op, id, cond, update string, names map[string]string, values map[string]types.AttributeValue, failed func(mapstate.Group) error) (mapstate.Group, error) {
	names["#id"] = AttrID
	ctx, cancel := context.WithTimeout(ctx, s.opts.CallTimeout)
	defer cancel()
	out, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           &s.table,
		Key:                                 map[string]types.AttributeValue{AttrID: avS(id)},
		ConditionExpression:                 aws.String("attribute_exists(#id) AND (" + cond + ")"),
		UpdateExpression:                    aws.String(update),
		ExpressionAttributeNames:            names,
		ExpressionAttributeValues:           values,
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err == nil {
		return groupFromItem(out.Attributes)
	}
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		return mapstate.Group{}, backendErr(op, id, err)
	}
	if len(ccf.Item) == 0 {
		return mapstate.Group{}, fmt.Errorf("%s %q: %w", op, id, lease.ErrNotFound)
	}
	g, err := groupFromItem(ccf.Item)
	if err != nil || failed == nil {
		return g, err
	}
	return g, failed(g)
}

// rewriteGroup applies f to the group item seen and writes the result
// whole, conditional on the version seen; a lost race applies f again to
// the group the failed write saw.
func (s *Store) rewriteGroup(ctx context.Context, id string, seen map[string]types.AttributeValue, f func(mapstate.Group) (mapstate.Group, error)) (mapstate.Group, error) {
	for range maxGroupTries {
		if len(seen) == 0 {
			return mapstate.Group{}, fmt.Errorf("map group %q: %w", id, lease.ErrNotFound)
		}
		old, err := groupFromItem(seen)
		if err != nil {
			return mapstate.Group{}, err
		}
		next, err := f(old)
		if err != nil {
			return old, err
		}
		next.Version = old.Version + 1
		cctx, cancel := context.WithTimeout(ctx, s.opts.CallTimeout)
		_, err = s.client.PutItem(cctx, &dynamodb.PutItemInput{
			TableName:                           &s.table,
			Item:                                groupItem(next),
			ConditionExpression:                 aws.String("#ver = :ver"),
			ExpressionAttributeNames:            map[string]string{"#ver": attrMapVersion},
			ExpressionAttributeValues:           map[string]types.AttributeValue{":ver": avN(old.Version)},
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		})
		cancel()
		if err == nil {
			return next, nil
		}
		var ccf *types.ConditionalCheckFailedException
		if !errors.As(err, &ccf) {
			return mapstate.Group{}, backendErr("rewrite map group", id, err)
		}
		seen = ccf.Item
	}
	return mapstate.Group{}, fmt.Errorf("rewrite map group %q: %w: %d writes lost to others", id, lease.ErrBackend, maxGroupTries)
}

// PutPage implements mapstate.Store: one PutItem, a write unit per KB.
func (s *Store) PutPage(ctx context.Context, id string, items [][]byte, expires time.Time) error {
	if err := mapstate.CheckPage(id, items, expires); err != nil {
		return fmt.Errorf("put map page: %w", err)
	}
	list := make([]types.AttributeValue, len(items))
	for i, b := range items {
		list[i] = &types.AttributeValueMemberB{Value: b}
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.CallTimeout)
	defer cancel()
	_, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: &s.table,
		Item: map[string]types.AttributeValue{
			AttrID: avS(id), attrMapItems: &types.AttributeValueMemberL{Value: list}, AttrExpiresAt: avN(expires.Unix()),
		},
	})
	if err != nil {
		return backendErr("put map page", id, err)
	}
	return nil
}

// GetPage implements mapstate.Store: one strongly consistent GetItem (the
// page was written before the group said it is there).
func (s *Store) GetPage(ctx context.Context, id string) ([][]byte, error) {
	item, err := s.getMapItem(ctx, "get map page", id)
	if err != nil {
		return nil, err
	}
	list, ok := item[attrMapItems].(*types.AttributeValueMemberL)
	if !ok {
		return nil, fmt.Errorf("map page %q: %w: no items", id, lease.ErrBackend)
	}
	out := make([][]byte, len(list.Value))
	for i, v := range list.Value {
		b, ok := v.(*types.AttributeValueMemberB)
		if !ok {
			return nil, fmt.Errorf("map page %q: %w: item %d is not binary", id, lease.ErrBackend, i)
		}
		out[i] = b.Value
	}
	return out, nil
}

func (s *Store) getMapItem(ctx context.Context, op, id string) (map[string]types.AttributeValue, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.CallTimeout)
	defer cancel()
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: &s.table, Key: map[string]types.AttributeValue{AttrID: avS(id)}, ConsistentRead: aws.Bool(true),
	})
	switch {
	case err != nil:
		return nil, backendErr(op, id, err)
	case len(out.Item) == 0:
		return nil, fmt.Errorf("%s %q: %w", op, id, lease.ErrNotFound)
	}
	return out.Item, nil
}

// groupItem encodes g; groupFromItem is its inverse.
func groupItem(g mapstate.Group) map[string]types.AttributeValue {
	item := map[string]types.AttributeValue{
		AttrID: avS(g.ID), attrMapShape: avS(g.Shape), attrMapN: avN(int64(g.N)), attrMapC: avN(int64(g.C)),
		attrMapFirst: avN(int64(g.First)), attrMapMin: avN(int64(g.Min)), attrMapTolerate: avN(int64(g.Tolerate)), attrMapSeq: avInts(g.Seq), attrMapOK: avN(int64(g.OK)),
		attrMapFailed: avN(int64(g.Failed)), attrMapFailures: avInts(g.Failures), attrMapProduced: avN(int64(g.Produced)),
		attrMapVersion: avN(g.Version), AttrExpiresAt: avN(g.Expires.Unix()),
	}
	if len(g.Idle) > 0 {
		ns := make([]string, len(g.Idle))
		for i, s := range g.Idle {
			ns[i] = strconv.Itoa(s)
		}
		item[attrMapIdle] = &types.AttributeValueMemberNS{Value: ns}
	}
	if g.Stopped != "" {
		item[attrMapStopped] = avS(g.Stopped)
	}
	return item
}

func avInts(v []int) types.AttributeValue {
	list := make([]types.AttributeValue, len(v))
	for i, n := range v {
		list[i] = avN(int64(n))
	}
	return &types.AttributeValueMemberL{Value: list}
}

func groupFromItem(item map[string]types.AttributeValue) (mapstate.Group, error) {
	var g mapstate.Group
	bad := func(what string) (mapstate.Group, error) {
		return mapstate.Group{}, fmt.Errorf("map group %q: %w: bad %s", g.ID, lease.ErrBackend, what)
	}
	id, ok := item[AttrID].(*types.AttributeValueMemberS)
	if !ok {
		return bad("id")
	}
	g.ID = id.Value
	if v, ok := item[attrMapShape].(*types.AttributeValueMemberS); ok {
		g.Shape = v.Value
	}
	if v, ok := item[attrMapStopped].(*types.AttributeValueMemberS); ok {
		g.Stopped = v.Value
	}
	for name, dst := range map[string]*int{attrMapN: &g.N, attrMapC: &g.C, attrMapFirst: &g.First, attrMapMin: &g.Min, attrMapTolerate: &g.Tolerate, attrMapOK: &g.OK, attrMapFailed: &g.Failed, attrMapProduced: &g.Produced} {
		n, err := intOf(item[name])
		if err != nil {
			return bad(name)
		}
		*dst = n
	}
	ver, err := intOf(item[attrMapVersion])
	if err != nil {
		return bad(attrMapVersion)
	}
	exp, err := intOf(item[AttrExpiresAt])
	if err != nil {
		return bad(AttrExpiresAt)
	}
	g.Version, g.Expires = int64(ver), time.Unix(int64(exp), 0).UTC()
	for name, dst := range map[string]*[]int{attrMapSeq: &g.Seq, attrMapFailures: &g.Failures} {
		list, ok := item[name].(*types.AttributeValueMemberL)
		if !ok {
			return bad(name)
		}
		*dst = make([]int, len(list.Value))
		for i, v := range list.Value {
			if (*dst)[i], err = intOf(v); err != nil {
				return bad(name)
			}
		}
	}
	if len(g.Failures) == 0 {
		g.Failures = nil
	}
	if ns, ok := item[attrMapIdle].(*types.AttributeValueMemberNS); ok {
		for _, s := range ns.Value {
			n, err := strconv.Atoi(s)
			if err != nil {
				return bad(attrMapIdle)
			}
			g.Idle = append(g.Idle, n)
		}
		slices.Sort(g.Idle)
	}
	return g, nil
}

func intOf(v types.AttributeValue) (int, error) {
	n, ok := v.(*types.AttributeValueMemberN)
	if !ok {
		return 0, fmt.Errorf("%w: not a number", lease.ErrBackend)
	}
	return strconv.Atoi(n.Value)
}

// StopMap stops the sliding map parent waits in, if any, and cancels the
// children it runs (mapstate.StopChildren): lease.CancelChildren calls it
// before it cancels parent's other children.
func (s *Store) StopMap(ctx context.Context, parent lease.Task, reason string, cancelled func(lease.Task)) error {
	return mapstate.StopChildren(ctx, s, s, parent, reason, cancelled)
}
