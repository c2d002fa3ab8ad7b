package dynamo

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/inbox"
)

var _ inbox.Store = (*Store)(nil)

// Attribute names of inbox items (package inbox). A state item keeps one
// attribute per topic for its last placed number (attrInboxLast and the
// topic) and one for its last taken (attrInboxTaken and the topic).
const (
	attrInboxTopic   = "topic"
	attrInboxSeq     = "seq"
	attrInboxMsgID   = "mid"
	attrInboxPayload = "payload"
	attrInboxAt      = "at"
	attrInboxWaiting = "waiting"
	attrInboxLast    = "l:"
	attrInboxTaken   = "k:"
)

// maxSendTries bounds the positions one send tries when concurrent
// senders take the topic's next numbers first.
const maxSendTries = 64

// inboxExpires is the TTL of an inbox item written now.
func (s *Store) inboxExpires() types.AttributeValue {
	return avN(s.opts.Clock.Now().Add(inbox.Life).Unix())
}

// Send implements inbox.Store, by the protocol of package inbox: a read
// of the state item and of the task's status, then a conditional put of
// the marker, one of the message (more only when a concurrent sender took
// the number) and an update of the state item. The message's write is
// priced by its size (1 write unit per KB); the others are 1 each.
func (s *Store) Send(ctx context.Context, m inbox.Message) (inbox.Message, bool, error) {
	if err := m.Check(); err != nil {
		return inbox.Message{}, false, fmt.Errorf("send message: %w", err)
	}
	st, err := s.GetState(ctx, m.Task)
	if err != nil {
		return inbox.Message{}, false, err
	}
	n := st.Next(m.Topic)
	markerID := inbox.MarkerID(m.Task, m.ID)
	wrote, had, err := s.putUnless(ctx, map[string]types.AttributeValue{
		AttrID: avS(markerID), attrInboxTopic: avS(m.Topic), attrInboxSeq: avN(n), AttrExpiresAt: s.inboxExpires(),
	}, "", nil)
	if err != nil {
		return inbox.Message{}, false, backendErr("send message", m.Task, err)
	}
	if !wrote && had != nil {
		d := &decoder{item: had}
		topic, seq := d.str(attrInboxTopic), d.num(attrInboxSeq)
		if topic != m.Topic {
			return inbox.Message{Task: m.Task, Topic: topic, ID: m.ID, Seq: seq}, false, fmt.Errorf("%w: message id %s was sent on topic %s", inbox.ErrDuplicate, m.ID, topic)
		}
		got, err := s.GetMessage(ctx, m.Task, topic, seq)
		switch {
		case err == nil && got.ID == m.ID:
			waiting, err := s.raise(ctx, m.Task, topic, seq)
			if err != nil {
				return inbox.Message{}, false, err
			}
			return got, waiting, inbox.ErrDuplicate
		case err != nil && !errors.Is(err, lease.ErrNotFound):
			return inbox.Message{}, false, err
		}
		// A send of this id that stopped before it placed the message:
		// go on from the position its marker names.
		n = max(n, seq)
	}
	if err := s.admit(ctx, m, st); err != nil {
		return inbox.Message{}, false, err
	}
	m.SentAt = time.UnixMilli(s.opts.Clock.Now().UnixMilli()).UTC()
	placed := false
	for range maxSendTries {
		m.Seq = n
		wrote, had, err := s.putUnless(ctx, map[string]types.AttributeValue{
			AttrID: avS(inbox.MessageID(m.Task, m.Topic, n)), attrInboxTopic: avS(m.Topic), attrInboxSeq: avN(n),
			attrInboxMsgID: avS(m.ID), attrInboxPayload: avS(string(m.Payload)), attrInboxAt: avN(m.SentAt.UnixMilli()), AttrExpiresAt: s.inboxExpires(),
		}, "", nil)
		if err != nil {
			return inbox.Message{}, false, backendErr("send message", m.Task, err)
		}
		if wrote {
			placed = true
			break
		}
		if had != nil && (&decoder{item: had}).str(attrInboxMsgID) == m.ID {
			m = messageOf(m.Task, had) // placed by this id's earlier try
			placed = true
			break
		}
		// A concurrent sender took n: the marker names the next position
		// before this send tries it, so a retry finds where it went.
		n++
		if err := s.updateInbox(ctx, "send message", markerID, "SET #seq = :n", map[string]types.AttributeValue{":n": avN(n)}); err != nil {
			return inbox.Message{}, false, err
		}
	}
	if !placed {
		return inbox.Message{}, false, fmt.Errorf("send message to %s: %w: %d concurrent senders took every number tried", m.Task, lease.ErrBackend, maxSendTries)
	}
	waiting, err := s.raise(ctx, m.Task, m.Topic, m.Seq)
	return m, waiting, err
}

// admit refuses a send to a task that does not exist or has ended, or
// past the inbox's bounds (st, as read before the send).
func (s *Store) admit(ctx context.Context, m inbox.Message, st inbox.State) error {
	cctx, cancel := context.WithTimeout(ctx, s.opts.CallTimeout)
	out, err := s.client.GetItem(cctx, &dynamodb.GetItemInput{
		TableName: &s.table, Key: map[string]types.AttributeValue{AttrID: avS(m.Task)}, ConsistentRead: aws.Bool(true),
		ProjectionExpression: aws.String("#s"), ExpressionAttributeNames: map[string]string{"#s": AttrStatus},
	})
	cancel()
	switch {
	case err != nil:
		return backendErr("send message", m.Task, err)
	case len(out.Item) == 0:
		return fmt.Errorf("send message to %s: %w", m.Task, lease.ErrNotFound)
	}
	if status := lease.Status((&decoder{item: out.Item}).str(AttrStatus)); status.Terminal() {
		return fmt.Errorf("send message to %s: %w (%s)", m.Task, inbox.ErrEnded, status)
	}
	if err := st.Admit(m.Topic); err != nil {
		return fmt.Errorf("send message to %s: %w", m.Task, err)
	}
	return nil
}

// raise sets topic's last placed number to seq unless it is there or
// beyond, and reports whether a receiver waits on topic, as the state item
// stands after the write (or as the failed condition saw it).
func (s *Store) raise(ctx context.Context, task, topic string, seq int64) (bool, error) {
	cctx, cancel := context.WithTimeout(ctx, s.opts.CallTimeout)
	defer cancel()
	out, err := s.client.UpdateItem(cctx, &dynamodb.UpdateItemInput{
		TableName:                           &s.table,
		Key:                                 map[string]types.AttributeValue{AttrID: avS(inbox.StateID(task))},
		UpdateExpression:                    aws.String("SET #l = :n, #exp = :exp"),
		ConditionExpression:                 aws.String("attribute_not_exists(#l) OR #l < :n"),
		ExpressionAttributeNames:            map[string]string{"#l": attrInboxLast + topic, "#exp": AttrExpiresAt},
		ExpressionAttributeValues:           map[string]types.AttributeValue{":n": avN(seq), ":exp": s.inboxExpires()},
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case err == nil:
		return inbox.Listening((&decoder{item: out.Attributes}).str(attrInboxWaiting), topic), nil
	case errors.As(err, &ccf):
		return inbox.Listening((&decoder{item: ccf.Item}).str(attrInboxWaiting), topic), nil
	}
	return false, backendErr("send message", task, err)
}

// updateInbox applies expr to the item id, unconditionally, with the TTL
// renewed.
func (s *Store) updateInbox(ctx context.Context, op, id, expr string, values map[string]types.AttributeValue) error {
	values[":exp"] = s.inboxExpires()
	expr += ", #exp = :exp"
	names := map[string]string{"#exp": AttrExpiresAt}
	for p, name := range map[string]string{"#seq": attrInboxSeq, "#w": attrInboxWaiting} {
		if strings.Contains(expr, p) {
			names[p] = name
		}
	}
	cctx, cancel := context.WithTimeout(ctx, s.opts.CallTimeout)
	defer cancel()
	_, err := s.client.UpdateItem(cctx, &dynamodb.UpdateItemInput{
		TableName: &s.table, Key: map[string]types.AttributeValue{AttrID: avS(id)},
		UpdateExpression: aws.String(expr), ExpressionAttributeNames: names,
		ExpressionAttributeValues: values,
	})
	if err != nil {
		return backendErr(op, id, err)
	}
	return nil
}

// messageOf decodes a message item of task.
func messageOf(task string, item map[string]types.AttributeValue) inbox.Message {
	d := &decoder{item: item}
	return inbox.Message{
		Task: task, Topic: d.str(attrInboxTopic), ID: d.str(attrInboxMsgID), Seq: d.num(attrInboxSeq),
		Payload: []byte(d.str(attrInboxPayload)), SentAt: time.UnixMilli(d.num(attrInboxAt)).UTC(),
	}
}

// GetMessage implements inbox.Store: one strongly consistent GetItem.
func (s *Store) GetMessage(ctx context.Context, task, topic string, seq int64) (inbox.Message, error) {
	item, err := s.getMapItem(ctx, "get message", inbox.MessageID(task, topic, seq))
	if err != nil {
		return inbox.Message{}, err
	}
	return messageOf(task, item), nil
}

// Take implements inbox.Store: one UpdateItem, conditional on the raise.
func (s *Store) Take(ctx context.Context, task, topic string, seq int64) error {
	cctx, cancel := context.WithTimeout(ctx, s.opts.CallTimeout)
	defer cancel()
	_, err := s.client.UpdateItem(cctx, &dynamodb.UpdateItemInput{
		TableName:                 &s.table,
		Key:                       map[string]types.AttributeValue{AttrID: avS(inbox.StateID(task))},
		UpdateExpression:          aws.String("SET #k = :n, #exp = :exp REMOVE #w"),
		ConditionExpression:       aws.String("attribute_not_exists(#k) OR #k < :n"),
		ExpressionAttributeNames:  map[string]string{"#k": attrInboxTaken + topic, "#w": attrInboxWaiting, "#exp": AttrExpiresAt},
		ExpressionAttributeValues: map[string]types.AttributeValue{":n": avN(seq), ":exp": s.inboxExpires()},
	})
	if ccf := (*types.ConditionalCheckFailedException)(nil); err != nil && !errors.As(err, &ccf) {
		return backendErr("take message", task, err)
	}
	return nil
}

// Await implements inbox.Store: one UpdateItem.
func (s *Store) Await(ctx context.Context, task, topic string) error {
	return s.updateInbox(ctx, "await message", inbox.StateID(task), "SET #w = :t", map[string]types.AttributeValue{":t": avS(topic)})
}

// GetState implements inbox.Store: one strongly consistent GetItem.
func (s *Store) GetState(ctx context.Context, task string) (inbox.State, error) {
	st := inbox.State{Task: task, Last: map[string]int64{}, Taken: map[string]int64{}}
	item, err := s.getMapItem(ctx, "get inbox", inbox.StateID(task))
	switch {
	case errors.Is(err, lease.ErrNotFound):
		return st, nil
	case err != nil:
		return inbox.State{}, err
	}
	d := &decoder{item: item}
	for name := range item {
		if topic, ok := strings.CutPrefix(name, attrInboxLast); ok {
			st.Last[topic] = d.num(name)
		} else if topic, ok := strings.CutPrefix(name, attrInboxTaken); ok {
			st.Taken[topic] = d.num(name)
		}
	}
	st.Waiting = d.str(attrInboxWaiting)
	return st, nil
}

// Wake implements inbox.Store: one UpdateItem of the task's run_at,
// conditional on the task being PENDING and not due yet.
func (s *Store) Wake(ctx context.Context, task string) (bool, lease.Status, error) {
	now := s.opts.Clock.Now().UnixMilli()
	cctx, cancel := context.WithTimeout(ctx, s.opts.CallTimeout)
	defer cancel()
	_, err := s.client.UpdateItem(cctx, &dynamodb.UpdateItemInput{
		TableName:                           &s.table,
		Key:                                 map[string]types.AttributeValue{AttrID: avS(task)},
		UpdateExpression:                    aws.String("SET #r = :now"),
		ConditionExpression:                 aws.String("#s = :pending AND #r > :now"),
		ExpressionAttributeNames:            map[string]string{"#r": AttrRunAt, "#s": AttrStatus},
		ExpressionAttributeValues:           map[string]types.AttributeValue{":now": avN(now), ":pending": avS(string(lease.StatusPending))},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	var ccf *types.ConditionalCheckFailedException
	switch {
	case err == nil:
		return true, lease.StatusPending, nil
	case errors.As(err, &ccf):
		d := &decoder{item: ccf.Item}
		status := lease.Status(d.str(AttrStatus))
		// The SDK's retry of a wake whose answer was lost meets its own
		// write: due at this very millisecond.
		return status == lease.StatusPending && d.num(AttrRunAt) == now, status, nil
	}
	return false, "", backendErr("wake", task, err)
}

// SetEvent implements inbox.Store: one PutItem, priced by the value's
// size.
func (s *Store) SetEvent(ctx context.Context, e inbox.Event) error {
	if err := e.Check(); err != nil {
		return fmt.Errorf("set event: %w", err)
	}
	cctx, cancel := context.WithTimeout(ctx, s.opts.CallTimeout)
	defer cancel()
	_, err := s.client.PutItem(cctx, &dynamodb.PutItemInput{
		TableName: &s.table,
		Item: map[string]types.AttributeValue{
			AttrID: avS(inbox.EventID(e.Task, e.Key)), attrInboxPayload: avS(string(e.Value)),
			attrInboxAt: avN(s.opts.Clock.Now().UnixMilli()), AttrExpiresAt: s.inboxExpires(),
		},
	})
	if err != nil {
		return backendErr("set event", e.Task, err)
	}
	return nil
}

// GetEvent implements inbox.Store: one strongly consistent GetItem.
func (s *Store) GetEvent(ctx context.Context, task, key string) (inbox.Event, error) {
	item, err := s.getMapItem(ctx, "get event", inbox.EventID(task, key))
	if err != nil {
		return inbox.Event{}, err
	}
	d := &decoder{item: item}
	return inbox.Event{Task: task, Key: key, Value: []byte(d.str(attrInboxPayload)), SetAt: time.UnixMilli(d.num(attrInboxAt)).UTC()}, nil
}
