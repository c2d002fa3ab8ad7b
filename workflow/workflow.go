// Package workflow is what a leasehold handler uses to be more than one
// attempt of one task: steps whose results are recorded once per task,
// durable sleeps (Sleep) and waits for a condition (WaitFor), children it
// fans out to and waits for, the outcomes of the tasks it depends on, and
// callbacks from outside systems.
//
// Every function here works inside a handler run by a leasehold.Worker (or
// by leaseholdtest.Env, which runs workflows in unit tests on a fake
// clock); elsewhere it returns an error saying so. A waiting
// task holds no lease and costs nothing until what it waits for happens:
// All, Map, WaitForCallback, Sleep and WaitFor return an error the handler
// returns, the worker records the wait in one conditional write, and the
// handler runs again, as the same attempt, when the wait ends; the await
// then returns what it waited for, recorded as a step. Steps make that
// re-run cheap: a step that finished returns its recorded result without
// running again.
//
//	func charge(ctx context.Context, t *leasehold.Task[Order]) (Receipt, error) {
//		auth, err := workflow.Step(ctx, "authorize", func(ctx context.Context) (string, error) {
//			return bank.Authorize(ctx, t.Payload.Card, t.Payload.Amount)
//		})
//		if err != nil {
//			return Receipt{}, err
//		}
//		if _, err := workflow.All(ctx, "deliver",
//			workflow.Child{Kind: "ship", Payload: t.Payload},
//			workflow.Child{Kind: "email", Payload: t.Payload},
//		); err != nil {
//			return Receipt{}, err // the task waits for its children
//		}
//		return Receipt{Auth: auth}, nil
//	}
//
// Dependencies between tasks are declared when they are enqueued, with
// leasehold.Submission.After and AfterAny; a dependent reads its
// dependencies' outcomes with Dependencies. docs/workflows.md has the
// whole picture, the limits and the prices.
package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"reflect"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/durable"
	"github.com/leasehold/leasehold/internal/lease"
)

// Child is a task a handler spawns with All or Map.
type Child struct {
	Kind string
	// Payload is encoded as JSON (a json.RawMessage passes through).
	Payload any
	// MaxAttempts: 0 takes the worker's default.
	MaxAttempts int
	// Queue names the child's queue; "" is the parent's.
	Queue string
}

// All spawns children as the await called name and returns their
// outcomes, in spawn order, once every one of them has ended. Until then
// it returns an error the handler must return: the task waits, holding no
// lease and costing nothing, and its handler runs again (as the same
// attempt) when the last child ends; the steps before the await replay
// their recorded results, and All returns the outcomes. They are the step
// "children:"+name, so every later run replays them too: read from the
// children while the wait stands, written (one checkpoint) only when the
// run goes on to another durable call or ends without ending the task.
//
// A handler may call All any number of times, with different names,
// between steps, sleeps and other waits:
//
//	outs, err := workflow.All(ctx, "ship", workflow.Child{Kind: "ship", Payload: order})
//	if err != nil {
//		return nil, err // the task waits for its children
//	}
//
// A name is 1 to 32 letters, digits, '-', '_' or '.', starting with a
// letter. Child i gets the id ChildIDIn(parent, name, i); inside a child
// context or branch, the name is prefixed with the space's path
// ("PARENT/@branch~NAME/i"), as Invoke's child is. One await spawns
// 1 to 100 children; their results together must fit a step (64 KiB for
// all of a task's steps), so keep them small: a larger fan-in is a Map,
// its results read a page at a time with MapResult.Outcomes. The wait lasts at most the
// worker's WaitTimeout (default 7 days), after which the task fails; see
// AllWithin.
func All(ctx context.Context, name string, children ...Child) ([]Outcome, error) {
	return AllWithin(ctx, name, 0, children...)
}

// AllWithin is All with a deadline for the wait (at most 365 days; 0 is
// the worker's WaitTimeout): if the children have not all ended within
// timeout, the task fails with the reason.
func AllWithin(ctx context.Context, name string, timeout time.Duration, children ...Child) ([]Outcome, error) {
	cs := make([]durable.Child, len(children))
	for i, c := range children {
		p, err := lease.EncodeJSON("payload", c.Payload)
		if err != nil {
			return nil, leasehold.Fail(fmt.Errorf("children %q: child %d: %w", name, i, err))
		}
		cs[i] = durable.Child{Kind: c.Kind, Payload: p, MaxAttempts: c.MaxAttempts, Queue: c.Queue}
	}
	raw, err := durable.AllOf(ctx, name, cs, timeout)
	if err != nil {
		return nil, err
	}
	var out []Outcome
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, leasehold.Fail(fmt.Errorf("children %q: recorded outcomes do not decode: %w", name, err))
	}
	return out, nil
}

// MapOptions tune Map.
type MapOptions struct {
	// MaxConcurrency is how many children run at once, 1 to 1,000
	// (default 10): a new one starts as soon as one ends.
	MaxConcurrency int
	// MinSuccessful ends the map once this many children have SUCCEEDED:
	// the children not started yet never run (0: every child runs).
	MinSuccessful int
	// ToleratedFailures ends the map, failed, once more children than
	// this have ended otherwise than SUCCEEDED (default 0: the first
	// failure ends it, unless ToleratedFailurePercentage is set).
	ToleratedFailures int
	// ToleratedFailurePercentage ends the map, failed, once more than
	// this percentage of its n children have failed (0 to 100). With
	// ToleratedFailures too, the smaller of the two applies.
	ToleratedFailurePercentage int
}

// MapResult is how a map ended.
type MapResult struct {
	// Total children asked for; Started, of those, the ones that ran
	// (the rest were never created).
	Total, Started int
	// Succeeded and Failed (any other end) count the children that ran.
	Succeeded, Failed int
	// Stopped says why it ended: "all" (every child ran),
	// "min_successful" or "failures".
	Stopped string
	// Failures are the first failed children (at most 5), with their
	// errors.
	Failures []Outcome

	// name is the map's, for Outcomes; "" in a MapResult that Map did not
	// return.
	name string
}

// Outcomes yields the outcomes of the map's children, child 0 first, one
// at a time: the map's whole fan-in, however large, is read in pages of
// 100 children (one DynamoDB BatchGetItem each, a large result read back
// from the payload bucket), and never more than one page is held. Call it
// in the run where Map returned r (from r, or from a *MapFailedError's
// Result), after Map:
//
//	total := 0
//	for o, err := range res.Outcomes(ctx) {
//		if err != nil {
//			return nil, err
//		}
//		var v int
//		if err := json.Unmarshal(o.Result, &v); err == nil {
//			total += v
//		}
//	}
//
// A child the map never started (its completion policy stopped it first)
// has the status NOT_STARTED and is not read; a child whose record expired
// is EXPIRED. Reading records nothing: the children have all ended and
// their records do not change, so every run reads the same outcomes, but
// a record that expires between two runs reads EXPIRED in the later one;
// a handler whose decision must outlive that folds the outcomes inside a
// Step (docs/workflows.md, "Reading 10,000 results"). An error (a read
// that failed) ends the sequence; returning it retries the attempt.
func (r MapResult) Outcomes(ctx context.Context) iter.Seq2[Outcome, error] {
	return func(yield func(Outcome, error) bool) {
		if r.name == "" {
			yield(Outcome{}, leasehold.Fail(errors.New("workflow: MapResult.Outcomes of a MapResult that workflow.Map did not return")))
			return
		}
		for o, err := range durable.OutcomesOf(ctx, r.name) {
			if err != nil {
				yield(Outcome{}, err)
				return
			}
			if !yield(Outcome{ID: o.ID, Status: leasehold.Status(o.Status), Result: o.Result, Error: o.Error}, nil) {
				return
			}
		}
	}
}

// MapFailedError is Map's error when more children failed than
// MapOptions.ToleratedFailures (or ToleratedFailurePercentage) allows. Map returns it as a permanent
// failure (leasehold.Fail): a handler that returns it fails its task
// without a retry; one that reads it with errors.As decides otherwise.
type MapFailedError struct {
	Name      string
	Tolerated int
	Result    MapResult
}

func (e *MapFailedError) Error() string {
	msg := fmt.Sprintf("map %q: %d of %d children failed (%d tolerated)", e.Name, e.Result.Failed, e.Result.Started, e.Tolerated)
	if len(e.Result.Failures) > 0 {
		f := e.Result.Failures[0]
		msg += fmt.Sprintf("; first: %s %s: %s", f.ID, f.Status, f.Error)
	}
	return msg
}

// Map runs n children, item(i) the i-th, at most MaxConcurrency at a
// time, a new one starting as soon as one ends, and returns how they
// ended once they all have, or once the completion policy of opts decides
// (as each child ends). It scales to 100,000 children: the map's state
// lives in items of its own, a few per map, never the whole fan-in, and
// item is called a batch at a time, ahead of the children. Like All, it
// returns an error the handler must return until it is over (the task
// waits, holding no lease); the handler runs again once per batch of
// items (not per child), replaying what came before, and Map's summary is
// recorded as the step "map:"+name.
//
//	res, err := workflow.Map(ctx, "resize", len(images), func(i int) workflow.Child {
//		return workflow.Child{Kind: "resize", Payload: images[i]}
//	}, workflow.MapOptions{MaxConcurrency: 50, ToleratedFailures: 10})
//	if err != nil {
//		return nil, err // waiting, or *MapFailedError
//	}
//
// Child i gets the id ChildIDIn(parent, name, i); MapResult.Outcomes
// reads their results, a page of 100 at a time. item must return the same child for the same i in every
// run (build it from the payload and recorded steps).
func Map(ctx context.Context, name string, n int, item func(i int) Child, opts MapOptions) (MapResult, error) {
	raw, err := durable.MapOf(ctx, name, n, func(i int) (durable.Child, error) {
		c := item(i)
		p, err := lease.EncodeJSON("payload", c.Payload)
		if err != nil {
			return durable.Child{}, err
		}
		return durable.Child{Kind: c.Kind, Payload: p, MaxAttempts: c.MaxAttempts, Queue: c.Queue}, nil
	}, durable.MapOptions{MaxConcurrency: opts.MaxConcurrency, MinSuccessful: opts.MinSuccessful, ToleratedFailures: opts.ToleratedFailures,
		ToleratedFailurePercentage: opts.ToleratedFailurePercentage})
	if err != nil {
		return MapResult{}, err
	}
	var sum struct {
		Total, Started, Succeeded, Failed int
		Stopped                           string
		Failures                          []Outcome
	}
	if err := json.Unmarshal(raw, &sum); err != nil {
		return MapResult{}, leasehold.Fail(fmt.Errorf("map %q: recorded summary does not decode: %w", name, err))
	}
	r := MapResult{Total: sum.Total, Started: sum.Started, Succeeded: sum.Succeeded, Failed: sum.Failed, Stopped: sum.Stopped, Failures: sum.Failures, name: name}
	if r.Stopped == durable.MapStoppedFailures {
		do := durable.MapOptions{ToleratedFailures: opts.ToleratedFailures, ToleratedFailurePercentage: opts.ToleratedFailurePercentage}
		return r, leasehold.Fail(&MapFailedError{Name: name, Tolerated: do.Tolerated(n), Result: r})
	}
	return r, nil
}

// ReadOutcomes reads the tasks ids (a map's children, say:
// ChildIDIn(parent, name, i)) from inside a handler, 100 to a read (one
// DynamoDB BatchGetItem), and returns their outcomes in the order given;
// a task that no longer exists (its record expired) is EXPIRED. It holds
// them all in one slice: for a map's whole fan-in, MapResult.Outcomes
// reads one page at a time.
func ReadOutcomes(ctx context.Context, ids ...string) ([]Outcome, error) {
	raw, err := durable.ReadOutcomesOf(ctx, ids)
	if err != nil {
		return nil, err
	}
	var out []Outcome
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// ChildIDIn is the id of the i-th child (from 0) of the await called name
// (All) of the task parent.
func ChildIDIn(parent, name string, i int) string { return durable.ChildIDIn(parent, name, i) }

// CallbackFailedError is what WaitForCallback returns for a callback that
// was failed (Client.FailCallback, `leasehold fail`, a failed callback
// message): the handler decides what a refusal means.
type CallbackFailedError struct {
	// Name is the WaitForCallback's name; Reason is the failure's.
	Name, Reason string
}

func (e *CallbackFailedError) Error() string {
	return fmt.Sprintf("callback %q failed: %s", e.Name, e.Reason)
}

// WaitForCallback waits for an outside system's answer, durably. The first
// run that reaches it draws a callback token for this attempt and calls
// submit with it (send it to whoever answers: an approver's e-mail, a
// partner's API), then returns an error the handler must return: the task
// waits, holding no lease, until the token is used. The answer is recorded
// as the step "callback:"+name and the handler runs again, as the same
// attempt; WaitForCallback then returns the result the callback carried
// (decoded into T), or a *CallbackFailedError for a failed callback, and
// so in every later run.
//
//	approval, err := workflow.WaitForCallback[Approval](ctx, "approval", 72*time.Hour,
//		func(ctx context.Context, token string) error { return mail.AskApproval(ctx, order, token) })
//	if err != nil {
//		return nil, err // waiting, or a refusal (*CallbackFailedError), or submit's error
//	}
//
// If no answer comes within timeout (at most 365 days), the attempt fails
// and is retried as after any failure; the retry calls submit again with a
// new token (an old token is refused). submit may thus run more than once
// for one wait: make it idempotent. An error of submit is returned as it
// is. A handler may wait for any number of callbacks, one at a time, under
// different names (as All's). A callback's result is at most 16 KiB.
//
// With HeartbeatTimeout(d) the outside system must also beat while it
// works (leasehold.Client.HeartbeatCallback with the token, `leasehold
// heartbeat`, or a {"v":1,"heartbeat":TOKEN} message): the wait ends, its
// attempt failed with "callback heartbeat timed out after d" and retried
// as after a timeout, when no beat came within d since the wait began or
// the last beat, although timeout has not passed.
func WaitForCallback[T any](ctx context.Context, name string, timeout time.Duration, submit func(ctx context.Context, token string) error, opts ...CallbackOption) (T, error) {
	var zero T
	var o callbackOptions
	for _, opt := range opts {
		opt(&o)
	}
	raw, err := durable.CallbackBeatingOf(ctx, name, timeout, o.heartbeat, submit)
	var failed *durable.CallbackFailedError
	if errors.As(err, &failed) {
		return zero, &CallbackFailedError{Name: failed.Name, Reason: failed.Reason}
	}
	if err != nil || len(raw) == 0 {
		return zero, err
	}
	return decoded[T](raw, fmt.Sprintf("callback %q: its result", name))
}

// CallbackOption changes how WaitForCallback waits.
type CallbackOption func(*callbackOptions)

// callbackOptions are WaitForCallback's options, as its CallbackOptions set
// them.
type callbackOptions struct {
	heartbeat time.Duration
}

// HeartbeatTimeout makes the callback wait end when no heartbeat came
// within d since the wait began or the last beat (WaitForCallback). d is
// at least a second and at most the wait's timeout; zero means no
// heartbeats (the default). Each beat costs one conditional write.
func HeartbeatTimeout(d time.Duration) CallbackOption {
	return func(o *callbackOptions) { o.heartbeat = d }
}

// Outcome is how a child or a dependency ended, as its waiter sees it.
type Outcome struct {
	ID     string           `json:"id"`
	Status leasehold.Status `json:"status"`
	Result json.RawMessage  `json:"result,omitempty"`
	Error  string           `json:"error,omitempty"`
}

// Dependencies returns the outcomes of the task's dependencies (enqueued
// with leasehold.Submission.After or AfterAny), in the order given, and
// false when it has none.
func Dependencies(ctx context.Context) ([]Outcome, bool) {
	if o, ok := outcomes(ctx, lease.WaitAfter); ok {
		return o, true
	}
	return outcomes(ctx, lease.WaitAfterAny)
}

// outcomes reads what the executor handed a resumed handler, when it
// waited in mode.
func outcomes(ctx context.Context, mode lease.WaitMode) ([]Outcome, bool) {
	r, ok := durable.WaitResultsOf(ctx)
	if !ok || r.Mode != mode {
		return nil, false
	}
	out := make([]Outcome, len(r.Tasks))
	for i, t := range r.Tasks {
		out[i] = Outcome{ID: t.ID, Status: leasehold.Status(t.Status), Error: t.Error}
		if len(t.Result) > 0 {
			out[i].Result = json.RawMessage(append([]byte(nil), t.Result...))
		}
	}
	return out, true
}

// Step runs fn as the step called name of the handler's task, once per task:
// the attempt that finishes it records its result (one write under the
// lease), and the call of that step in every later run (a retry, or a
// resume after a wait) returns the recorded result without running fn. A
// handler written as steps therefore resumes after a failure or a lost
// lease where it left off, as a durable function does. An error of fn
// records nothing and is returned as it is.
//
// Given a StepPolicy, Step tries fn under it instead: a failed try is
// tried again after the policy's delay, in this run where the delay is
// short, after a durable snooze otherwise, and the step fails the task
// when its tries run out (see StepPolicy). Its result is recorded as
// without a policy, so adding a policy to a step is no divergence; a
// policy's try records (at most once, or a long delay) come before it,
// so dropping a policy is one for a task that recorded some.
//
// Step names must be unique within a task and stable across attempts. A
// name is checked before fn runs: an invalid name, or one this run already
// called (and whose call did not fail), fails the task without running fn.
// Results are JSON, at most 64 KiB in all (see docs/limits.md), and stay in
// the task's item: every later write of the item is priced by its size, so
// keep them small (store big ones elsewhere and record their keys).
func Step[T any](ctx context.Context, name string, fn func(context.Context) (T, error), policy ...StepPolicy) (T, error) {
	var zero T
	// The step's identity is its name and its result's type: a replay
	// that finds another name, or another type, at the step's position
	// has diverged from the task's history.
	op := durable.OpStep + " " + reflect.TypeFor[T]().String()
	run := encoded(fmt.Sprintf("step %q", name), fn)
	var raw []byte
	var err error
	switch len(policy) {
	case 0:
		raw, err = durable.StepAs(ctx, name, op, run)
	case 1:
		raw, err = durable.StepPolicyOf(ctx, name, op, durable.StepPolicy(policy[0]), run)
	default:
		return zero, leasehold.Fail(fmt.Errorf("step %q: %d policies, want at most one", name, len(policy)))
	}
	if err != nil {
		return zero, err
	}
	return decoded[T](raw, fmt.Sprintf("step %q: recorded result", name))
}

// Sleep pauses the handler's task for d (at most 366 days), durably and
// holding no lease: while it sleeps the task is PENDING and costs nothing
// but its item. The first run that reaches a Sleep records its wake-up
// time, as a step, and Sleep returns an error the handler must return;
// every run from the wake-up on passes the Sleep at once, after replaying
// the steps before it. Write the handler as steps around its sleeps:
//
//	if _, err := workflow.Step(ctx, "send-invoice", sendInvoice); err != nil {
//		return nil, err
//	}
//	if err := workflow.Sleep(ctx, 72*time.Hour); err != nil {
//		return nil, err // the task sleeps; the handler runs again in 3 days
//	}
//	return workflow.Step(ctx, "remind", remind)
//
// The n-th Sleep of a run is the step "sleep#n", so a handler must reach
// its sleeps in the same order in every run, as it names its steps the
// same. A sleep hands the attempt back: it is not a retry. Its cost: the
// step's checkpoint (one write under the lease) and the release (one
// write); a wake-up within SQS's 15 minutes comes as a delayed message,
// a later one from the recovery sweep, with no message in between; then a
// claim as for any run. docs/workflows.md#sleep-a-durable-pause has the
// measured cost.
func Sleep(ctx context.Context, d time.Duration) error { return durable.SleepOf(ctx, d) }

// Poll says how WaitFor checks: the wait before the next check is the time
// since the first check, at least Min (default 1s) and at most Max
// (default 10m), so it roughly doubles; after Timeout (default 7 days, at
// most 366 days) from the first check the task fails.
type Poll struct{ Min, Max, Timeout time.Duration }

// WaitFor checks a condition until it holds, durably: check returns a
// value and whether the condition is met. While it is not, WaitFor returns
// an error the handler must return, and the task sleeps, PENDING and
// holding no lease, until the next check (as with Sleep). Once it is, the
// value is recorded as the step called name (and the first check's time
// as the step name+"#start"), so every later run returns it without
// checking again. An error of check is returned as it is: the handler
// returns it and the task is retried as after any failure.
//
//	status, err := workflow.WaitFor(ctx, "export-done", workflow.Poll{Max: time.Minute},
//		func(ctx context.Context) (string, bool, error) {
//			s, err := exports.Status(ctx, id)
//			return s, s == "DONE", err
//		})
//	if err != nil {
//		return nil, err
//	}
//
// Each check that finds the condition unmet costs two writes, the claim
// that runs it and the release that snoozes the task, and, for a wait
// within 15 minutes, one delayed message.
func WaitFor[T any](ctx context.Context, name string, p Poll, check func(context.Context) (T, bool, error)) (T, error) {
	var zero T
	raw, err := durable.PollOf(ctx, name, durable.Poll{Min: p.Min, Max: p.Max, Timeout: p.Timeout},
		func(ctx context.Context) ([]byte, bool, error) {
			v, met, err := check(ctx)
			if err != nil || !met {
				return nil, met, err
			}
			b, err := json.Marshal(v)
			if err != nil {
				return nil, false, leasehold.Fail(fmt.Errorf("condition %q: result does not encode as JSON: %w", name, err))
			}
			return b, true, nil
		})
	if err != nil {
		return zero, err
	}
	return decoded[T](raw, fmt.Sprintf("condition %q: recorded result", name))
}

// Version returns the version of the change called change that this run
// of the workflow takes, so that a handler's code can change while tasks
// run it: 0 where the task's history was recorded by code from before
// the change (the history goes on past this point without it), and max
// where the run is new here (the version is then recorded, as the step
// "version:"+change, and every later run of the task takes it). Branch on
// it:
//
//	v, err := workflow.Version(ctx, "add-fraud-check", 1)
//	if err != nil {
//		return nil, err
//	}
//	if v >= 1 {
//		if _, err := workflow.Step(ctx, "fraud-check", check); err != nil {
//			return nil, err
//		}
//	}
//
// Without it, a change to the durable calls a task in flight replays (a
// step added, removed or renamed before its recorded ones, a result type
// changed, a Map reshaped) is a divergence: the run stops at the first
// call that does not match the history, before its side effects, and the
// task is held PENDING, checked again with backoff (1 minute, doubling to
// an hour), until code that matches runs it. docs/versioning.md walks
// through the common changes. A name is 1 to 32 letters, digits, '-', '_'
// or '.', starting with a letter; max is 1 or more.
func Version(ctx context.Context, change string, max int) (int, error) {
	return durable.VersionOf(ctx, change, max)
}

// ContinueAsNew returns the error that, returned by the handler, ends
// this run of the workflow and starts its next run under the same task
// id, with input as its payload and an empty history: a workflow that
// loops for ever (a subscription renewing each month, a poller) continues
// as new every so many iterations, so that its history stays small. The
// ending run is kept, its steps and payload included, as a task of its
// own, SUCCEEDED, with the id ID@runN (N from 1; the task's status shows
// its run and links the earlier ones), for the tasks' retention. The next
// run is PENDING at once, its attempts counted from 0; the task's
// waiters (a parent, the tasks after it) hear of it only when a run ends
// it. An input over the inline payload limit (128 KiB) is kept in the
// payload bucket when the worker has one, as an enqueued payload is; one
// that does not encode, or is larger than a payload may be (10 MiB with a
// bucket, 128 KiB without), fails the task. Its cost: the archive (a write unit per KB of the
// ending run's item) and the release (one write).
//
//	if n%100 == 99 {
//		return Renewal{}, workflow.ContinueAsNew(ctx, Sub{Account: t.Payload.Account, From: n + 1})
//	}
func ContinueAsNew[P any](ctx context.Context, input P) error {
	b, err := json.Marshal(input)
	if err != nil {
		return &durable.PermanentError{Err: fmt.Errorf("continue as new: the input does not encode: %w", err)}
	}
	return durable.ContinueAsNewOf(ctx, b)
}
