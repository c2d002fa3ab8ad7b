// Package replay checks a build's handlers against the recorded histories
// of tasks in flight, before that build is deployed: each history (a
// task's recorded operations, its payload and what it waits in, as a file
// of JSON) is replayed through the handler of its kind with nothing run
// beyond it (no step's function, no write, no read), and every run that
// diverges from its history, or fails, is reported as the worker would
// hold or fail it. `leasehold replay` exports the histories from the
// table (admin's Histories), and leaseholdtest.Replay replays them in a
// test of the build that carries the handlers.
package replay

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
)

// Format is the version of the history file this build writes and reads.
const Format = 1

// History is a task's history as a file holds it.
type History struct {
	// Format is the file's version (Format); a file of another version is
	// refused, not misread.
	Format   int               `json:"leasehold_history"`
	ID       string            `json:"id"`
	Kind     string            `json:"kind"`
	Status   lease.Status      `json:"status"`
	Attempt  int               `json:"attempt"`
	Fence    int64             `json:"fence"`
	Payload  json.RawMessage   `json:"payload,omitempty"`
	Metadata map[string]string `json:"metadata,omitempty"`
	// Steps are the recorded operations, oldest first.
	Steps []Step `json:"steps"`
	// Wait is what the task waits in, or last waited in; nil for none.
	Wait *Wait `json:"wait,omitempty"`
	// Exported is when the history was read: the replay's clock, so a
	// recorded sleep that had not passed then does not pass in the replay.
	Exported time.Time `json:"exported"`
	// Blobs are the values in the payload bucket that the payload and the
	// steps refer to (claimcheck references, kept in place), by their
	// keys, byte for byte (base64: a digest checks each on replay). The
	// export fills them in (Resolve) when it has the bucket, so a file
	// replays without AWS; nil when nothing refers to the bucket.
	Blobs map[string][]byte `json:"blobs,omitempty"`
}

// Step is a recorded operation: its name, its identity (lease.Step.Op)
// and its result, as JSON when it is JSON and otherwise as bytes (base64).
type Step struct {
	Name   string          `json:"name"`
	Op     string          `json:"op,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Bytes  []byte          `json:"bytes,omitempty"`
}

// Wait is a task's wait as its item keeps it (lease.Task's Wait fields).
type Wait struct {
	Mode lease.WaitMode `json:"mode"`
	For  []string       `json:"for,omitempty"`
	Note string         `json:"note,omitempty"`
	// CallbackStep is the step a resumable callback's answer is recorded
	// as.
	CallbackStep string `json:"callback_step,omitempty"`
}

// InFlight reports whether t is a workflow in flight, whose history a
// deploy must keep replaying: not ended, with a recorded operation or a
// wait.
func InFlight(t lease.Task) bool {
	switch t.Status {
	case lease.StatusPending, lease.StatusRunning, lease.StatusWaiting:
		return len(t.Steps) > 0 || t.Wait != ""
	}
	return false
}

// Of is the history of t as read at exported.
func Of(t lease.Task, exported time.Time) History {
	h := History{
		Format: Format, ID: t.ID, Kind: t.Kind, Status: t.Status, Attempt: t.Attempt, Fence: t.Fence,
		Metadata: t.Metadata, Steps: make([]Step, len(t.Steps)), Exported: exported.UTC(),
	}
	if len(t.Payload) > 0 {
		h.Payload = json.RawMessage(t.Payload)
	}
	for i, st := range t.Steps {
		h.Steps[i] = Step{Name: st.Name, Op: st.Op}
		switch {
		case len(st.Result) == 0:
		case json.Valid(st.Result):
			h.Steps[i].Result = json.RawMessage(st.Result)
		default:
			h.Steps[i].Bytes = st.Result
		}
	}
	if t.Wait != "" {
		h.Wait = &Wait{Mode: t.Wait, For: t.WaitFor, Note: t.WaitNote, CallbackStep: t.CallbackStep}
	}
	return h
}

// Encode is h as a file holds it: indented JSON, ending with a newline.
func (h History) Encode() ([]byte, error) {
	b, err := json.MarshalIndent(h, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("history of %s: %w", h.ID, err)
	}
	return append(b, '\n'), nil
}

// ErrFormat: a file that is not a history this build reads.
var ErrFormat = errors.New("not a leasehold history")

// Decode reads a history file, refusing unknown fields, another format
// version, and a history without its task's id or kind.
func Decode(b []byte) (History, error) {
	var h History
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&h); err != nil {
		return History{}, fmt.Errorf("%w: %w", ErrFormat, err)
	}
	switch {
	case h.Format != Format:
		return History{}, fmt.Errorf("%w: format %d, this build reads format %d", ErrFormat, h.Format, Format)
	case h.ID == "" || h.Kind == "":
		return History{}, fmt.Errorf("%w: no task id or kind", ErrFormat)
	}
	for i, st := range h.Steps {
		if st.Name == "" {
			return History{}, fmt.Errorf("%w: operation %d has no name", ErrFormat, i+1)
		}
	}
	return h, nil
}

// task is the task h records, as the executor would claim it: its JSON
// values compact again, as they were stored (Encode indents them).
func (h History) task() lease.Task {
	t := lease.Task{
		ID: h.ID, Kind: h.Kind, Status: h.Status, Attempt: h.Attempt, Fence: h.Fence,
		Payload: compact(h.Payload), Metadata: h.Metadata, Steps: make([]lease.Step, len(h.Steps)),
	}
	for i, st := range h.Steps {
		t.Steps[i] = lease.Step{Name: st.Name, Op: st.Op, Result: compact(st.Result)}
		if len(st.Bytes) > 0 {
			t.Steps[i].Result = st.Bytes
		}
	}
	if h.Wait != nil {
		t.Wait, t.WaitFor, t.WaitNote, t.CallbackStep = h.Wait.Mode, h.Wait.For, h.Wait.Note, h.Wait.CallbackStep
	}
	return t
}

// compact is the JSON value b without the whitespace between its tokens;
// nil for none. b is valid JSON (Decode checked it).
func compact(b json.RawMessage) []byte {
	if len(b) == 0 {
		return nil
	}
	var out bytes.Buffer
	if json.Compact(&out, b) != nil {
		return b
	}
	return out.Bytes()
}
