package chaos

import (
	"fmt"
	"testing"

	"github.com/leasehold/leasehold/internal/lease"
)

// slidingMap is the evidence of a clean sliding map "m" of n children, c
// at a time: slot s runs s, s+c, s+2c, ... each claimed 10 ms after its
// predecessor's end was answered and ended 100 ms after its claim; every
// fifth child fails for good. The parent spawned, was resumed once and
// summed the map.
func slidingMap(n, c int) Input {
	in := Input{Records: map[string]lease.Task{}, Expect: map[string]lease.Status{}, Workflows: &Workflows{Maps: map[string]MapPlan{}}}
	plan := MapPlan{N: n, Conc: c}
	failed := 0
	for i := range n {
		kid := fmt.Sprintf("m/items/%d", i)
		plan.Kids = append(plan.Kids, kid)
		begin := 20 + (i/c)*115 // the predecessor ended at begin-15, answered at begin-10
		end, status := "SUCCEEDED", lease.StatusSucceeded
		if i%5 == 4 {
			end, status = "FAILED", lease.StatusFailed
			in.Expect[kid] = status
			failed++
		}
		in.Writes = append(in.Writes, claim(kid, 1, begin, begin+3000), ending(kid, 1, end, begin+100))
		in.Handler = append(in.Handler, ran(kid, 1, begin+90)...)
		in.Records[kid] = lease.Task{ID: kid, Status: status, Fence: 1, Attempt: 1, MaxAttempts: 20, History: []lease.Attempt{entry(1, status)}}
		in.Valid = append(in.Valid, kid)
	}
	in.Workflows.Maps["m"] = plan
	last := mapEnd(n, c)
	in.Writes = append(in.Writes, claim("m", 1, 0, 3000), ending("m", 1, "WAITING", 10),
		Write{Task: "m", Op: "UpdateItem", Status: "PENDING", Fence: 1, FromWaiting: true, Forwarded: at(last), Answered: at(last + 5)},
		claim("m", 2, last+10, last+3000), ending("m", 2, "SUCCEEDED", last+50))
	in.Handler = append(in.Handler,
		HandlerEvent{Event: "start", Task: "m", Fence: 1, AtUS: at(2).UnixMicro()},
		HandlerEvent{Event: "start", Task: "m", Fence: 2, AtUS: at(last + 20).UnixMicro()})
	in.Records["m"] = lease.Task{ID: "m", Status: lease.StatusSucceeded, Fence: 2, Attempt: 1, MaxAttempts: 20,
		Result: []byte(fmt.Sprintf(`{"n":%d,"total":%d,"started":%d,"failed":%d,"fence":2,"owner":"w"}`, n-failed, n, n, failed))}
	in.Valid = append(in.Valid, "m")
	return in
}

// mapEnd is when slidingMap's parent is resumed, after every child.
func mapEnd(n, c int) int { return 20 + (n/c)*115 + 200 }

func runMapCheck(in Input) (MapReport, map[string][]string) {
	byTask := map[string][]Write{}
	for _, w := range in.Writes {
		byTask[w.Task] = append(byTask[w.Task], w)
	}
	got := map[string][]string{}
	r := checkMaps(in, byTask, func(kind, detail string) { got[kind] = append(got[kind], detail) })
	return r, got
}

func TestCheckMapClean(t *testing.T) {
	r, got := runMapCheck(slidingMap(40, 4))
	if len(got) > 0 {
		t.Fatalf("violations on a clean map: %v", got)
	}
	want := MapReport{Children: 40, Done: 1, MaxRunning: 4, MaxRunningLoose: 4, MaxHandlers: 4, Conc: 4, ParentRuns: 2, Resumes: 1, ChildRuns: 40, Failed: 8}
	if r != want {
		t.Fatalf("report %+v, want %+v", r, want)
	}
}

// A clean map also passes the whole of Check: its children and parent
// raise none of the other checks.
func TestCheckMapCleanInCheck(t *testing.T) {
	in := slidingMap(20, 2)
	in.Now = at(10_000)
	for _, id := range in.Valid {
		rec := in.Records[id]
		if id == "m" {
			rec.History = []lease.Attempt{entry(1, lease.StatusWaiting), entry(2, lease.StatusSucceeded)}
		}
		in.Records[id] = rec
	}
	in.Handler = append(in.Handler, HandlerEvent{Event: "end", Task: "m", Fence: 1, Outcome: "await", AtUS: at(5).UnixMicro()},
		HandlerEvent{Event: "end", Task: "m", Fence: 2, Outcome: "ok", AtUS: at(mapEnd(20, 2) + 40).UnixMicro()})
	r := Check(in)
	if r.Workflow.Map.Done != 1 {
		t.Errorf("maps done %d, want 1", r.Workflow.Map.Done)
	}
	for _, v := range r.Violations {
		t.Errorf("violation on a clean map: %s", v)
	}
}

func TestCheckMapViolations(t *testing.T) {
	cases := []struct {
		name   string
		break_ func(in *Input)
		kind   string
	}{
		{"C+1 at once: a slot's successor claimed while its predecessor still ran", func(in *Input) {
			// m/items/4 (slot 0) claimed at 100, answered 105; m/items/0
			// ends at 120, while 1-3 run: five at once, certainly.
			moveClaim(in, "m/items/4", 105)
		}, "map_over_conc"},
		{"C+1 at once: a child beyond the slots", func(in *Input) {
			// A fifth child started beside the four slots' first ones.
			moveClaim(in, "m/items/8", 60)
		}, "map_over_conc"},
		{"a child ended twice", func(in *Input) {
			in.Writes = append(in.Writes, ending("m/items/7", 2, "SUCCEEDED", 2000))
		}, "map_child_twice"},
		{"a child run again after its end", func(in *Input) {
			in.Handler = append(in.Handler, ran("m/items/7", 2, 3000)...)
		}, "map_child_twice"},
		{"a child re-created after its end", func(in *Input) {
			in.Writes = append(in.Writes, claim("m/items/7", 2, 3000, 6000))
		}, "map_child_twice"},
		{"a child beyond n", func(in *Input) {
			in.Writes = append(in.Writes, claim("m/items/40", 1, 3000, 6000))
		}, "map_child_twice"},
		{"summary missing a failure", func(in *Input) {
			rec := in.Records["m"]
			rec.Result = []byte(`{"n":32,"total":40,"started":40,"failed":7}`)
			in.Records["m"] = rec
		}, "map_summary"},
		{"summary that disagrees with a child's end", func(in *Input) {
			rec := in.Records["m/items/0"]
			rec.Status = lease.StatusFailed
			in.Records["m/items/0"] = rec
		}, "map_summary"},
		{"summary from waves' counts (n only)", func(in *Input) {
			rec := in.Records["m"]
			rec.Result = []byte(`{"n":32}`)
			in.Records["m"] = rec
		}, "map_summary"},
		{"parent resumed once per few children", func(in *Input) {
			for i := range 3 {
				in.Writes = append(in.Writes, Write{Task: "m", Op: "UpdateItem", Status: "PENDING", Fence: int64(i + 1), FromWaiting: true, Forwarded: at(500 + i), Answered: at(501 + i)})
			}
		}, "map_per_child"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := slidingMap(40, 4)
			tc.break_(&in)
			r, got := runMapCheck(in)
			if len(got[tc.kind]) == 0 {
				t.Fatalf("not caught as %s: report %+v, violations %v", tc.kind, r, got)
			}
			if r.Done != 0 {
				t.Errorf("a broken map counted as done: %+v", r)
			}
			t.Logf("%s: %s", tc.kind, got[tc.kind][0])
		})
	}
}

// An overlap within the writes' uncertainty only (the successor's claim
// forwarded before its predecessor's end was answered, but answered after
// that end was forwarded) is not certain: it is not flagged, only counted
// in the loose maximum.
func TestCheckMapUncertainOverlap(t *testing.T) {
	in := slidingMap(40, 4)
	// m/items/0 ends forwarded at 120, answered 125; m/items/4's claim
	// forwarded at 122 and answered at 127.
	moveClaim(&in, "m/items/4", 127)
	r, got := runMapCheck(in)
	if len(got) > 0 {
		t.Fatalf("uncertain overlap flagged: %v", got)
	}
	if r.MaxRunning != 4 || r.MaxRunningLoose != 5 {
		t.Fatalf("max running %d (loose %d), want 4 (loose 5)", r.MaxRunning, r.MaxRunningLoose)
	}
}

// A child whose holder was killed occupies its slot until another worker
// ends it: a takeover does not free the slot.
func TestCheckMapTakeoverHoldsTheSlot(t *testing.T) {
	// takeOver: child id's first holder (fence 1) was killed, its lease
	// running to 3000; fence 2 took it over at 3100 and ended it at 3200.
	takeOver := func(in *Input, id string) {
		for i, w := range in.Writes {
			if w.Task == id && w.Status == "SUCCEEDED" {
				in.Writes[i] = ending(id, 2, "SUCCEEDED", 3200)
			}
		}
		in.Writes = append(in.Writes, claim(id, 2, 3100, 6100))
		in.Handler = append(in.Handler, ran(id, 2, 3190)...)
	}
	// m/items/37 is its slot's last child: nothing waits for it.
	in := slidingMap(40, 4)
	takeOver(&in, "m/items/37")
	r, got := runMapCheck(in)
	if len(got) > 0 || r.MaxRunning != 4 || r.Done != 1 {
		t.Fatalf("a slot's last child taken over: %+v, violations %v", r, got)
	}
	// m/items/1's successor (m/items/5) began when m/items/1's first
	// holder died, while m/items/1 was still to be ended by the takeover.
	in = slidingMap(40, 4)
	takeOver(&in, "m/items/1")
	r, got = runMapCheck(in)
	if len(got["map_over_conc"]) == 0 {
		t.Fatalf("the successor of a child taken over began before that child ended: not caught (max %d)", r.MaxRunning)
	}
}

// moveClaim moves child id's claim to be answered at ms.
func moveClaim(in *Input, id string, ms int) {
	for i, w := range in.Writes {
		if w.Task == id && w.Status == "RUNNING" {
			in.Writes[i] = claim(id, w.Fence, ms, ms+3000)
		}
	}
}
