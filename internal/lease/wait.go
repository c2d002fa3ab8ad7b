package lease

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"
)

// StatusWaiting: the task holds no lease and waits for something outside
// itself: its children, its dependencies or a callback (Task.Wait says
// which). It is not claimable until the wait ends.
const StatusWaiting Status = "WAITING"

// WaitMode says what a WAITING task waits for. It is also how a waiter is
// registered on the tasks it waits for (Waiter.Mode), which decides what
// their end does to it.
type WaitMode string

const (
	// WaitChildren: the task spawned Task.WaitFor and resumes when every
	// one of them has ended, however it ended.
	WaitChildren WaitMode = "children"
	// WaitAfter: the task runs once every task in WaitFor has SUCCEEDED;
	// if one fails or is cancelled, the task is cancelled with the reason.
	WaitAfter WaitMode = "after"
	// WaitAfterAny: the task runs once every task in WaitFor has ended,
	// whatever the outcome.
	WaitAfterAny WaitMode = "after_any"
	// WaitCallback: an outside system ends the attempt with a callback
	// token (EndWait), or the attempt fails at Task.WaitUntil.
	WaitCallback WaitMode = "callback"
)

// Valid reports whether m is a known mode.
func (m WaitMode) Valid() bool {
	switch m {
	case WaitChildren, WaitAfter, WaitAfterAny, WaitCallback:
		return true
	}
	return false
}

// Limits of waits: they keep a waiting item well inside DynamoDB's 400 KB.
const (
	// MaxChildren bounds the children one suspension waits for.
	MaxChildren = 100
	// MaxAfter bounds a task's dependencies.
	MaxAfter = 20
	// MaxWaiters bounds how many tasks may wait for one task.
	MaxWaiters = 100
)

// Waiter is a task registered to hear of another task's end.
type Waiter struct {
	ID   string
	Mode WaitMode
}

// String is the waiter's entry in the waiters set: mode, a colon, the id.
func (w Waiter) String() string { return string(w.Mode) + ":" + w.ID }

// ParseWaiter reads a waiters-set entry.
func ParseWaiter(s string) (Waiter, error) {
	mode, id, ok := strings.Cut(s, ":")
	w := Waiter{ID: id, Mode: WaitMode(mode)}
	if !ok || !w.Mode.Valid() || w.Mode == WaitCallback || CheckID(id) != nil {
		return Waiter{}, fmt.Errorf("%w: waiter entry %q", ErrInvalid, s)
	}
	return w, nil
}

// Wait is how a holder suspends its task (Store.Suspend).
type Wait struct {
	Mode WaitMode // WaitChildren or WaitCallback
	// For lists the children (WaitChildren), in spawn order.
	For []string
	// Until is the wait's deadline: the callback's timeout
	// (WaitCallback, required), or when a wait for children ends FAILED
	// if they have not all ended (zero: DefaultWaitTimeout from now).
	Until time.Time
	// DispatchAt puts the waiting task in the sweep index: the sweep sends
	// it a token then, if it still waits. Zero means Until.
	DispatchAt time.Time
	// Carried says a message already on the queue, delayed until Until,
	// ends the wait (a callback's timeout token, sent before the
	// suspension): the task gets no sweep entry, which saves its two index
	// writes. DispatchAt must then be zero.
	Carried bool
	// Nonce is the callback token's secret part (WaitCallback). The store
	// keeps only CallbackHash(Nonce).
	Nonce string
	// Step makes a callback wait resumable: its answer is recorded as the
	// step so named and the task runs again (as the same attempt) to read
	// it, instead of ending with it. Nonce must then be
	// ResumableNonce(secret, Step), which binds the step to the token.
	Step string
	// Heartbeat is a callback wait's heartbeat timeout (zero: none): the
	// wait also ends, its attempt failed, when no heartbeat
	// (BeatCallback) came within it since the suspension or the last
	// beat. The sweep entry sits at the earlier of Until and the first
	// heartbeat deadline, so the wait cannot be Carried.
	Heartbeat time.Duration
	// Note is the handler's own state for the run after the wait (a
	// map's progress between its waves: workflow.Map), kept as
	// Task.WaitNote until the next suspension; at most MaxWaitNoteBytes.
	Note string
}

// MaxWaitNoteBytes bounds Wait.Note.
const MaxWaitNoteBytes = 2 << 10

// MaxCallbackAnswerBytes bounds the result of a resumable callback (its
// answer becomes a step, and steps share MaxStepsBytes).
const MaxCallbackAnswerBytes = 16 << 10

// resumeSep separates a callback token's secret (or the kept hash, in an
// operator's answer) from the step of a resumable wait.
const resumeSep = "~"

// ResumableNonce is the nonce of a resumable callback wait's token: the
// secret, then the step its answer is recorded as. The store keeps the
// hash of the whole, so the step cannot be changed in a token.
func ResumableNonce(secret, step string) string {
	return secret + resumeSep + base64.RawURLEncoding.EncodeToString([]byte(step))
}

// OperatorNonce is what an operator's answer to t's callback wait (and a
// worker's end of it at its timeout) matches the task with, in place of a
// token's nonce (WaitEnd.Hash): the kept hash, and the step of a resumable
// wait. It is never accepted as a token's nonce.
func OperatorNonce(t Task) string {
	if t.CallbackStep == "" {
		return t.CallbackHash
	}
	return ResumableNonce(t.CallbackHash, t.CallbackStep)
}

// splitNonce splits a token's nonce (or an operator's hash) into its
// secret part and the step of a resumable wait ("" for none).
func splitNonce(s string) (secret, step string, err error) {
	secret, enc, ok := strings.Cut(s, resumeSep)
	if !ok {
		return s, "", nil
	}
	b, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil || len(b) == 0 || len(b) > MaxStepNameBytes || !utf8.Valid(b) {
		return "", "", fmt.Errorf("%w: the callback token's step part is not a base64url step name", ErrInvalid)
	}
	return secret, string(b), nil
}

// callbackHashPrefix starts every CallbackHash.
const callbackHashPrefix = "sha256:"

// CallbackHash is what a store keeps of a callback token's nonce
// (Task.CallbackHash): its SHA-256, so that reading the table is not
// enough to answer a wait. The nonce is random (128 bits or more), so an
// unsalted hash cannot be reversed by guessing.
func CallbackHash(nonce string) string {
	sum := sha256.Sum256([]byte(nonce))
	return callbackHashPrefix + base64.RawURLEncoding.EncodeToString(sum[:])
}

// IsCallbackHash reports whether s has the form of a CallbackHash, which
// a nonce drawn by a worker never has.
func IsCallbackHash(s string) bool { return strings.HasPrefix(s, callbackHashPrefix) }

// Validate checks w.
func (w Wait) Validate() error {
	if len(w.Note) > MaxWaitNoteBytes {
		return &TooLargeError{What: "wait note", Size: len(w.Note), Limit: MaxWaitNoteBytes}
	}
	switch w.Mode {
	case WaitChildren:
		if len(w.For) == 0 || len(w.For) > MaxChildren {
			return fmt.Errorf("%w: a suspension waits for 1..%d children, not %d", ErrInvalid, MaxChildren, len(w.For))
		}
		for _, id := range w.For {
			if err := CheckID(id); err != nil {
				return err
			}
		}
	case WaitCallback:
		if w.Until.IsZero() || w.Nonce == "" {
			return fmt.Errorf("%w: a callback wait needs a deadline and a nonce", ErrInvalid)
		}
		if _, step, err := splitNonce(w.Nonce); err != nil || step != w.Step {
			return fmt.Errorf("%w: a resumable callback wait's nonce must name its step (ResumableNonce)", ErrInvalid)
		}
		if w.Step != "" {
			if err := CheckOperation(0, w.Step, nil); err != nil {
				return err
			}
		}
		if w.Carried && !w.DispatchAt.IsZero() {
			return fmt.Errorf("%w: a carried wait has no dispatch time", ErrInvalid)
		}
		if w.Heartbeat < 0 || w.Heartbeat > 0 && w.Carried {
			return fmt.Errorf("%w: a heartbeat timeout is positive, on a wait with a sweep entry (not Carried)", ErrInvalid)
		}
	default:
		return fmt.Errorf("%w: cannot suspend to wait for %q", ErrInvalid, w.Mode)
	}
	if w.Heartbeat != 0 && w.Mode != WaitCallback {
		return fmt.Errorf("%w: only a callback wait has a heartbeat timeout", ErrInvalid)
	}
	return nil
}

// Complete reports whether every task t waits for has ended (children and
// dependencies), so that it may resume.
func Complete(t Task) bool {
	if t.Status != StatusWaiting || t.Wait == WaitCallback {
		return false
	}
	for _, id := range t.WaitFor {
		if !slices.Contains(t.Ended, id) {
			return false
		}
	}
	return true
}

// WaitEnd ends a callback wait from outside (Store.EndWait): its token's
// id, fence and nonce must match the waiting task.
type WaitEnd struct {
	ID    string
	Fence int64
	// Nonce is the token's nonce: the store compares CallbackHash(Nonce)
	// with the hash it kept.
	Nonce string
	// Hash, set instead of Nonce, is the kept hash itself (Task.CallbackHash)
	// for those who end a wait with write access to the store and never saw
	// the nonce: the worker whose wait timed out, an operator. A callback
	// message from a queue must never be turned into one.
	Hash string
	// Status is StatusSucceeded (the callback's result), StatusFailed (the
	// task fails for good), or StatusPending: the attempt failed (a timed
	// out callback) and is retried at RunAt. A resumable wait (ResumeStep)
	// records a succeeded or failed answer as its step instead
	// (CallbackAnswer) and makes the task PENDING to run at once, its
	// attempt handed back.
	Status Status
	// Attempt is the waiting attempt's number (a callback token carries
	// it): the history entry records it.
	Attempt int
	Result  []byte
	Error   string
	RunAt   time.Time
	// TimedOut marks the worker's end of a wait whose deadline passed: not
	// an answer, so a resumable wait records no step; the attempt fails
	// (StatusPending to retry, StatusFailed on the last attempt).
	TimedOut bool
}

// CallbackHash is the hash the store must hold for e to land.
func (e WaitEnd) CallbackHash() string {
	if e.Hash != "" {
		h, _, _ := strings.Cut(e.Hash, resumeSep)
		return h
	}
	return CallbackHash(e.Nonce)
}

// ResumeStep is the step a resumable wait records e's answer as ("" for a
// callback that ends the task): the store's CallbackStep must match it.
func (e WaitEnd) ResumeStep() string {
	_, step, _ := splitNonce(e.Nonce + e.Hash) // one of them is set
	return step
}

// Validate checks e.
func (e WaitEnd) Validate() error {
	switch {
	case CheckID(e.ID) != nil:
		return CheckID(e.ID)
	case e.Fence < 1 || (e.Nonce == "") == (e.Hash == ""):
		return fmt.Errorf("%w: a callback needs the waiting attempt's fence and either its nonce or its hash", ErrInvalid)
	}
	if _, _, err := splitNonce(e.Nonce + e.Hash); err != nil {
		return err
	}
	if e.ResumeStep() != "" && e.Status == StatusSucceeded && len(e.Result) > MaxCallbackAnswerBytes {
		return &TooLargeError{What: "result of a resumable callback", Size: len(e.Result), Limit: MaxCallbackAnswerBytes}
	}
	switch e.Status {
	case StatusSucceeded:
		return CheckResult(e.Result)
	case StatusFailed:
	case StatusPending:
		if e.RunAt.IsZero() {
			return fmt.Errorf("%w: a retried wait needs a run-at time", ErrInvalid)
		}
	default:
		return fmt.Errorf("%w: a wait cannot end in %q", ErrInvalid, e.Status)
	}
	return nil
}

// Errors of the wait transitions.
var (
	// ErrWaiting: the task is WAITING (see *WaitingError).
	ErrWaiting = errors.New("task is waiting")
	// ErrNotWaiting: a resume or callback found the task no longer (or not
	// yet) waiting under the expected fence.
	ErrNotWaiting = errors.New("task is not waiting")
	// ErrNotified: the waiter already heard of this task's end.
	ErrNotified = errors.New("waiter already notified")
	// ErrBadCallback: a callback token that does not match a waiting
	// attempt: forged, stale, or used already. The store's own writes
	// return it for a nonce that does not match the waiting attempt's.
	ErrBadCallback = errors.New("callback token rejected")
)

// WaitingError reports a claim of a WAITING task.
type WaitingError struct{ Task Task }

func (e *WaitingError) Error() string {
	return fmt.Sprintf("task %s is waiting for %s", e.Task.ID, e.Task.Wait)
}

func (e *WaitingError) Is(target error) bool { return target == ErrWaiting }

// WaitError reports a resume, notify or callback that did not land, with
// the item the write saw.
type WaitError struct {
	Op     string
	TaskID string
	Err    error // ErrNotWaiting, ErrNotified or ErrBadCallback
	Task   Task
}

func (e *WaitError) Error() string {
	return fmt.Sprintf("%s %s: %v (status %s, fence %d)", e.Op, e.TaskID, e.Err, e.Task.Status, e.Task.Fence)
}

func (e *WaitError) Unwrap() error { return e.Err }
