package leasetest

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/mapstate"
)

// mapGroup creates group g of a map of n children and c slots with the
// items below produced written, and returns it.
func (a *adminEnv) mapGroup(t *testing.T, parent string, n, c, g, produced int) mapstate.Group {
	t.Helper()
	want := mapstate.NewGroup(mapstate.GroupID(parent, "m", g), fmt.Sprintf("map %d/%d", n, c), n, c, g, produced, a.now().Add(retention))
	want.Min, want.Tolerate = n/2, 3
	got, err := a.admin.CreateGroup(a.ctx, want)
	if err != nil {
		t.Fatalf("CreateGroup: %v", err)
	}
	if got.ID != want.ID || got.N != n || got.Min != n/2 || got.Tolerate != 3 || got.C != c || got.First != want.First || len(got.Seq) != len(want.Seq) || got.Produced != produced || got.Version != 1 {
		t.Fatalf("CreateGroup = %+v, want %+v at version 1", got, want)
	}
	return got
}

// A group is created once; bad groups are refused; a group is read back as
// written; and a group is no task: List sees none.
func testMapGroupCreate(t *testing.T, a *adminEnv) {
	parent := a.id()
	g := a.mapGroup(t, parent, 1000, 100, 1, 50)
	if g.First != 64 || len(g.Seq) != 36 {
		t.Fatalf("group 1 of 100 slots holds slots %d+%d, want 64+36", g.First, len(g.Seq))
	}
	again := mapstate.NewGroup(g.ID, "map 5/5", 5, 5, 0, 0, a.now().Add(retention))
	if got, err := a.admin.CreateGroup(a.ctx, again); !errors.Is(err, lease.ErrAlreadyExists) || got.Shape != g.Shape || got.N != 1000 {
		t.Fatalf("CreateGroup again = %+v, %v; want the stored group and ErrAlreadyExists", got, err)
	}
	for name, bad := range map[string]mapstate.Group{
		"no shape":        mapstate.NewGroup(mapstate.GroupID(parent, "x", 0), "", 10, 10, 0, 0, a.now()),
		"1001 slots":      mapstate.NewGroup(mapstate.GroupID(parent, "x", 0), "map 10/1001", 10, 1001, 0, 0, a.now()),
		"group past them": mapstate.NewGroup(mapstate.GroupID(parent, "x", 2), "map 10/100", 10, 100, 2, 0, a.now()),
		"min over n":      {ID: mapstate.GroupID(parent, "x", 0), Shape: "map 1/1", N: 1, C: 1, Seq: []int{0}, Min: 2, Expires: a.now()},
	} {
		if _, err := a.admin.CreateGroup(a.ctx, bad); !errors.Is(err, lease.ErrInvalid) {
			t.Errorf("CreateGroup(%s) = %v, want ErrInvalid", name, err)
		}
	}
	got, err := a.admin.GetGroup(a.ctx, g.ID)
	if err != nil || !groupsEqual(got, g) {
		t.Fatalf("GetGroup = %+v, %v; want %+v", got, err, g)
	}
	if _, err := a.admin.GetGroup(a.ctx, mapstate.GroupID(parent, "none", 0)); !errors.Is(err, lease.ErrNotFound) {
		t.Fatalf("GetGroup of no group = %v, want ErrNotFound", err)
	}
	if got := a.listAll(lease.StatusPending, 10); len(got) != 0 {
		t.Errorf("List of a table with map groups and no task = %d items", len(got))
	}
}

// Each child is counted once, in its slot's order: a duplicate report, or
// one of a rank not reached, changes nothing; a success and a failure are
// counted apart, the first failures kept by index.
func testMapReportCountsOnce(t *testing.T, a *adminEnv) {
	g := a.mapGroup(t, a.id(), 100, 10, 0, 100)
	r := mapstate.ReportOf(g.ID, 3, 10, true, true)
	got, err := a.admin.Report(a.ctx, r)
	if err != nil || got.Seq[3] != 1 || got.OK != 1 || got.Failed != 0 || got.Version != 2 {
		t.Fatalf("Report(child 3) = %+v, %v; want slot 3 at 1, one success, version 2", got, err)
	}
	if dup, err := a.admin.Report(a.ctx, r); !errors.Is(err, mapstate.ErrCounted) || dup.OK != 1 || dup.Version != 2 {
		t.Fatalf("Report(child 3) again = %+v, %v; want ErrCounted and the group unchanged", dup, err)
	}
	if early, err := a.admin.Report(a.ctx, mapstate.ReportOf(g.ID, 27, 10, true, true)); !errors.Is(err, mapstate.ErrCounted) || early.Seq[7] != 0 {
		t.Fatalf("Report(child 27) before 7 = %+v, %v; want ErrCounted", early, err)
	}
	if _, err := a.admin.Report(a.ctx, mapstate.Report{Group: g.ID, Index: 7, Slot: 8, Rank: 0}); !errors.Is(err, lease.ErrInvalid) {
		t.Fatalf("Report of child 7 in slot 8 = %v, want ErrInvalid", err)
	}
	// Seven failures: the first five are kept.
	for _, i := range []int{0, 1, 2, 4, 5, 6, 7} {
		if got, err = a.admin.Report(a.ctx, mapstate.ReportOf(g.ID, i, 10, false, true)); err != nil {
			t.Fatalf("Report(child %d failed): %v", i, err)
		}
	}
	if got.OK != 1 || got.Failed != 7 || !slices.Equal(got.Failures, []int{0, 1, 2, 4, 5}) || len(got.Idle) != 0 {
		t.Fatalf("after a success and 7 failures: %+v; want OK 1, Failed 7, failures [0 1 2 4 5], no idle slot", got)
	}
	if read, err := a.admin.GetGroup(a.ctx, g.ID); err != nil || !groupsEqual(read, got) {
		t.Fatalf("GetGroup = %+v, %v; want %+v", read, err, got)
	}
}

// Reports of many slots at once are all counted; duplicates of one child
// at once are counted once.
func testMapReportsAtOnce(t *testing.T, a *adminEnv) {
	g := a.mapGroup(t, a.id(), 1000, 64, 0, 1000)
	next := make(chan int, 64)
	for i := range 64 {
		next <- i
	}
	close(next)
	counted := allowedAtOnce(t, "Report", 64, func() (bool, error) {
		_, err := a.admin.Report(a.ctx, mapstate.ReportOf(g.ID, <-next, 64, true, true))
		return err == nil, err
	})
	got, err := a.admin.GetGroup(a.ctx, g.ID)
	if err != nil || counted != 64 || got.OK != 64 || slices.ContainsFunc(got.Seq, func(s int) bool { return s != 1 }) {
		t.Fatalf("64 slots reported at once: %d counted, group %+v, %v; want each slot at 1, OK 64", counted, got, err)
	}
	landed := allowedAtOnce(t, "Report", 16, func() (bool, error) {
		_, err := a.admin.Report(a.ctx, mapstate.ReportOf(g.ID, 64+5, 64, false, true))
		if errors.Is(err, mapstate.ErrCounted) {
			return false, nil
		}
		return err == nil, err
	})
	if got, err = a.admin.GetGroup(a.ctx, g.ID); err != nil || landed != 1 || got.Failed != 1 || got.Seq[5] != 2 {
		t.Fatalf("16 duplicates of child 69 at once: %d landed, group %+v, %v; want one", landed, got, err)
	}
}

// A slot whose next child has no item yet becomes idle; raising Produced
// returns it idle; Unpark takes it off only at the slot's count. A stop
// makes every slot that reports idle; the first reason is kept; Done says
// when every slot is over.
func testMapIdleAndStop(t *testing.T, a *adminEnv) {
	g := a.mapGroup(t, a.id(), 12, 4, 0, 6)
	got, err := a.admin.Report(a.ctx, mapstate.ReportOf(g.ID, 1, 4, true, true)) // it started child 5
	if err != nil || got.IsIdle(1) {
		t.Fatalf("Report(child 1), child 5 started = %+v, %v; want slot 1 busy", got, err)
	}
	if got, err = a.admin.Report(a.ctx, mapstate.ReportOf(g.ID, 2, 4, true, false)); err != nil || !got.IsIdle(2) || got.Next(2) != 6 {
		t.Fatalf("Report(child 2), child 6 not started = %+v, %v; want slot 2 idle at 6", got, err)
	}
	if _, err := a.admin.Report(a.ctx, mapstate.ReportOf(g.ID, 5, 4, true, true)); err != nil {
		t.Fatalf("Report(child 5): %v", err)
	}
	if got, err = a.admin.Report(a.ctx, mapstate.ReportOf(g.ID, 9, 4, true, false)); err != nil || got.IsIdle(1) || got.Seq[1] != 3 {
		t.Fatalf("Report(child 9), the last of slot 1 = %+v, %v; want slot 1 counted, not idle", got, err)
	}
	if got, err = a.admin.Raise(a.ctx, g.ID, 12); err != nil || got.Produced != 12 || !got.IsIdle(2) {
		t.Fatalf("Raise(12) = %+v, %v; want produced 12, slot 2 still idle", got, err)
	}
	if got, err = a.admin.Raise(a.ctx, g.ID, 8); err != nil || got.Produced != 12 {
		t.Fatalf("Raise(8) after 12 = %+v, %v; want produced still 12", got, err)
	}
	if got, err = a.admin.Unpark(a.ctx, g.ID, 2, 0); !errors.Is(err, mapstate.ErrCounted) || !got.IsIdle(2) {
		t.Fatalf("Unpark(2) at a stale count = %+v, %v; want ErrCounted, still idle", got, err)
	}
	if got, err = a.admin.Unpark(a.ctx, g.ID, 2, 1); err != nil || got.IsIdle(2) {
		t.Fatalf("Unpark(2) = %+v, %v; want slot 2 busy", got, err)
	}
	if got.Done() {
		t.Fatalf("group %+v is done with children to run", got)
	}
	if got, err = a.admin.Stop(a.ctx, g.ID, "failures"); err != nil || got.Stopped != "failures" {
		t.Fatalf("Stop = %+v, %v", got, err)
	}
	if got, err = a.admin.Stop(a.ctx, g.ID, "min_successful"); err != nil || got.Stopped != "failures" {
		t.Fatalf("Stop again = %+v, %v; want the first reason kept", got, err)
	}
	// The children running when the map stopped end (0, 3 and 6, slot
	// 2's), starting none: their slots go idle, and the group is done.
	for _, i := range []int{0, 3, 6} {
		if got, err = a.admin.Report(a.ctx, mapstate.ReportOf(g.ID, i, 4, i != 3, false)); err != nil || !got.IsIdle(i%4) {
			t.Fatalf("Report(child %d) after the stop = %+v, %v; want its slot idle", i, got, err)
		}
	}
	if !got.Done() || got.OK != 6 || got.Failed != 1 {
		t.Fatalf("after the stop and every running child's end: %+v; want done, OK 6, Failed 1", got)
	}
	if _, err := a.admin.Stop(a.ctx, g.ID, ""); !errors.Is(err, lease.ErrInvalid) {
		t.Fatalf("Stop without a reason = %v, want ErrInvalid", err)
	}
}

// A page is read back as written, overwritten by a later put; a missing
// page is not found; bad pages are refused.
func testMapPages(t *testing.T, a *adminEnv) {
	id := mapstate.PageID(a.id(), "m", 3)
	items := [][]byte{[]byte(`{"kind":"k","payload":{"i":48}}`), []byte(`{"kind":"k","payload":{"i":49}}`)}
	if _, err := a.admin.GetPage(a.ctx, id); !errors.Is(err, lease.ErrNotFound) {
		t.Fatalf("GetPage before the put = %v, want ErrNotFound", err)
	}
	for range 2 {
		if err := a.admin.PutPage(a.ctx, id, items, a.now().Add(retention)); err != nil {
			t.Fatalf("PutPage: %v", err)
		}
	}
	got, err := a.admin.GetPage(a.ctx, id)
	if err != nil || !slices.EqualFunc(got, items, bytes.Equal) {
		t.Fatalf("GetPage = %q, %v; want %q", got, err, items)
	}
	for name, bad := range map[string][][]byte{
		"no items":  nil,
		"17 items":  slices.Repeat([][]byte{[]byte("x")}, 17),
		"too large": {bytes.Repeat([]byte("x"), mapstate.MaxPageBytes+1)},
	} {
		if err := a.admin.PutPage(a.ctx, id, bad, a.now().Add(time.Hour)); !errors.Is(err, lease.ErrInvalid) && !errors.Is(err, lease.ErrTooLarge) {
			t.Errorf("PutPage(%s) = %v, want ErrInvalid or ErrTooLarge", name, err)
		}
	}
}

func groupsEqual(a, b mapstate.Group) bool {
	return a.ID == b.ID && a.Shape == b.Shape && a.N == b.N && a.C == b.C && a.First == b.First && a.Min == b.Min && a.Tolerate == b.Tolerate && slices.Equal(a.Seq, b.Seq) &&
		a.OK == b.OK && a.Failed == b.Failed && slices.Equal(a.Failures, b.Failures) && a.Produced == b.Produced &&
		slices.Equal(sorted(a.Idle), sorted(b.Idle)) && a.Stopped == b.Stopped && a.Version == b.Version && a.Expires.Equal(b.Expires)
}

func sorted(s []int) []int {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// A cancel stops a sliding map (lease.CancelChildren of its parent, through
// the store's StopMap): its groups are stopped, the child a busy slot runs
// is cancelled (flagged while it runs, a placeholder while its token is
// queued), and so is the successor that an ended, uncounted child may have
// started; idle slots and the children after them are left without items.
func testMapStopChildren(t *testing.T, a *adminEnv) {
	p := a.id()
	if _, err := a.admin.Create(a.ctx, lease.NewTask{ID: p, Kind: "mapper", MaxAttempts: 1}); err != nil {
		t.Fatal(err)
	}
	held, err := a.admin.Claim(a.ctx, p, "w0")
	if err != nil {
		t.Fatal(err)
	}
	g := a.mapGroup(t, p, 12, 4, 0, 8)
	// Slot 3's child ended and its successor waits for its start: idle.
	if _, err := a.admin.Report(a.ctx, mapstate.ReportOf(g.ID, 3, 4, true, false)); err != nil {
		t.Fatal(err)
	}
	parent, err := a.admin.Suspend(a.ctx, held.LeaseOf(), lease.Wait{Mode: lease.WaitChildren, For: []string{mapstate.WakeID(p, "m", 8)}})
	if err != nil {
		t.Fatal(err)
	}
	if name, ok := mapstate.WaitedMap(parent); !ok || name != "m" {
		t.Fatalf("WaitedMap = %q, %v; want m", name, ok)
	}
	child := func(i int) string { return fmt.Sprintf("%s/m/%d", p, i) }
	// Slot 0's child 0 runs; slot 1's child 1 ended (its end may have sent
	// child 5's token); slot 2's child 2 has its token queued.
	if _, err := a.admin.CreateClaimed(a.ctx, lease.NewTask{ID: child(0), Kind: "item", MaxAttempts: 1, Parent: p}, "w1"); err != nil {
		t.Fatal(err)
	}
	c1, err := a.admin.CreateClaimed(a.ctx, lease.NewTask{ID: child(1), Kind: "item", MaxAttempts: 1, Parent: p}, "w2")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.admin.Finish(a.ctx, c1.LeaseOf(), []byte(`1`)); err != nil {
		t.Fatal(err)
	}
	if err := lease.CancelChildren(a.ctx, a.admin, parent, "cancelled with its parent", nil); err != nil {
		t.Fatalf("CancelChildren: %v", err)
	}
	if got, err := a.admin.GetGroup(a.ctx, g.ID); err != nil || got.Stopped != mapstate.StoppedCancelled {
		t.Fatalf("group after the cancel = %+v, %v; want stopped %q", got, err, mapstate.StoppedCancelled)
	}
	want := map[int]string{0: "RUNNING flagged", 1: "SUCCEEDED", 2: "placeholder", 5: "placeholder", 3: "none", 6: "none", 7: "none", 4: "none"}
	for i, w := range want {
		got, err := a.admin.Get(a.ctx, child(i))
		var is string
		switch {
		case errors.Is(err, lease.ErrNotFound):
			is = "none"
		case err != nil:
			t.Fatalf("get child %d: %v", i, err)
		case lease.IsPlaceholder(got) && got.Status == lease.StatusCancelled && got.Parent == p:
			is = "placeholder"
		case got.Status == lease.StatusRunning && got.CancelRequested:
			is = "RUNNING flagged"
		default:
			is = string(got.Status)
		}
		if is != w {
			t.Errorf("child %d after the cancel: %s, want %s", i, is, w)
		}
	}
	// A repeat (a cancel interrupted half-way) changes nothing.
	if err := lease.CancelChildren(a.ctx, a.admin, parent, "cancelled with its parent", nil); err != nil {
		t.Fatalf("CancelChildren again: %v", err)
	}
	if _, err := a.admin.Get(a.ctx, child(9)); !errors.Is(err, lease.ErrNotFound) {
		t.Errorf("child 9 (after placeholder 5) = %v, want no item", err)
	}
}
