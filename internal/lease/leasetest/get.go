package leasetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/query"
)

// testGetMany: GetMany returns what Get returns, in the order asked, a
// missing or malformed id as a task with only its id, a repeated id at each
// place; more ids than one batch call takes are read too.
func testGetMany(t *testing.T, newStore NewStoreFunc) {
	e := setup(t, newStore)
	mg, ok := e.store.(query.ManyGetter)
	if !ok {
		t.Fatalf("%T does not implement lease.ManyGetter", e.store)
	}
	var ids []string
	want := map[string]lease.Task{}
	for i := range 120 {
		n := e.newTask()
		var got lease.Task
		if i%2 == 0 {
			got = e.finish(e.createClaimed(n, "w1"), []byte(`"ok"`))
		} else {
			got = e.create(n)
		}
		ids, want[n.ID] = append(ids, n.ID), got
	}
	ask := append([]string{"missing-" + e.id(), ids[3], ""}, ids...)
	ask = append(ask, ids[3])
	got, err := mg.GetMany(e.ctx, ask)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(ask) {
		t.Fatalf("GetMany of %d ids gave %d tasks", len(ask), len(got))
	}
	for i, id := range ask {
		w, ok := want[id]
		if !ok {
			w = lease.Task{ID: id}
		}
		e.same(fmt.Sprintf("GetMany[%d] (%q)", i, id), got[i], w)
	}
}

func testGetRoundTrips(t *testing.T, newStore NewStoreFunc) {
	e := setup(t, newStore)
	marker := e.cancelMarker()
	n := e.newTask()
	n.Payload = []byte("{\"msg\":\"h\u00e9llo \\\"w\\\"\\n\\u0000\",\"emoji\":\"\U0001F600\",\"n\":[1,2.5e-3,null,true]}")
	n.MaxAttempts = 4
	_, err := e.store.Get(e.ctx, n.ID)
	wantErr(t, "Get before Create", err, lease.ErrNotFound)

	task, err := e.store.CreateClaimed(e.ctx, n, "worker-\u00e9")
	if err != nil {
		t.Fatalf("CreateClaimed: %v", err)
	}
	e.stored(task)
	e.clock.Advance(1500 * time.Microsecond)
	task, err = e.store.Renew(e.ctx, task.LeaseOf())
	if err != nil {
		t.Fatalf("Renew: %v", err)
	}
	e.stored(task)
	e.clock.Advance(time.Second)
	if err := marker.MarkCancelRequested(e.ctx, task.ID); err != nil {
		t.Fatalf("MarkCancelRequested: %v", err)
	}
	task.CancelRequested = true
	e.stored(task)
	e.clock.Advance(time.Second)
	task = e.release(task, lease.Release{
		Status: lease.StatusPending, RunAt: e.clock.Now().Add(time.Minute), DispatchAt: e.clock.Now().Add(time.Hour), Error: "err\u00e9\n1",
	})
	e.stored(task)
	e.clock.Advance(time.Minute)
	task = e.claim(task, "w2")
	e.stored(task)
	e.clock.Advance(time.Second)
	task = e.finish(task, []byte(`{"ok":"\u00e9"}`))
	e.stored(task)
	if len(task.History) != 2 || !task.CancelRequested || task.Fence != 2 {
		t.Fatalf("final task %+v", task)
	}
}
