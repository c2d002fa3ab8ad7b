package dynamo

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/rules"
)

// notEndedCond holds while the task has not ended.
const notEndedCond = "NOT (#status IN (:succeeded, :failed, :cancelled))"

func terminalValues(values map[string]types.AttributeValue) map[string]types.AttributeValue {
	values[":succeeded"] = avS(string(lease.StatusSucceeded))
	values[":failed"] = avS(string(lease.StatusFailed))
	values[":cancelled"] = avS(string(lease.StatusCancelled))
	return values
}

// Suspend implements lease.Store.
func (s *Store) Suspend(ctx context.Context, l lease.Lease, w lease.Wait) (lease.Task, error) {
	if err := l.Validate(); err != nil {
		return lease.Task{}, fmt.Errorf("suspend: %w", err)
	}
	if err := w.Validate(); err != nil {
		return lease.Task{}, fmt.Errorf("suspend %s: %w", l.TaskID, err)
	}
	e := s.end(l, lease.StatusWaiting, "", s.now())
	e.text(attrError, "") // an earlier attempt's: the history keeps it
	e.set = append(e.set, "#wait = :wait")
	e.values[":wait"] = avS(string(w.Mode))
	// The wait's deadline, and the sweep entry that ends the wait there.
	until, dispatchAt := w.Times(s.now())
	e.set = append(e.set, "#wait_until = :wait_until")
	e.values[":wait_until"] = avMillis(until)
	if dispatchAt.IsZero() {
		e.remove = append(e.remove, "#sweep_shard", "#sweep_at")
	} else {
		e.set = append(e.set, "#sweep_shard = :sweep_shard", "#sweep_at = :sweep_at")
		e.values[":sweep_shard"] = avS(lease.Shard(l.TaskID))
		e.values[":sweep_at"] = avMillis(dispatchAt)
	}
	switch w.Mode {
	case lease.WaitChildren:
		// A suspension is progress: the count of attempts starts again
		// (Store.Suspend), so the resumed run is attempt 1.
		name, v, other := waitForValue(l.TaskID, w.For)
		e.set = append(e.set, "#"+name+" = :wait_for", "#attempt = :zero")
		e.values[":wait_for"] = v
		e.values[":zero"] = avN(0)
		e.remove = append(e.remove, "#callback", "#"+other)
	case lease.WaitCallback:
		e.set = append(e.set, "#callback = :callback")
		e.values[":callback"] = avS(lease.CallbackHash(w.Nonce))
		e.remove = append(e.remove, "#wait_for", "#wait_span")
		if w.Step != "" {
			e.set = append(e.set, "#callback_step = :callback_step")
			e.values[":callback_step"] = avS(w.Step)
		} else {
			e.remove = append(e.remove, "#callback_step")
		}
	}
	if w.Heartbeat > 0 {
		e.set = append(e.set, "#beat_timeout = :beat_timeout", "#beat_until = :beat_until")
		e.values[":beat_timeout"] = avN(w.Heartbeat.Milliseconds())
		e.values[":beat_until"] = avMillis(w.BeatUntil(s.now()))
	} else {
		e.remove = append(e.remove, "#beat_timeout", "#beat_until")
	}
	if w.Mode != lease.WaitCallback {
		e.remove = append(e.remove, "#callback_step")
	}
	e.text(attrWaitNote, w.Note)
	return s.update(ctx, "suspend", l.TaskID, e.cond, e.expression(), e.values,
		func(old *lease.Task) error { return rules.ClassifyHeld("suspend", l, old) })
}

// Watch implements lease.Store.
func (s *Store) Watch(ctx context.Context, id string, w lease.Waiter) (lease.Task, error) {
	if noSuchID(id) {
		return lease.Task{}, fmt.Errorf("watch %s: %w", id, lease.ErrNotFound)
	}
	if _, err := lease.ParseWaiter(w.String()); err != nil {
		return lease.Task{}, fmt.Errorf("watch %s: %w", id, err)
	}
	values := terminalValues(map[string]types.AttributeValue{
		":waiter":      &types.AttributeValueMemberSS{Value: []string{w.String()}},
		":waiter_s":    avS(w.String()),
		":max_waiters": avN(lease.MaxWaiters),
	})
	// A waiter registered already may register again (a redelivered
	// token redoes its registrations) when the set is full.
	return s.update(ctx, "watch", id,
		"attribute_exists(#id) AND "+notEndedCond+" AND (attribute_not_exists(#waiters) OR size(#waiters) < :max_waiters OR contains(#waiters, :waiter_s))",
		"ADD #waiters :waiter",
		values,
		func(old *lease.Task) error { return rules.ClassifyWatch(id, old) })
}

// Notify implements lease.Store.
func (s *Store) Notify(ctx context.Context, w lease.Waiter, ended lease.Task) (lease.Task, error) {
	if noSuchID(w.ID) {
		return lease.Task{}, fmt.Errorf("notify %s: %w", w.ID, lease.ErrNotFound)
	}
	now := s.now()
	// The ended id goes into the waiter's set in its compact form
	// (dynamo_waitids.go); a waiter that heard of it in either form heard.
	attr, elem := endedEntry(w.ID, ended.ID)
	values := map[string]types.AttributeValue{
		":ended": &types.AttributeValueMemberSS{Value: []string{elem}},
		":id":    avS(ended.ID),
		":elem":  avS(elem),
		":now":   avMillis(now),
	}
	var cond, upd string
	if rules.NotifyCancels(w, ended) {
		cond = "#status = :waiting"
		upd = "SET #status = :cancelled, #error = :reason, #finished_at = :now, #updated_at = :now" + s.listFailed(w.ID, lease.StatusCancelled, values)
		values[":waiting"] = avS(string(lease.StatusWaiting))
		values[":cancelled"] = avS(string(lease.StatusCancelled))
		values[":reason"] = avS(rules.DependencyReason(ended))
		if s.opts.Retention > 0 {
			upd += ", #expires_at = :expires_at"
			values[":expires_at"] = avN(now.Add(s.opts.Retention).Unix())
		}
		upd += " ADD #" + attr + " :ended REMOVE #sweep_shard, #sweep_at, #wait_until, #callback, #callback_step"
	} else {
		cond = "attribute_exists(#id) AND " + notEndedCond + " AND NOT contains(#ended, :id) AND NOT contains(#ended_sub, :elem)"
		upd = "SET #updated_at = :now ADD #" + attr + " :ended"
		terminalValues(values)
	}
	return s.updateOld(ctx, "notify", w.ID, cond, upd, values,
		func(old *lease.Task) error { return rules.ClassifyNotify(w, ended, old) })
}

// Resume implements lease.Store.
func (s *Store) Resume(ctx context.Context, id string, fence int64, owner string) (lease.Task, error) {
	if noSuchID(id) {
		return lease.Task{}, fmt.Errorf("resume %s: %w", id, lease.ErrNotFound)
	}
	now := s.now()
	values := map[string]types.AttributeValue{
		":waiting": avS(string(lease.StatusWaiting)),
		":fence":   avN(fence),
		":now":     avMillis(now),
	}
	cond := "#status = :waiting AND #fence = :fence"
	var upd string
	if owner == "" {
		upd = "SET #status = :pending, #run_at = :now, #updated_at = :now"
		values[":pending"] = avS(string(lease.StatusPending))
	} else {
		cond += " AND #attempt < #max_attempts"
		upd = "SET #status = :running, #lease_owner = :owner, #lease_until = :until, " +
			"#attempt = #attempt + :one, #fence = #fence + :one, #run_at = :now, #updated_at = :now"
		values[":running"] = avS(string(lease.StatusRunning))
		values[":owner"] = avS(owner)
		values[":until"] = avMillis(now.Add(s.opts.LeaseDuration))
		values[":one"] = avN(1)
	}
	upd += " REMOVE #ended, #ended_sub, #wait_until, #callback, #callback_step, #sweep_shard, #sweep_at"
	return s.updateOld(ctx, "resume", id, cond, upd, values,
		func(old *lease.Task) error {
			if old != nil && old.Status == lease.StatusWaiting && old.Fence == fence && old.Attempt >= old.MaxAttempts {
				return &lease.ExhaustedError{Task: *old}
			}
			return rules.ClassifyResume(id, old)
		})
}

// EndWait implements lease.Store.
func (s *Store) EndWait(ctx context.Context, e lease.WaitEnd) (lease.Task, error) {
	if err := e.Validate(); err != nil {
		return lease.Task{}, fmt.Errorf("callback %s: %w", e.ID, err)
	}
	now := s.now()
	msg := lease.Truncate(e.Error, lease.MaxErrorBytes)
	en := &ending{
		cond: "#status = :waiting AND #wait = :callback_wait AND #fence = :fence AND #callback = :nonce AND #attempt = :attempt",
		set:  []string{"#status = :status", "#updated_at = :now"},
		values: withCall(map[string]types.AttributeValue{
			":waiting":       avS(string(lease.StatusWaiting)),
			":callback_wait": avS(string(lease.WaitCallback)),
			":fence":         avN(e.Fence),
			":nonce":         avS(e.CallbackHash()),
			":attempt":       avN(int64(e.Attempt)),
			":status":        avS(string(e.Status)),
			":now":           avMillis(now),
		}),
		remove: []string{"#wait_until", "#callback", "#callback_step", "#beat_timeout", "#beat_until"},
	}
	status, runAt, resumed := e.Status, e.RunAt, false
	if step := e.ResumeStep(); step != "" {
		en.cond += " AND #callback_step = :callback_step"
		en.values[":callback_step"] = avS(step)
		if status != lease.StatusPending && !e.TimedOut {
			// The answer becomes the step, and the task runs again at once,
			// its count of attempts started again (Store.Suspend).
			answer := rules.CallbackAnswer(status, e.Result, msg)
			en.set = append(en.set, appendStep(en.values, lease.Step{Name: step, Result: answer}), "#attempt = :zero")
			en.values[":zero"] = avN(0)
			en.add = append(en.add, addStepName)
			status, runAt, msg, resumed = lease.StatusPending, now, "", true
			en.values[":status"] = avS(string(status))
		}
	} else {
		en.cond += " AND attribute_not_exists(#callback_step)"
	}
	if !resumed { // a resumed attempt goes on: no history entry yet
		en.appendHistory(nil, false, lease.Attempt{Attempt: e.Attempt, Fence: e.Fence, Status: e.Status, Error: msg, At: now})
	}
	en.text(attrError, msg)
	switch status {
	case lease.StatusSucceeded:
		en.text(attrResult, string(e.Result))
	case lease.StatusPending:
		runAt := lease.Millis(runAt)
		en.set = append(en.set, "#run_at = :run_at", "#sweep_shard = :sweep_shard", "#sweep_at = :sweep_at")
		en.values[":run_at"] = avMillis(runAt)
		en.values[":sweep_shard"] = avS(lease.Shard(e.ID))
		en.values[":sweep_at"] = avMillis(runAt.Add(s.opts.DispatchGrace))
	}
	if status.Terminal() {
		en.set = append(en.set, "#finished_at = :now"+s.listFailed(e.ID, status, en.values))
		en.remove = append(en.remove, "#sweep_shard", "#sweep_at")
		if s.opts.Retention > 0 {
			en.set = append(en.set, "#expires_at = :expires_at")
			en.values[":expires_at"] = avN(now.Add(s.opts.Retention).Unix())
		}
	}
	return s.updateOld(ctx, "callback", e.ID, en.cond, en.expression(), en.values,
		func(old *lease.Task) error { return rules.ClassifyEndWait(e, old) })
}

// updateOld is update that also returns the item a failed condition saw,
// for the callers that act on it (a waiter notified twice, a resume that
// someone else made).
func (s *Store) updateOld(ctx context.Context, op, id, cond, upd string,
	values map[string]types.AttributeValue, classify func(old *lease.Task) error,
) (lease.Task, error) {
	var seen lease.Task
	t, err := s.update(ctx, op, id, cond, upd, values, func(old *lease.Task) error {
		if old != nil {
			seen = *old
		}
		return classify(old)
	})
	if err != nil {
		return seen, err
	}
	return t, nil
}

// attrStepNames is the string set of the names in the steps list: a
// checkpoint's condition that its step is not recorded yet reads it.
const attrStepNames = "step_names"

// appendStep puts st's values in values and returns the SET clause that
// appends it to the steps list; with addStepName (an ADD clause) the
// step-name set holds its name too. A checkpoint and a resumable
// callback's answer record a step alike.
func appendStep(values map[string]types.AttributeValue, st lease.Step) string {
	values[":step"] = &types.AttributeValueMemberL{Value: []types.AttributeValue{stepItem(st)}}
	values[":no_steps"] = &types.AttributeValueMemberL{Value: []types.AttributeValue{}}
	values[":step_names"] = &types.AttributeValueMemberSS{Value: []string{st.Name}}
	return "#steps = list_append(if_not_exists(#steps, :no_steps), :step)"
}

// addStepName is the ADD clause that records an appended step's name.
const addStepName = "#step_names :step_names"

// errStepRecorded: a checkpoint found its step recorded under its lease.
var errStepRecorded = errors.New("step recorded")

// Checkpoint implements lease.Store. A step is recorded at most once: the write
// is conditioned on its name not being in the step-name set, so the SDK's
// retry of a checkpoint whose response was lost, or a second checkpoint of
// the step, finds it recorded and returns the task without appending it
// again.
func (s *Store) Checkpoint(ctx context.Context, l lease.Lease, st lease.Step) (lease.Task, error) {
	if err := l.Validate(); err != nil {
		return lease.Task{}, fmt.Errorf("checkpoint: %w", err)
	}
	step := st.Name
	values := heldValues(l)
	appendSet := appendStep(values, st)
	values[":step_name"] = avS(step)
	var seen lease.Task
	t, err := s.update(ctx, "checkpoint", l.TaskID, heldCond+" AND NOT contains(#step_names, :step_name) AND attribute_not_exists(#spill_from)",
		"SET "+appendSet+" ADD "+addStepName,
		values,
		func(old *lease.Task) error {
			if old != nil && rules.Holds(*old, l) {
				if _, ok := old.StepResult(step); ok {
					seen = *old
					return errStepRecorded
				}
				if old.Spilled {
					return fmt.Errorf("checkpoint %s: %w", l.TaskID, errFrozen)
				}
			}
			return rules.ClassifyHeld("checkpoint", l, old)
		})
	if errors.Is(err, errStepRecorded) {
		return seen, nil
	}
	return t, err
}

// BeatCallback implements the heartbeat of a callback wait
// (rules.BeatLands): one conditional write that moves the wait's heartbeat
// deadline to now plus its heartbeat timeout. A retry after a lost answer
// lands again, which is the same beat.
func (s *Store) BeatCallback(ctx context.Context, e lease.WaitEnd) (lease.Task, error) {
	if err := e.Validate(); err != nil {
		return lease.Task{}, fmt.Errorf("heartbeat %s: %w", e.ID, err)
	}
	now := s.now()
	values := map[string]types.AttributeValue{
		":waiting":       avS(string(lease.StatusWaiting)),
		":callback_wait": avS(string(lease.WaitCallback)),
		":fence":         avN(e.Fence),
		":nonce":         avS(e.CallbackHash()),
		":attempt":       avN(int64(e.Attempt)),
		":now":           avMillis(now),
	}
	cond := "#status = :waiting AND #wait = :callback_wait AND #fence = :fence AND #callback = :nonce AND #attempt = :attempt" +
		" AND #beat_timeout > :zero AND #beat_until > :now AND #wait_until > :now"
	values[":zero"] = avN(0)
	if step := e.ResumeStep(); step != "" {
		cond += " AND #callback_step = :callback_step"
		values[":callback_step"] = avS(step)
	} else {
		cond += " AND attribute_not_exists(#callback_step)"
	}
	return s.updateOld(ctx, "heartbeat", e.ID, cond, "SET #beat_until = :now + #beat_timeout, #updated_at = :now", values,
		func(old *lease.Task) error { return rules.ClassifyBeat(e, old, now) })
}
