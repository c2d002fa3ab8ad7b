package leasehold

import (
	"encoding/json"
	"maps"
	"strings"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/queues"
)

// Status is where a task stands. See docs/states.md for the transitions.
type Status string

const (
	// StatusPending: waiting for its first or next attempt.
	StatusPending Status = "PENDING"
	// StatusRunning: a worker holds its lease and runs the handler.
	StatusRunning Status = "RUNNING"
	// StatusWaiting: holding no lease, waiting for its children, its
	// dependencies or a callback (TaskInfo.Wait says which).
	StatusWaiting Status = "WAITING"
	// StatusSucceeded: the handler returned a result. Terminal.
	StatusSucceeded Status = "SUCCEEDED"
	// StatusFailed: the last attempt failed, or the handler failed it for
	// good. Terminal until Client.Retry.
	StatusFailed Status = "FAILED"
	// StatusCancelled: cancelled by Client.Cancel or by the handler.
	// Terminal until Client.Retry.
	StatusCancelled Status = "CANCELLED"
)

// Statuses lists every status in lifecycle order.
func Statuses() []Status {
	return []Status{StatusPending, StatusRunning, StatusWaiting, StatusSucceeded, StatusFailed, StatusCancelled}
}

func (s Status) String() string { return string(s) }

// Terminal reports whether the task is done: no attempt will start without
// an explicit Client.Retry.
func (s Status) Terminal() bool {
	return s == StatusSucceeded || s == StatusFailed || s == StatusCancelled
}

// ParseStatus reads a status name in any case ("failed", "FAILED").
func ParseStatus(name string) (Status, error) {
	s := Status(strings.ToUpper(strings.TrimSpace(name)))
	for _, v := range Statuses() {
		if s == v {
			return s, nil
		}
	}
	return "", invalidOption("unknown status %q (want one of PENDING, RUNNING, WAITING, SUCCEEDED, FAILED, CANCELLED)", name)
}

// TaskInfo is a client's view of one task. Times are UTC; a zero time means
// "not yet" (and is left out of the JSON form).
type TaskInfo struct {
	ID     string `json:"id"`
	Kind   string `json:"kind"`
	Status Status `json:"status"`
	// Attempt counts the attempts started so far; a snoozed attempt is
	// handed back and does not count.
	Attempt     int `json:"attempt"`
	MaxAttempts int `json:"max_attempts"`
	// Payload and Result are the JSON documents as stored. Client.List
	// leaves both out; Client.Get fills them.
	Payload json.RawMessage `json:"payload,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	// Error is the last attempt's error, if it had one.
	Error string `json:"error,omitempty"`
	// CancelRequested is set once a cancel took effect (Client.Cancel): on
	// a running task whose cancellation waits for its worker's next lease
	// renewal, on a task it ended, and on a task that finished first.
	CancelRequested bool `json:"cancel_requested,omitempty"`
	// LeaseOwner and LeaseUntil name the worker holding a running task;
	// LeaseFence is its lease's fencing token, which grows by one with
	// every claim.
	LeaseOwner string    `json:"lease_owner,omitempty"`
	LeaseUntil time.Time `json:"lease_until,omitzero"`
	LeaseFence int64     `json:"lease_fence,omitempty"`
	// Fence is the task's fencing token whatever its status: the number of
	// claims so far. With Attempt it names a waiting attempt's wait
	// (Client.OperatorComplete).
	Fence int64 `json:"fence,omitempty"`
	// RunAt is the earliest start of the next attempt.
	RunAt      time.Time `json:"run_at,omitzero"`
	CreatedAt  time.Time `json:"created_at,omitzero"`
	UpdatedAt  time.Time `json:"updated_at,omitzero"`
	FinishedAt time.Time `json:"finished_at,omitzero"`
	// History has one entry per ended attempt, oldest first. Client.List
	// leaves it out.
	History []AttemptInfo `json:"history,omitempty"`
	// HistoryDropped counts the oldest entries dropped from History, which
	// keeps the newest 50. Snoozes counts the attempts that snoozed.
	HistoryDropped int `json:"history_dropped,omitempty"`
	Snoozes        int `json:"snoozes,omitempty"`
	// Queue names the SQS queue the task's tokens go to; empty for the
	// default work queue. Client.List has it too (the listing index
	// projects it).
	Queue string `json:"queue,omitempty"`
	// Parent is the task that spawned this one, if any.
	Parent string `json:"parent,omitempty"`
	// Wait is what the task waits for while WAITING (children, after,
	// after_any, callback), and afterwards what it last waited for.
	Wait string `json:"wait,omitempty"`
	// WaitFor lists its children or dependencies; Ended those of them
	// known to have ended while it waits.
	WaitFor []string `json:"wait_for,omitempty"`
	Ended   []string `json:"ended,omitempty"`
	// WaitUntil is the wait's deadline (a WAITING task's; every wait has one).
	WaitUntil time.Time `json:"wait_until,omitzero"`
	// LastHeartbeat and HeartbeatUntil are set while the task waits for a
	// callback with a heartbeat timeout (workflow.HeartbeatTimeout): when
	// its last heartbeat came (when the wait began, before the first), and
	// when the wait ends unless a heartbeat comes first.
	LastHeartbeat  time.Time `json:"last_heartbeat,omitzero"`
	HeartbeatUntil time.Time `json:"heartbeat_until,omitzero"`
	// Waiters are the tasks told when this one ends.
	Waiters []string `json:"waiters,omitempty"`
	// Steps names the handler's recorded steps (workflow.Step, and the
	// steps of sleeps and awaits), oldest first.
	Steps []string `json:"steps,omitempty"`
	// Then lists the ids of the chain's links after this task (Then).
	Then []string `json:"then,omitempty"`
	// Metadata is the task's metadata (see Submission.Metadata). Client.List
	// leaves it out; Client.Get fills it.
	Metadata map[string]string `json:"metadata,omitempty"`
	// Run is the workflow's run, from 1: a workflow that continued as new
	// (workflow.ContinueAsNew) n times is in run n+1, and its ended runs
	// are tasks of their own, ID@run1 to ID@runN, whose Parent is this
	// task. Client.List leaves it out.
	Run int `json:"run,omitempty"`
	// Inbox is the workflow's inbox and events, as Client.Inbox read
	// them; Get and List leave it nil.
	Inbox *struct {
		// Topics counts each topic's messages, by topic name: Delivered
		// the ones the workflow received, Waiting the ones sent and not
		// received yet.
		Topics []struct {
			Topic     string `json:"topic"`
			Delivered int64  `json:"delivered"`
			Waiting   int64  `json:"waiting"`
		} `json:"topics,omitempty"`
		// ReceivingOn is the topic a receive of the workflow waits on, if
		// one does.
		ReceivingOn string `json:"receiving_on,omitempty"`
		// Messages are the waiting messages read, in topic order and by
		// number (Seq) within a topic; ID is the message id (SendOnce's,
		// or the one Send drew). More says that more wait than were read.
		Messages []struct {
			Topic   string          `json:"topic"`
			ID      string          `json:"id"`
			Seq     int64           `json:"seq"`
			SentAt  time.Time       `json:"sent_at"`
			Payload json.RawMessage `json:"payload"`
		} `json:"messages,omitempty"`
		More bool `json:"more,omitempty"`
		// Events are the event keys the workflow's run set (its
		// event:KEY#n steps), in the order it first set them, with the
		// value and time of those read (Read). EventsNotRead counts the
		// keys past the read's bound.
		Events []struct {
			Key   string          `json:"key"`
			Read  bool            `json:"read"`
			SetAt time.Time       `json:"set_at,omitzero"`
			Value json.RawMessage `json:"value,omitempty"`
		} `json:"events,omitempty"`
		EventsNotRead int `json:"events_not_read,omitempty"`
	} `json:"inbox,omitempty"`
}

// AttemptInfo records how one attempt ended.
type AttemptInfo struct {
	Attempt int `json:"attempt"`
	// Status is the status the attempt left the task in: PENDING for an
	// attempt that will be retried or was snoozed.
	Status Status    `json:"status"`
	Error  string    `json:"error,omitempty"`
	At     time.Time `json:"at,omitzero"`
}

func utc(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC()
}

func rawJSON(b []byte) json.RawMessage {
	if len(b) == 0 {
		return nil
	}
	return json.RawMessage(append([]byte(nil), b...))
}

// view is the public view of a stored task as this client shows it: a
// task recorded with the name of the client's own work queue (a raw
// inline token sent with SendMessage, a redriven message: the worker
// records the queue it arrived on) shows the default work queue's "", as
// the tasks the client enqueued there do, so that the queue is one queue
// in every listing. Nothing is written.
func (c *Client) view(t lease.Task) TaskInfo {
	info := infoOf(t)
	if info.Queue != "" && info.Queue == c.workQueueName() {
		info.Queue = ""
	}
	return info
}

// workQueueName is the name of the default work queue: ClientConfig's
// QueueName, or the last part of its QueueURL; "" when it names none.
func (c *Client) workQueueName() string {
	if c.queueName != "" {
		return c.queueName
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return queues.NameFromURL(c.queueURL)
}

// infoOf is the public view of a stored task.
func infoOf(t lease.Task) TaskInfo {
	info := TaskInfo{
		ID:              t.ID,
		Kind:            t.Kind,
		Status:          Status(t.Status),
		Attempt:         t.Attempt,
		MaxAttempts:     t.MaxAttempts,
		Payload:         rawJSON(t.Payload),
		Result:          rawJSON(t.Result),
		Error:           t.Error,
		CancelRequested: t.CancelRequested,
		RunAt:           utc(t.RunAt),
		CreatedAt:       utc(t.CreatedAt),
		UpdatedAt:       utc(t.UpdatedAt),
		FinishedAt:      utc(t.FinishedAt),
		HistoryDropped:  t.HistoryDropped,
		Snoozes:         t.Snoozes,
		Run:             int(t.Run) + 1,
		Queue:           t.Queue,
		Fence:           t.Fence,
	}
	if t.Status == lease.StatusRunning {
		info.LeaseOwner = t.LeaseOwner
		info.LeaseUntil = utc(t.LeaseUntil)
		info.LeaseFence = t.Fence
	}
	info.Parent, info.Wait, info.WaitFor, info.Ended, info.WaitUntil = t.Parent, string(t.Wait), t.WaitFor, t.Ended, utc(t.WaitUntil)
	if t.Status == lease.StatusWaiting && t.Wait == lease.WaitCallback && t.HeartbeatTimeout > 0 && !t.BeatUntil.IsZero() {
		info.LastHeartbeat, info.HeartbeatUntil = utc(t.BeatUntil.Add(-t.HeartbeatTimeout)), utc(t.BeatUntil)
	}
	for _, w := range t.Waiters {
		info.Waiters = append(info.Waiters, w.ID)
	}
	for _, st := range t.Steps {
		info.Steps = append(info.Steps, st.Name)
	}
	for _, l := range t.Then {
		info.Then = append(info.Then, l.ID)
	}
	info.Metadata = maps.Clone(t.Metadata)
	for _, a := range t.History {
		info.History = append(info.History, AttemptInfo{
			Attempt: a.Attempt, Status: Status(a.Status), Error: a.Error, At: utc(a.At),
		})
	}
	return info
}
