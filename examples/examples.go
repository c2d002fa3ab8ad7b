// Package examples holds the task kinds the bundled worker runs: short enough
// to read as documentation, and used by `make demo` and the end-to-end tests.
// Register adds them all. The payloads of the kinds a program or a test
// enqueues are exported, as the kinds' contracts; the handlers are read
// here and run by kind, through Register.
package examples

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/workflow"
)

// Greeting is the payload of the "greet" kind.
type Greeting struct {
	Name string `json:"name"`
}

// greet answers with a greeting.
func greet(_ context.Context, t *leasehold.Task[Greeting]) (string, error) {
	if t.Payload.Name == "" {
		return "", leasehold.Fail(errors.New("name is required"))
	}
	return "hello, " + t.Payload.Name, nil
}

// Sleep is the payload of the "sleep" kind.
type Sleep struct {
	Seconds float64 `json:"seconds"`
}

// sleepFor waits, honouring cancellation: a task that outlives its lease
// renewal period shows the lease being kept alive.
func sleepFor(ctx context.Context, t *leasehold.Task[Sleep]) (map[string]any, error) {
	d := time.Duration(t.Payload.Seconds * float64(time.Second))
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return map[string]any{"slept_seconds": t.Payload.Seconds, "fence": t.Fence}, nil
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// Flaky is the payload of the "flaky" kind.
type Flaky struct {
	// SucceedOnAttempt is the first attempt that succeeds; 0 never does.
	SucceedOnAttempt int `json:"succeed_on_attempt"`
}

// flakyWork fails until the attempt named in its payload.
func flakyWork(_ context.Context, t *leasehold.Task[Flaky]) (string, error) {
	if t.Payload.SucceedOnAttempt == 0 || t.Attempt < t.Payload.SucceedOnAttempt {
		return "", fmt.Errorf("attempt %d of %d failed on purpose", t.Attempt, t.MaxAttempts)
	}
	return fmt.Sprintf("succeeded on attempt %d", t.Attempt), nil
}

// Upper is the payload of the "upper" kind.
type Upper struct {
	Text string `json:"text"`
}

// uppercase returns the text in upper case.
func uppercase(_ context.Context, t *leasehold.Task[Upper]) (string, error) {
	return strings.ToUpper(t.Payload.Text), nil
}

// Shout is the payload of the "shout" kind: a fan-out/fan-in.
type Shout struct {
	Texts []string `json:"texts"`
}

// shoutAll spawns one "upper" child per text, then joins their results in
// order: a fan-out/fan-in (docs/workflows.md).
func shoutAll(ctx context.Context, t *leasehold.Task[Shout]) ([]string, error) {
	if len(t.Payload.Texts) == 0 {
		return nil, leasehold.Fail(errors.New("texts is required"))
	}
	kids := make([]workflow.Child, len(t.Payload.Texts))
	for i, text := range t.Payload.Texts {
		kids[i] = workflow.Child{Kind: "upper", Payload: Upper{Text: text}}
	}
	outs, err := workflow.All(ctx, "texts", kids...)
	if err != nil {
		return nil, err // the task waits for its children
	}
	out := make([]string, len(outs))
	for i, k := range outs {
		if k.Status != leasehold.StatusSucceeded {
			return nil, leasehold.Fail(fmt.Errorf("child %s ended %s: %s", k.ID, k.Status, k.Error))
		}
		out[i] = strings.Trim(string(k.Result), `"`)
	}
	return out, nil
}

// Approval is the payload of the "approval" kind.
type Approval struct {
	// TimeoutSeconds bounds the wait for the callback (default 3600).
	TimeoutSeconds int `json:"timeout_seconds"`
}

// awaitApproval waits for an outside decision: it takes its callback token
// and waits. An operator answers by task, with `leasehold complete
// --task ID` or `leasehold fail --task ID`; a real handler would hand the
// token to the outside system instead. The task SUCCEEDS with the
// answer's result, or FAILS for good with a failed callback's reason.
func awaitApproval(ctx context.Context, t *leasehold.Task[Approval]) (any, error) {
	timeout := time.Duration(t.Payload.TimeoutSeconds) * time.Second
	if timeout <= 0 {
		timeout = time.Hour
	}
	answer, err := workflow.WaitForCallback[json.RawMessage](ctx, "decision", timeout,
		func(context.Context, string) error { return nil })
	var refused *workflow.CallbackFailedError
	if errors.As(err, &refused) {
		return nil, leasehold.Fail(errors.New(refused.Reason))
	}
	if err != nil {
		return nil, err // waiting for the answer
	}
	if len(answer) == 0 {
		return nil, nil // answered without a result
	}
	return answer, nil
}

// remind is the payload of the "remind" kind.
type remind struct {
	Name         string `json:"name"`
	SleepSeconds int    `json:"sleep_seconds"`
}

// remindLater is a workflow of two steps with a durable sleep between
// them: it notes the reminder, sleeps (PENDING, holding no lease), then
// sends it. A resumed run replays the first step from its record.
func remindLater(ctx context.Context, t *leasehold.Task[remind]) (string, error) {
	noted, err := workflow.Step(ctx, "note", func(context.Context) (string, error) {
		return "reminder for " + t.Payload.Name, nil
	})
	if err != nil {
		return "", err
	}
	if err := workflow.Sleep(ctx, time.Duration(t.Payload.SleepSeconds)*time.Second); err != nil {
		return "", err
	}
	return workflow.Step(ctx, "send", func(context.Context) (string, error) {
		return fmt.Sprintf("%s, sent after %ds", noted, t.Payload.SleepSeconds), nil
	})
}

// Order is the payload of the "order" kind.
type Order struct {
	Items          []string `json:"items"`
	SleepSeconds   int      `json:"sleep_seconds"`
	TimeoutSeconds int      `json:"timeout_seconds"`
}

// OrderApproval is the answer an order's approval callback carries.
type OrderApproval struct {
	Approved bool `json:"approved"`
}

// fulfilOrder is a handler with four awaits between its steps: it counts
// the items (a step), packs each in a child task ("upper") and waits for
// them all, records the packing (a step), waits for an approval callback,
// sleeps, and ships (a step). Each await suspends the task, holding no
// lease; each run after one replays the steps before it from their
// records. The approval is an operator's here, who answers by task with
// `leasehold complete --task ID` or `leasehold fail --task ID`; a real
// handler would send the token to the approver in submit.
func fulfilOrder(ctx context.Context, t *leasehold.Task[Order]) (string, error) {
	n, err := workflow.Step(ctx, "count", func(context.Context) (int, error) { return len(t.Payload.Items), nil })
	if err != nil {
		return "", err
	}
	kids := make([]workflow.Child, n)
	for i, item := range t.Payload.Items {
		kids[i] = workflow.Child{Kind: "upper", Payload: Upper{Text: item}}
	}
	packed, err := workflow.All(ctx, "pack", kids...)
	if err != nil {
		return "", err
	}
	labels, err := workflow.Step(ctx, "packed", func(context.Context) (string, error) {
		first, last := "", ""
		for i, o := range packed {
			var label string
			if o.Status != leasehold.StatusSucceeded || json.Unmarshal(o.Result, &label) != nil {
				return "", leasehold.Fail(fmt.Errorf("packing %s ended %s: %s", o.ID, o.Status, o.Error))
			}
			if i == 0 {
				first = label
			}
			last = label
		}
		return first + ".." + last, nil
	})
	if err != nil {
		return "", err
	}
	timeout := cmp.Or(time.Duration(t.Payload.TimeoutSeconds)*time.Second, time.Hour)
	approval, err := workflow.WaitForCallback[OrderApproval](ctx, "approval", timeout,
		func(context.Context, string) error { return nil }) // the operator reads the token
	var refused *workflow.CallbackFailedError
	switch {
	case errors.As(err, &refused):
		return "order refused: " + refused.Reason, nil
	case err != nil:
		return "", err
	case !approval.Approved:
		return "order not approved", nil
	}
	if err := workflow.Sleep(ctx, time.Duration(t.Payload.SleepSeconds)*time.Second); err != nil {
		return "", err
	}
	return workflow.Step(ctx, "ship", func(context.Context) (string, error) {
		return fmt.Sprintf("%d items packed (%s), approved, shipped after %ds", n, labels, t.Payload.SleepSeconds), nil
	})
}

// signOff is the payload of the "signoff" kind.
type signOff struct {
	// TimeoutSeconds bounds the wait for the approval (default 3600).
	TimeoutSeconds int `json:"timeout_seconds"`
}

// signOffMessage is a message on a sign-off's "approve" topic.
type signOffMessage struct {
	By string `json:"by"`
}

// awaitSignOff waits for an approval message or a timeout, whichever
// comes first: a Race of a receive on "approve" (a future) against a
// durable timer. It is one durable wait: the task sleeps holding no lease
// until a message on the topic wakes it (leasehold send, Client.Send or
// the message form on the work queue) or the timer's deadline passes, and
// the race's winner is recorded, so a replay sees the same one. Either way
// the task SUCCEEDS, and its result says which came first.
func awaitSignOff(ctx context.Context, t *leasehold.Task[signOff]) (string, error) {
	timeout := cmp.Or(time.Duration(t.Payload.TimeoutSeconds)*time.Second, time.Hour)
	// The receive looks for longer than the timer runs: the timer decides.
	msg := workflow.ReceiveAsync[signOffMessage](ctx, "approve", 2*timeout)
	first, err := workflow.Race(ctx, "approval-or-timeout", msg, workflow.SleepAsync(ctx, timeout))
	if err != nil {
		return "", err // waiting for the message or the deadline
	}
	if first == 1 {
		return fmt.Sprintf("timeout won: no approval within %s", timeout), nil
	}
	m, err := msg.Get(ctx)
	if err != nil {
		return "", err
	}
	return "message won: approved by " + cmp.Or(m.By, "someone"), nil
}

// Register adds every example kind to hs.
func Register(hs *leasehold.Handlers) {
	leasehold.Handle(hs, "greet", greet)
	leasehold.Handle(hs, "sleep", sleepFor)
	leasehold.Handle(hs, "flaky", flakyWork)
	leasehold.Handle(hs, "upper", uppercase)
	leasehold.Handle(hs, "shout", shoutAll)
	leasehold.Handle(hs, "approval", awaitApproval)
	leasehold.Handle(hs, "remind", remindLater)
	leasehold.Handle(hs, "order", fulfilOrder)
	leasehold.Handle(hs, "signoff", awaitSignOff)
}
