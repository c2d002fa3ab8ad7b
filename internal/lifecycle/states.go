package lifecycle

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
)

// State is where one message's execution stands (docs/states.md, "One
// message's execution"). Each state but StateStepping and StateExited has
// one function, runX, which does that state's work and returns the next
// state; run calls them, and checks every transition against transitions.
//
// These are not a task's statuses (lease.Status): StateResuming, say, is a
// message that found its task WAITING in the store.
type State uint8

const (
	// StateReceived: a token is in hand; nothing is claimed. It is decoded
	// and routed: claimed, or created and claimed (runReceived).
	StateReceived State = iota
	// StateCallback: a callback token: end the wait it names, once, or,
	// for a heartbeat, keep it alive (runCallback, runHeartbeat).
	StateCallback
	// StateAwaitingDependencies: an inline token with dependencies (after):
	// create its task WAITING and register it on each dependency
	// (runAwaitingDependencies).
	StateAwaitingDependencies
	// StateResuming: the token's task is WAITING in the store (a wake token,
	// or any other): resume and claim it if its wait is over, end the wait
	// at its deadline or on a cancel, else acknowledge (runResuming).
	StateResuming
	// StateClaimed: the lease is held; the handler has not started.
	StateClaimed
	// StateRunning: the handler and the renewer are running.
	StateRunning
	// StateStepping: the running handler is recording a step
	// (durable.StepOf's checkpoint write). A sub-state of StateRunning,
	// entered and left by the handler's goroutine while the execution's
	// loop waits in runRunning, so it has no function of its own
	// (execution.Checkpoint).
	StateStepping
	// StateFinishing: the handler is done and the renewer joined; the
	// outcome is being recorded.
	StateFinishing
	// StateSpawning: the handler returned AwaitChildrenError: send the
	// children's tokens (runSpawning).
	StateSpawning
	// StateAwaitingChildren: the children's tokens are sent: suspend the
	// task WAITING for them (runAwaitingChildren).
	StateAwaitingChildren
	// StateAwaitingCallback: the handler returned AwaitCallbackError: arm
	// the timeout and suspend the task WAITING for the callback
	// (runAwaitingCallback).
	StateAwaitingCallback
	// StateMessage: a message to a workflow: put it in the workflow's
	// inbox, once (runMessage).
	StateMessage
	// StateNotifying: the execution wrote the task's end, or found it
	// ended: tell the tasks waiting for it before the message is
	// acknowledged (runNotifying).
	StateNotifying
	// StateExited: nothing more to do for this message.
	StateExited

	numStates = iota
)

var stateNames = [numStates]string{
	StateReceived:             "received",
	StateCallback:             "callback",
	StateAwaitingDependencies: "awaiting_dependencies",
	StateResuming:             "resuming",
	StateClaimed:              "claimed",
	StateRunning:              "running",
	StateStepping:             "stepping",
	StateFinishing:            "finishing",
	StateSpawning:             "spawning",
	StateAwaitingChildren:     "awaiting_children",
	StateAwaitingCallback:     "awaiting_callback",
	StateMessage:              "message",
	StateNotifying:            "notifying",
	StateExited:               "exited",
}

func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "state(" + strconv.Itoa(int(s)) + ")"
}

// Transition is one move of the machine, with the event that takes it.
type Transition struct {
	From, To State
	Event    string
}

// transitions is every move an execution may make, and the only place they
// are declared: run checks each move of its loop against it, checkpoint
// each move in and out of StateStepping. The docs' table and diagram are
// rendered from it (renderStates).
var transitions = []Transition{
	{StateReceived, StateClaimed, "claimed, or an inline token's task created and claimed in one write"},
	{StateReceived, StateCallback, "a callback token (an answer or a heartbeat)"},
	{StateReceived, StateAwaitingDependencies, "an inline token with dependencies (after)"},
	{StateReceived, StateResuming, "the task is WAITING (a wake token, or any other)"},
	{StateReceived, StateNotifying, "the task has ended (a duplicate token), or ends here: an over-limit token recorded FAILED, an expired last attempt failed"},
	{StateReceived, StateExited, "rejected, leased elsewhere, not due, held back (a rate window known full, a paused queue), or a store error: the token is kept, replaced, re-sent or dead-lettered"},

	{StateReceived, StateMessage, "a message to a workflow (the message form)"},
	{StateMessage, StateExited, "put in the workflow's inbox (or put there before), and its receiver woken; rejected with the reason (no such workflow, ended, inbox full); or kept (a store error)"},

	{StateCallback, StateNotifying, "the callback ended the wait, or found the task ended (rejected, after its waiters are told again)"},
	{StateCallback, StateExited, "a heartbeat recorded or dropped; rejected, or kept (it came before the suspension, or a store error)"},

	{StateAwaitingDependencies, StateNotifying, "the task had ended already, or its wait was abandoned (a cycle, no room to wait)"},
	{StateAwaitingDependencies, StateExited, "created and registered on every dependency; or kept to retry"},

	{StateResuming, StateClaimed, "the wait is over: resumed and claimed in one write"},
	{StateResuming, StateResuming, "another token resumed it first, and the claim found it WAITING again"},
	{StateResuming, StateNotifying, "the wait ended here: a cancel, its deadline, a callback timed out; or the task was found ended since it was read"},
	{StateResuming, StateExited, "still waiting (a duplicate or early token), or kept to retry"},

	{StateClaimed, StateRunning, "handler and renewer started"},
	{StateClaimed, StateNotifying, "ended without running: cancelled, an over-limit payload, an unknown kind, its kind at its concurrency limit or its queue's rate window full, wait results unreadable; or the lease was lost to an attempt that ended the task"},
	{StateClaimed, StateExited, "the end could not be written (the lease lost to an attempt still going, a store error), or a re-dispatch failed"},

	{StateRunning, StateStepping, "the handler records a step"},
	{StateStepping, StateRunning, "the step's checkpoint write returned"},
	{StateRunning, StateFinishing, "the handler returned, or was abandoned at the deadline; the renewer joined"},

	{StateFinishing, StateSpawning, "the handler returned AwaitChildrenError"},
	{StateFinishing, StateAwaitingCallback, "the handler returned AwaitCallbackError"},
	{StateFinishing, StateNotifying, "the outcome is written: succeeded, retried, snoozed, released, failed, cancelled; or the lease was lost to an attempt that ended the task"},
	{StateFinishing, StateExited, "the lease was lost to an attempt still going, or the outcome could not be written"},

	{StateSpawning, StateAwaitingChildren, "every child's token sent"},
	{StateSpawning, StateNotifying, "invalid children, or the tokens could not be sent: the attempt failed; or the lease was lost to an attempt that ended the task"},
	{StateSpawning, StateExited, "the attempt's end could not be written, or its retry's token not sent"},

	{StateAwaitingChildren, StateNotifying, "a cancel came while it ran: the wait ended at once, its children first; or the lease was lost to an attempt that ended the task"},
	{StateAwaitingChildren, StateExited, "suspended (and woken if every child had ended), or the suspension failed"},

	{StateAwaitingCallback, StateNotifying, "no callback token taken, a bad timeout, or the timeout not armed: the attempt failed; or a cancel ended the wait; or a child raced against the callback ended before the suspension landed: the wait ended with its answer; or the lease was lost to an attempt that ended the task"},
	{StateAwaitingCallback, StateExited, "suspended, or the suspension failed"},

	{StateNotifying, StateExited, "every waiter told, if any (the message is kept for a backoff if one could not be)"},
}

// transitionSet indexes transitions: transitionSet[from] has bit to set.
var transitionSet = func() (set [numStates]uint16) {
	for _, t := range transitions {
		set[t.From] |= 1 << t.To
	}
	return set
}()

// declared reports whether transitions holds from → to.
func declared(from, to State) bool {
	return int(from) < numStates && int(to) < numStates && transitionSet[from]&(1<<to) != 0
}

// transitionHook, when set (by the package's tests, before any execution
// runs), sees every transition taken, and whether it is declared.
var transitionHook func(from, to State, declared bool)

// run drives the execution until it exits: the one place the states'
// functions are called and their transitions checked.
func (x *execution) run(ctx context.Context) Result {
	x.detached = context.WithoutCancel(ctx)
	state := StateReceived
	for state != StateExited {
		prev := state
		switch state {
		case StateReceived:
			state = x.runReceived(ctx)
		case StateCallback:
			state = x.runCallback(ctx)
		case StateMessage:
			state = x.runMessage(ctx)
		case StateAwaitingDependencies:
			state = x.runAwaitingDependencies(ctx)
		case StateResuming:
			state = x.runResuming(ctx)
		case StateClaimed:
			state = x.runClaimed(ctx)
		case StateRunning:
			state = x.runRunning(ctx)
		case StateFinishing:
			state = x.runFinishing(ctx)
		case StateSpawning:
			state = x.runSpawning(ctx)
		case StateAwaitingChildren:
			state = x.runAwaitingChildren(ctx)
		case StateAwaitingCallback:
			state = x.runAwaitingCallback(ctx)
		case StateNotifying:
			state = x.runNotifying(ctx)
		default:
			panic(fmt.Sprintf("lifecycle: no function for state %s", state))
		}
		ok := declared(prev, state)
		if transitionHook != nil {
			transitionHook(prev, state, ok)
		}
		if !ok {
			// A bug: the table or a state's function is wrong. The
			// execution goes on (the state's work is done); the package's
			// tests fail on it.
			x.log.error("undeclared state transition", "from", prev.String(), "to", state.String())
		}
		if x.log.enabled(slog.LevelDebug) {
			x.log.debug("task state changed", "from", prev.String(), "to", state.String())
		}
	}
	x.result.Final = state
	x.releaseSlot()
	x.endAttempt()
	return x.result
}

// stepping reports the running handler's move into StateStepping (in) or
// back out of it. It runs on the handler's goroutine, which may outlive the
// loop (abandoned at the deadline): it touches nothing of the execution's,
// and the two moves are declared, as the package's tests check.
func stepping(in bool) {
	if transitionHook == nil {
		return
	}
	from, to := StateRunning, StateStepping
	if !in {
		from, to = to, from
	}
	transitionHook(from, to, declared(from, to))
}

// Markers around the section of docs/states.md that renderStates writes.
const (
	statesDocBegin = "<!-- execution states: generated by renderStates in internal/lifecycle/states.go; do not edit -->\n"
	statesDocEnd   = "<!-- end of execution states -->\n"
)

// renderStates renders the machine for docs/states.md: a mermaid diagram
// and a table of transitions, both from transitions.
func renderStates() string {
	var b strings.Builder
	b.WriteString(statesDocBegin)
	b.WriteString("\n```mermaid\nstateDiagram-v2\n")
	b.WriteString("    [*] --> received: a message\n")
	for _, t := range transitions {
		fmt.Fprintf(&b, "    %s --> %s\n", t.From, t.To)
	}
	b.WriteString("    exited --> [*]: acknowledged, or left to come back\n")
	b.WriteString("```\n\n")
	b.WriteString("| from | to | when |\n|------|----|------|\n")
	for _, t := range transitions {
		fmt.Fprintf(&b, "| `%s` | `%s` | %s |\n", t.From, t.To, t.Event)
	}
	b.WriteString("\n")
	b.WriteString(statesDocEnd)
	return b.String()
}
