package ui_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/leasehold/leasehold"
)

// The workflow tree shows each node's times and its children's progress,
// why a waiting node waits, no waiter line for the parent a child sits
// under, and no "waits for" on an ended task; cancelling a PENDING task
// says it is CANCELLED, without the running task's renewal clause.
func TestWorkflowReadsAtAGlance(t *testing.T) {
	t.Parallel()
	f := setup(t, 0)
	body := f.get(t, "/workflow?id=parent-1")
	for _, want := range []string{"2 of 2 children ended", "took ", "created "} {
		if !strings.Contains(body, want) {
			t.Errorf("workflow of parent-1 lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, "waiters:") {
		t.Errorf("a child repeats its parent as a waiter:\n%s", body)
	}
	if strings.Contains(body, "waits for:") {
		t.Errorf("an ended tree says what it waits for:\n%s", body)
	}
	if body := f.get(t, "/workflow?id=hook-1"); !strings.Contains(body, "waits for: callback until ") || !strings.Contains(body, " so far") {
		t.Errorf("a waiting task's tree does not say why it waits and for how long:\n%s", body)
	}
	// A callback task failed by the operator: it ended, and no longer waits.
	if w := f.do(t, http.MethodPost, "/action/fail", f.action("fail", "id", "hook-2", "reason", "no")); w.Code != http.StatusOK {
		t.Fatalf("fail hook-2: %d %s", w.Code, w.Body)
	}
	f.env.SetMaxDeliveries(100)
	if err := f.env.Run(); err != nil {
		t.Fatal(err)
	}
	if info, err := f.env.Client().Get(t.Context(), "hook-2"); err != nil || info.Status != leasehold.StatusFailed || info.Wait == "" {
		t.Fatalf("hook-2: %+v %v, want FAILED with its last wait", info, err)
	}
	if body := f.get(t, "/task?id=hook-2"); strings.Contains(body, "<th>waits for</th>") || !strings.Contains(body, "<th>last waited for</th>") {
		t.Errorf("an ended callback task's page says it waits:\n%s", body)
	}
	if body := f.get(t, "/workflow?id=hook-2"); strings.Contains(body, "waits for:") {
		t.Errorf("an ended callback task's tree says it waits:\n%s", body)
	}
	if _, err := f.env.Enqueue(leasehold.Submission{Kind: "ok", ID: "to-cancel", Payload: 1}); err != nil {
		t.Fatal(err)
	}
	w := f.do(t, http.MethodPost, "/action/cancel", f.action("cancel", "id", "to-cancel"))
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "CANCELLED") || strings.Contains(w.Body.String(), "lease renewal") {
		t.Errorf("cancel of a PENDING task: %d, want CANCELLED without the renewal clause:\n%s", w.Code, w.Body)
	}
}
