package rules

import (
	"fmt"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
)

// A heartbeat (BeatCallback) keeps a callback wait with a heartbeat timeout
// alive: it moves the wait's heartbeat deadline (Task.BeatUntil) to the
// time of the beat plus the timeout, in one conditional write, and nothing
// else (no sweep entry moves: the worker that meets the entry at the old
// heartbeat deadline moves it on, docs/workflows.md "Heartbeats").

// BeatLands reports whether a heartbeat with e's token (its ID, Fence,
// Attempt and Nonce or Hash; the rest is unused) may land on t at now: the
// condition both stores evaluate. The wait must have a heartbeat timeout
// and neither of its deadlines may have passed: a beat after one of them
// comes too late to keep the wait, which is timing out.
func BeatLands(e lease.WaitEnd, t lease.Task, now time.Time) bool {
	return EndWaitLands(e, t) && t.HeartbeatTimeout > 0 && now.Before(t.BeatUntil) && now.Before(t.WaitUntil)
}

// ClassifyBeat explains why a heartbeat with e's token did not land on old
// at now: a wrong token (ErrBadCallback), a wait with no heartbeat timeout
// (ErrInvalid), a wait past a deadline or ended otherwise (ErrNotWaiting),
// or an ended task (*FinishedError).
func ClassifyBeat(e lease.WaitEnd, old *lease.Task, now time.Time) error {
	if err := ClassifyEndWait(e, old); old == nil || !EndWaitLands(e, *old) {
		return heartbeatOp(err)
	}
	return classifyWait("heartbeat", e.ID, old, func(t lease.Task) error {
		if t.HeartbeatTimeout <= 0 {
			return fmt.Errorf("%w: the callback wait has no heartbeat timeout, so a heartbeat keeps nothing alive", lease.ErrInvalid)
		}
		at, _ := t.CallbackDeadline()
		return fmt.Errorf("%w: the wait's deadline %s passed before the heartbeat came: it is timing out", lease.ErrNotWaiting, at.UTC().Format(time.RFC3339Nano))
	})
}

// heartbeatOp names the operation of a callback's error as a heartbeat's.
func heartbeatOp(err error) error {
	if we, ok := err.(*lease.WaitError); ok {
		c := *we
		c.Op = "heartbeat"
		return &c
	}
	return err
}
