package dynamo_test

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/anishathalye/porcupine"

	"github.com/leasehold/leasehold/internal/lease"
)

// histCallOp builds one recorded call of client over [call, ret] (ret < 0:
// its outcome is unknown, it never returned).
func histCallOp(client int, in histIn, call, ret int64, out histOut) porcupine.Operation {
	if ret < 0 {
		out.Unknown, ret = true, math.MaxInt64
	}
	return porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret}
}

// TestHistModelRejectsTheOldAnomalies feeds the model of the history check
// (TestDynamoStoreHistoryIsLinearizable) the histories the store gave when
// a cancel lost its answer before its writes carried a call id (issue 18
// items 3 and 5), and when a cancel's end of a task it had flagged was not
// conditioned on the flag (issue 33), and the same histories as the store
// gives them now. The model must find the old ones not linearizable and
// accept the new ones: the stack check, which uses this model, catches the
// anomalies.
//
// Issue 18's item 4 (a cancel's flag lands on a lease, the holder releases
// the task to PENDING, and the cancel then ends the PENDING task) is no
// anomaly since issue 33: the flag dooms the task, and whoever meets it
// PENDING or WAITING first ends it (histEndFlagged);
// TestHistModelAcceptsALegalHistory has that history.
func TestHistModelRejectsTheOldAnomalies(t *testing.T) {
	t.Parallel()
	const o1 = "c0#1"
	claim := histIn{Op: hClaim, Owner: o1}
	held := func(op histOp) histIn { return histIn{Op: op, Owner: o1, Fence: 1, Attempt: 1} }
	claimed := histOut{Fence: 1, Attempt: 1, FlagKnown: true}
	get := func(s lease.Status, fence int64, attempt int, flag bool) histOut {
		return histOut{Status: s, Fence: fence, Attempt: attempt, Flag: flag, FlagKnown: true}
	}
	ok := histOut{}
	cases := []struct {
		name     string
		old, now []porcupine.Operation
	}{{
		// Item 3: the cancel's flag lands on the running task and its
		// answer is lost; the task finishes; the cancel's retry finds it
		// SUCCEEDED and reports "already finished". No cancel succeeded,
		// yet the flag is set.
		name: "flag landed, then already finished",
		old: []porcupine.Operation{
			histCallOp(0, claim, 0, 1, claimed),
			histCallOp(1, histIn{Op: hCancel}, 2, 10, histOut{Err: "finished"}),
			histCallOp(0, held(hFinish), 3, 4, ok),
			histCallOp(2, histIn{Op: hGet}, 11, 12, get(lease.StatusSucceeded, 1, 1, true)),
		},
		// Now the retry recognises its own flag and reports the cancel.
		now: []porcupine.Operation{
			histCallOp(0, claim, 0, 1, claimed),
			histCallOp(1, histIn{Op: hCancel}, 2, 10, ok),
			histCallOp(0, held(hFinish), 3, 4, ok),
			histCallOp(2, histIn{Op: hGet}, 11, 12, get(lease.StatusSucceeded, 1, 1, true)),
		},
	}, {
		// Issue 33: a cancel flags a PENDING task and ends it with a
		// second write; meanwhile a claim took it, its worker released it
		// CANCELLED (honouring the flag) and a retry put it back. Were
		// the ending write not conditioned on the flag (a retry clears
		// it), it would undo the retry.
		name: "end of a flagged task after a retry cleared the flag",
		old: []porcupine.Operation{
			histCallOp(0, claim, 0, 1, claimed),
			histCallOp(0, histIn{Op: hRelease, Owner: o1, Fence: 1, Attempt: 1, To: lease.StatusPending}, 2, 3, ok),
			histCallOp(1, histIn{Op: hCancel}, 4, 40, ok),
			histCallOp(2, histIn{Op: hGet}, 5, 6, get(lease.StatusPending, 1, 1, true)),
			histCallOp(0, histIn{Op: hClaim, Owner: "c0#2"}, 7, 8, histOut{Fence: 2, Attempt: 2, Flag: true, FlagKnown: true}),
			histCallOp(0, histIn{Op: hRelease, Owner: "c0#2", Fence: 2, Attempt: 2, To: lease.StatusCancelled}, 9, 10, ok),
			histCallOp(2, histIn{Op: hRetry}, 11, 12, ok),
			histCallOp(2, histIn{Op: hGet}, 13, 14, get(lease.StatusPending, 2, 2, false)),
			histCallOp(2, histIn{Op: hGet}, 41, 42, get(lease.StatusCancelled, 2, 2, true)),
		},
		// Now the ending write finds the flag cleared: the retried task
		// is left alone.
		now: []porcupine.Operation{
			histCallOp(0, claim, 0, 1, claimed),
			histCallOp(0, histIn{Op: hRelease, Owner: o1, Fence: 1, Attempt: 1, To: lease.StatusPending}, 2, 3, ok),
			histCallOp(1, histIn{Op: hCancel}, 4, 40, ok),
			histCallOp(2, histIn{Op: hGet}, 5, 6, get(lease.StatusPending, 1, 1, true)),
			histCallOp(0, histIn{Op: hClaim, Owner: "c0#2"}, 7, 8, histOut{Fence: 2, Attempt: 2, Flag: true, FlagKnown: true}),
			histCallOp(0, histIn{Op: hRelease, Owner: "c0#2", Fence: 2, Attempt: 2, To: lease.StatusCancelled}, 9, 10, ok),
			histCallOp(2, histIn{Op: hRetry}, 11, 12, ok),
			histCallOp(2, histIn{Op: hGet}, 13, 14, get(lease.StatusPending, 2, 2, false)),
			histCallOp(2, histIn{Op: hGet}, 41, 42, get(lease.StatusPending, 2, 2, false)),
		},
	}, {
		// Item 5: an earlier cancel undoes a later retry. The cancel of
		// the PENDING task lands (a read sees it CANCELLED) and loses its
		// answer; a retry and a claim land; the cancel's retry no longer
		// knows its write and flags the new attempt.
		name: "cancel of a pending task, then flag on the retried attempt",
		old: []porcupine.Operation{
			histCallOp(1, histIn{Op: hCancel}, 0, 30, ok),
			histCallOp(2, histIn{Op: hGet}, 1, 2, get(lease.StatusCancelled, 0, 0, true)),
			histCallOp(2, histIn{Op: hRetry}, 3, 4, ok),
			histCallOp(0, claim, 5, 6, claimed),
			histCallOp(0, held(hRenew), 31, 32, histOut{Flag: true, FlagKnown: true}),
		},
		// Now the retry finds the cancel's own write: the attempt the
		// retry started is left alone.
		now: []porcupine.Operation{
			histCallOp(1, histIn{Op: hCancel}, 0, 30, ok),
			histCallOp(2, histIn{Op: hGet}, 1, 2, get(lease.StatusCancelled, 0, 0, true)),
			histCallOp(2, histIn{Op: hRetry}, 3, 4, ok),
			histCallOp(0, claim, 5, 6, claimed),
			histCallOp(0, held(hRenew), 31, 32, histOut{FlagKnown: true}),
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if porcupine.CheckOperations(histModel, tc.old) {
				t.Errorf("the model accepts the old history:\n%s", describeOps(tc.old))
			}
			if !porcupine.CheckOperations(histModel, tc.now) {
				t.Errorf("the model rejects the history the store gives now:\n%s", describeOps(tc.now))
			}
		})
	}
}

// A legal history over four tasks with every kind of call, a refusal of
// each kind, calls whose outcome is unknown (one took effect, one did not)
// and flagged tasks ended after their cancel's flag is linearizable; the
// same history with one outcome changed is not.
func TestHistModelAcceptsALegalHistory(t *testing.T) {
	t.Parallel()
	on := func(task int, in histIn) histIn { in.Task = task; return in }
	lease1 := func(op histOp, task int, owner string, fence int64, attempt int) histIn {
		return histIn{Task: task, Op: op, Owner: owner, Fence: fence, Attempt: attempt}
	}
	ok := histOut{}
	history := []porcupine.Operation{
		// Task 0: a lease renewed, suspended for a callback whose
		// completion's answer is lost (it landed: the cancel after it
		// finds the task finished), then a refused retry and claim.
		histCallOp(0, on(0, histIn{Op: hClaim, Owner: "a"}), 0, 2, histOut{Fence: 1, Attempt: 1, FlagKnown: true}),
		histCallOp(1, on(0, histIn{Op: hClaim, Owner: "b"}), 1, 3, histOut{Err: "leased"}),
		histCallOp(0, lease1(hRenew, 0, "a", 1, 1), 4, 5, histOut{FlagKnown: true}),
		histCallOp(0, histIn{Task: 0, Op: hSuspend, Owner: "a", Fence: 1, Attempt: 1, Nonce: "n1"}, 6, 7, ok),
		histCallOp(1, histIn{Task: 0, Op: hComplete, Fence: 1, Attempt: 1, Nonce: "n1"}, 8, -1, ok),
		histCallOp(2, on(0, histIn{Op: hCancel}), 9, 10, histOut{Err: "finished"}),
		histCallOp(2, on(0, histIn{Op: hRetry}), 11, 12, histOut{Err: "notretryable"}),
		histCallOp(1, on(0, histIn{Op: hClaim, Owner: "b2"}), 13, 14, histOut{Err: "finished"}),
		histCallOp(0, on(0, histIn{Op: hGet}), 15, 16, histOut{Status: lease.StatusSucceeded, Fence: 1, Attempt: 1, FlagKnown: true}),

		// Task 2: a cancel flags a PENDING task, a read sees it flagged
		// before the cancel's second write ends it, a claim then finds it
		// ended.
		histCallOp(6, on(2, histIn{Op: hClaim, Owner: "e"}), 0, 1, histOut{Fence: 1, Attempt: 1, FlagKnown: true}),
		histCallOp(6, histIn{Task: 2, Op: hRelease, Owner: "e", Fence: 1, Attempt: 1, To: lease.StatusPending}, 2, 3, ok),
		histCallOp(7, on(2, histIn{Op: hCancel}), 4, 20, ok),
		histCallOp(6, on(2, histIn{Op: hGet}), 5, 6, histOut{Status: lease.StatusPending, Fence: 1, Attempt: 1, Flag: true, FlagKnown: true}),
		histCallOp(6, on(2, histIn{Op: hClaim, Owner: "e2"}), 21, 22, histOut{Err: "finished"}),
		histCallOp(6, on(2, histIn{Op: hGet}), 23, 24, histOut{Status: lease.StatusCancelled, Fence: 1, Attempt: 1, Flag: true, FlagKnown: true}),

		// Task 3: a cancel's flag lands on a lease, the holder releases
		// the task to PENDING, and the flagged PENDING task ends
		// CANCELLED (issue 18's item 4, legal since issue 33).
		histCallOp(8, on(3, histIn{Op: hClaim, Owner: "f"}), 0, 1, histOut{Fence: 1, Attempt: 1, FlagKnown: true}),
		histCallOp(9, on(3, histIn{Op: hCancel}), 2, 20, ok),
		histCallOp(8, lease1(hRenew, 3, "f", 1, 1), 3, 4, histOut{Flag: true, FlagKnown: true}),
		histCallOp(8, histIn{Task: 3, Op: hRelease, Owner: "f", Fence: 1, Attempt: 1, To: lease.StatusPending}, 5, 6, ok),
		histCallOp(8, on(3, histIn{Op: hGet}), 21, 22, histOut{Status: lease.StatusCancelled, Fence: 1, Attempt: 1, Flag: true, FlagKnown: true}),

		// Task 1: released FAILED, retried, claimed; a cancel flags the
		// running attempt, which finishes anyway; a release whose outcome
		// is unknown never landed (its lease had ended).
		histCallOp(3, on(1, histIn{Op: hClaim, Owner: "c"}), 0, 1, histOut{Fence: 1, Attempt: 1, FlagKnown: true}),
		histCallOp(3, histIn{Task: 1, Op: hRelease, Owner: "c", Fence: 1, Attempt: 1, To: lease.StatusFailed}, 2, 3, ok),
		histCallOp(4, on(1, histIn{Op: hRetry}), 4, 5, ok),
		histCallOp(4, on(1, histIn{Op: hClaim, Owner: "d"}), 6, 7, histOut{Fence: 2, Attempt: 2, FlagKnown: true}),
		histCallOp(5, on(1, histIn{Op: hCancel}), 8, 12, ok),
		histCallOp(4, lease1(hRenew, 1, "d", 2, 2), 10, 11, histOut{Flag: true, FlagKnown: true}),
		histCallOp(3, histIn{Task: 1, Op: hRelease, Owner: "c", Fence: 1, Attempt: 1, To: lease.StatusPending}, 13, -1, ok),
		histCallOp(4, lease1(hFinish, 1, "d", 2, 2), 14, 15, ok),
		histCallOp(5, histIn{Task: 1, Op: hFail, Fence: 2, Attempt: 2, Nonce: "x"}, 16, 17, histOut{Err: "rejected"}),
		histCallOp(5, on(1, histIn{Op: hGet}), 18, 19, histOut{Status: lease.StatusSucceeded, Fence: 2, Attempt: 2, Flag: true, FlagKnown: true}),
	}
	if !porcupine.CheckOperations(histModel, history) {
		t.Fatalf("the model rejects a legal history:\n%s", describeOps(history))
	}
	// The flag the renewal saw, gone from the final read: no order of the
	// calls gives that.
	bad := append([]porcupine.Operation(nil), history...)
	last := &bad[len(bad)-1]
	out := last.Output.(histOut)
	out.Flag = false
	last.Output = out
	if porcupine.CheckOperations(histModel, bad) {
		t.Fatalf("the model accepts a read that lost the cancel's flag:\n%s", describeOps(bad))
	}
}

// describeOps lists ops, one a line.
func describeOps(ops []porcupine.Operation) string {
	var b strings.Builder
	for _, op := range ops {
		ret := "-"
		if op.Return != math.MaxInt64 {
			ret = fmt.Sprint(op.Return)
		}
		fmt.Fprintf(&b, "  c%d [%d, %s] %s\n", op.ClientId, op.Call, ret, describeHist(op.Input.(histIn), op.Output.(histOut)))
	}
	return b.String()
}
