package leaseholdtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
)

// Match decides whether a task's payload is the one RequireEnqueued
// looks for: nil if it is, else an error saying why not, which the
// failure message shows. Payload builds one from a predicate on the
// decoded payload; any other value given as RequireEnqueued's payload is
// compared as JSON.
type Match func(payload json.RawMessage) error

// Payload returns a Match that decodes a task's payload into P and asks
// ok: for a payload whose every field a test does not know (an id made at
// run time, say), or a check that is not equality.
//
//	leaseholdtest.Payload(func(o Order) bool { return o.Total > 100 })
func Payload[P any](ok func(P) bool) Match {
	return func(raw json.RawMessage) error {
		var p P
		if err := json.Unmarshal(orNull(raw), &p); err != nil {
			return fmt.Errorf("does not decode into %T: %v", p, err)
		}
		if !ok(p) {
			return fmt.Errorf("%s is refused by the predicate", orNull(raw))
		}
		return nil
	}
}

// RequireEnqueued fails t unless exactly one task of want.Kind was
// enqueued in env that matches want, and returns it as it is now. A task
// counts however it was made: by Env.Enqueue, by the Env's Client, or by
// a handler (a child a workflow spawned, a chain's link). want.Payload is
// nil for any payload, a Match, or a value compared with the task's
// payload as JSON (so field order and spacing do not matter; a
// json.RawMessage is taken as is). Of the other fields, those set are
// compared with the task: ID, MaxAttempts, Queue, Delay and RunAt (the
// task's run time, from its creation for Delay), After and AfterAny (its
// dependencies); the rest are ignored. The failure lists every task of
// the kind with how it differs, as -want +got lines.
func RequireEnqueued(t testing.TB, env *Env, want leasehold.Submission) TaskState {
	t.Helper()
	kind := want.Kind
	match, err := matcher(want.Payload)
	if err != nil {
		t.Fatalf("leaseholdtest.RequireEnqueued: %v", err)
		return TaskState{}
	}
	var (
		found     []TaskState
		diffs     []string
		others    = map[string]int{}
		all, err2 = env.createdTasks()
	)
	if err2 != nil {
		t.Fatalf("leaseholdtest.RequireEnqueued: %v", err2)
		return TaskState{}
	}
	for _, s := range all {
		if s.Kind != kind {
			others[s.Kind]++
			continue
		}
		d := differences(s, want, match)
		if len(d) == 0 {
			found = append(found, s)
			continue
		}
		diffs = append(diffs, fmt.Sprintf("  task %s (%s):\n%s", s.ID, s.Status, strings.Join(d, "\n")))
	}
	switch {
	case len(found) == 1:
		return found[0]
	case len(found) > 1:
		ids := make([]string, len(found))
		for i, s := range found {
			ids[i] = s.ID
		}
		t.Fatalf("leaseholdtest.RequireEnqueued: %d tasks of kind %q match, want exactly one: %s (tell them apart by payload or with an ID)",
			len(found), kind, strings.Join(ids, ", "))
		return TaskState{}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "leaseholdtest.RequireEnqueued: no task of kind %q enqueued with %s", kind, describe(want.Payload, want))
	if len(diffs) == 0 {
		fmt.Fprintf(&b, "\n  no task of kind %q was enqueued at all", kind)
	} else {
		fmt.Fprintf(&b, "\n  the %d of kind %q differ (-want +got):\n%s", len(diffs), kind, strings.Join(diffs, "\n"))
	}
	if len(others) > 0 {
		kinds := slices.Sorted(func(yield func(string) bool) {
			for k := range others {
				if !yield(k) {
					return
				}
			}
		})
		parts := make([]string, len(kinds))
		for i, k := range kinds {
			parts[i] = fmt.Sprintf("%q ×%d", k, others[k])
		}
		fmt.Fprintf(&b, "\n  tasks of other kinds: %s", strings.Join(parts, ", "))
	}
	t.Fatalf("%s", b.String())
	return TaskState{}
}

// RequireState fails t unless task id exists and is in status, and
// returns it. The failure says what the task is instead: its status,
// attempt, error, wait and the history of its attempts.
func RequireState(t testing.TB, env *Env, id string, status leasehold.Status) TaskState {
	t.Helper()
	s, err := env.Task(id)
	if err != nil {
		t.Fatalf("leaseholdtest.RequireState: %v", err)
		return TaskState{}
	}
	if s.Status == status {
		return s
	}
	var b strings.Builder
	fmt.Fprintf(&b, "leaseholdtest.RequireState: task %s (kind %q) is not %s\n  -status %s\n  +status %s", id, s.Kind, status, status, s.Status)
	fmt.Fprintf(&b, "\n   attempt %d of %d", s.Attempt, s.MaxAttempts)
	if s.Error != "" {
		fmt.Fprintf(&b, ", error %q", s.Error)
	}
	if s.Wait != "" {
		fmt.Fprintf(&b, ", waits for %s %v", s.Wait, s.WaitFor)
	}
	for _, a := range s.History {
		fmt.Fprintf(&b, "\n   history: attempt %d %s at %s", a.Attempt, a.Status, a.At.Format(time.RFC3339))
		if a.Error != "" {
			fmt.Fprintf(&b, ": %q", a.Error)
		}
	}
	t.Fatalf("%s", b.String())
	return TaskState{}
}

// createdTasks returns every task created in the Env, oldest first.
func (e *Env) createdTasks() ([]TaskState, error) {
	e.mu.Lock()
	ids := slices.Clone(e.order)
	e.mu.Unlock()
	out := make([]TaskState, 0, len(ids))
	for _, id := range ids {
		s, err := e.Task(id)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// matcher turns RequireEnqueued's payload into a Match (nil: any).
func matcher(payload any) (Match, error) {
	switch p := payload.(type) {
	case nil:
		return nil, nil
	case Match:
		return p, nil
	case func(json.RawMessage) error:
		return p, nil
	}
	want, err := canonical(payload)
	if err != nil {
		return nil, fmt.Errorf("the payload wanted does not encode as JSON: %v", err)
	}
	return func(raw json.RawMessage) error {
		got, err := canonical(orNull(raw))
		if err != nil || !bytes.Equal(got, want) {
			return fmt.Errorf("-%s +%s", want, got)
		}
		return nil
	}, nil
}

// canonical is v's JSON with object keys sorted and no spacing: two
// payloads are the same if their canonical forms are.
func canonical(v any) ([]byte, error) {
	raw, ok := v.(json.RawMessage)
	if !ok {
		b, err := json.Marshal(v)
		if err != nil {
			return nil, err
		}
		raw = b
	}
	var decoded any
	if err := json.Unmarshal(raw, &decoded); err != nil {
		return nil, err
	}
	return json.Marshal(decoded) // maps encode with sorted keys
}

func orNull(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage("null")
	}
	return raw
}

// differences lists how s differs from the task wanted, one "-want +got"
// line each; none when it matches.
func differences(s TaskState, want leasehold.Submission, match Match) []string {
	var d []string
	field := func(name string, w, g any) {
		if !reflect.DeepEqual(w, g) {
			d = append(d, fmt.Sprintf("    %s: -%v +%v", name, w, g))
		}
	}
	if match != nil {
		if err := match(s.Payload); err != nil {
			d = append(d, "    payload: "+err.Error())
		}
	}
	if want.ID != "" {
		field("id", want.ID, s.ID)
	}
	if want.MaxAttempts != 0 {
		field("max attempts", want.MaxAttempts, s.MaxAttempts)
	}
	if want.Queue != "" {
		field("queue", want.Queue, s.Queue)
	}
	switch {
	case !want.RunAt.IsZero():
		field("run at", want.RunAt.UTC(), s.RunAt.UTC())
	case want.Delay != 0:
		field("delay", want.Delay, s.RunAt.Sub(s.CreatedAt))
	}
	if len(want.After) > 0 {
		field("after", want.After, s.WaitFor)
	}
	return d
}

// describe is what RequireEnqueued looked for, for its failure message.
func describe(payload any, want leasehold.Submission) string {
	var parts []string
	switch p := payload.(type) {
	case nil:
		parts = append(parts, "any payload")
	case Match, func(json.RawMessage) error:
		parts = append(parts, "a payload the Match accepts")
	default:
		if b, err := canonical(p); err == nil {
			parts = append(parts, "payload "+string(b))
		}
	}
	if want.ID != "" {
		parts = append(parts, "id "+want.ID)
	}
	if want.MaxAttempts != 0 {
		parts = append(parts, fmt.Sprintf("max attempts %d", want.MaxAttempts))
	}
	if want.Queue != "" {
		parts = append(parts, "queue "+want.Queue)
	}
	if !want.RunAt.IsZero() {
		parts = append(parts, "run at "+want.RunAt.UTC().Format(time.RFC3339))
	}
	if want.Delay != 0 {
		parts = append(parts, "delay "+want.Delay.String())
	}
	if len(want.After) > 0 {
		parts = append(parts, fmt.Sprintf("after %v", want.After))
	}
	return strings.Join(parts, ", ")
}
