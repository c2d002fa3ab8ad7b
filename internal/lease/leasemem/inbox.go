package leasemem

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/inbox"
)

var _ inbox.Store = (*Store)(nil)

// memInbox is one workflow's inbox and events.
type memInbox struct {
	state    inbox.State
	messages map[string][]inbox.Message // by topic, position seq-1
	markers  map[string]inbox.Message   // by message id: the message placed
	events   map[string]inbox.Event
}

// inboxOf returns task's inbox, made on first use; s.mu is held.
func (s *Store) inboxOf(task string) *memInbox {
	b := s.inboxes[task]
	if b == nil {
		b = &memInbox{state: inbox.State{Task: task, Last: map[string]int64{}, Taken: map[string]int64{}},
			messages: map[string][]inbox.Message{}, markers: map[string]inbox.Message{}, events: map[string]inbox.Event{}}
		s.inboxes[task] = b
	}
	return b
}

func cloneMessage(m inbox.Message) inbox.Message {
	m.Payload = bytes.Clone(m.Payload)
	return m
}

// Send implements inbox.Store: the steps of the protocol happen at once,
// under the store's lock.
func (s *Store) Send(ctx context.Context, m inbox.Message) (inbox.Message, bool, error) {
	if err := m.Check(); err != nil {
		return inbox.Message{}, false, fmt.Errorf("send message: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin(ctx, true); err != nil {
		return inbox.Message{}, false, err
	}
	b := s.inboxOf(m.Task)
	if got, ok := b.markers[m.ID]; ok {
		return cloneMessage(got), inbox.Listening(b.state.Waiting, got.Topic), inbox.ErrDuplicate
	}
	t, ok := s.tasks[m.Task]
	switch {
	case !ok:
		delete(s.inboxes, m.Task) // made by inboxOf above
		return inbox.Message{}, false, fmt.Errorf("send message to %s: %w", m.Task, lease.ErrNotFound)
	case t.Status.Terminal():
		return inbox.Message{}, false, fmt.Errorf("send message to %s: %w (%s)", m.Task, inbox.ErrEnded, t.Status)
	}
	if err := b.state.Admit(m.Topic); err != nil {
		return inbox.Message{}, false, fmt.Errorf("send message to %s: %w", m.Task, err)
	}
	m.Seq = b.state.Next(m.Topic)
	m.SentAt = ms(s.opts.Clock.Now())
	m = cloneMessage(m)
	b.messages[m.Topic] = append(b.messages[m.Topic], m)
	b.markers[m.ID] = m
	b.state.Last[m.Topic] = m.Seq
	return cloneMessage(m), inbox.Listening(b.state.Waiting, m.Topic), nil
}

// GetMessage implements inbox.Store.
func (s *Store) GetMessage(ctx context.Context, task, topic string, seq int64) (inbox.Message, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin(ctx, false); err != nil {
		return inbox.Message{}, err
	}
	b := s.inboxes[task]
	if b == nil || seq < 1 || seq > int64(len(b.messages[topic])) {
		return inbox.Message{}, fmt.Errorf("message %d of %s/%s: %w", seq, task, topic, lease.ErrNotFound)
	}
	return cloneMessage(b.messages[topic][seq-1]), nil
}

// Take implements inbox.Store.
func (s *Store) Take(ctx context.Context, task, topic string, seq int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin(ctx, true); err != nil {
		return err
	}
	b := s.inboxOf(task)
	if seq > b.state.Taken[topic] {
		b.state.Taken[topic] = seq
		b.state.Waiting = ""
	}
	return nil
}

// Await implements inbox.Store.
func (s *Store) Await(ctx context.Context, task, topic string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin(ctx, true); err != nil {
		return err
	}
	s.inboxOf(task).state.Waiting = topic
	return nil
}

// GetState implements inbox.Store.
func (s *Store) GetState(ctx context.Context, task string) (inbox.State, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin(ctx, false); err != nil {
		return inbox.State{}, err
	}
	b := s.inboxes[task]
	if b == nil {
		return inbox.State{Task: task, Last: map[string]int64{}, Taken: map[string]int64{}}, nil
	}
	st := b.state
	st.Last, st.Taken = maps.Clone(st.Last), maps.Clone(st.Taken)
	return st, nil
}

// Wake implements inbox.Store.
func (s *Store) Wake(ctx context.Context, task string) (bool, lease.Status, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin(ctx, true); err != nil {
		return false, "", err
	}
	t, ok := s.tasks[task]
	now := ms(s.opts.Clock.Now())
	switch {
	case !ok:
		return false, "", nil
	case t.Status != lease.StatusPending || !t.RunAt.After(now):
		return false, t.Status, nil
	}
	t.RunAt = now
	return true, t.Status, nil
}

// SetEvent implements inbox.Store.
func (s *Store) SetEvent(ctx context.Context, e inbox.Event) error {
	if err := e.Check(); err != nil {
		return fmt.Errorf("set event: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin(ctx, true); err != nil {
		return err
	}
	e.Value = slices.Clone(e.Value)
	e.SetAt = ms(s.opts.Clock.Now())
	s.inboxOf(e.Task).events[e.Key] = e
	return nil
}

// GetEvent implements inbox.Store.
func (s *Store) GetEvent(ctx context.Context, task, key string) (inbox.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin(ctx, false); err != nil {
		return inbox.Event{}, err
	}
	if b := s.inboxes[task]; b != nil {
		if e, ok := b.events[key]; ok {
			e.Value = slices.Clone(e.Value)
			return e, nil
		}
	}
	return inbox.Event{}, fmt.Errorf("event %q of %s: %w", key, task, lease.ErrNotFound)
}
