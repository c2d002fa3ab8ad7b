package chaos

import (
	"strings"
	"testing"
	"time"
)

// The flow-control checks must catch what they claim to catch: each case
// builds the evidence of a run with one known fault.

// limitedRun is a clean run: three attempts of limited tasks on workers w1
// and w2, each with the start its worker took after its claim, two at a
// time at most.
func limitedRun() (Input, FlowInput) {
	in := Input{
		Writes: []Write{
			claim("a", 1, 0, 3000), ending("a", 1, "SUCCEEDED", 500),
			claim("b", 1, 10, 3000), ending("b", 1, "SUCCEEDED", 700),
			claim("c", 1, 600, 4000), ending("c", 1, "SUCCEEDED", 900),
		},
		Handler: []HandlerEvent{
			{Event: "start", Task: "a", Fence: 1, Worker: "w1", AtUS: at(50).UnixMicro()},
			{Event: "end", Task: "a", Fence: 1, Worker: "w1", AtUS: at(450).UnixMicro()},
			{Event: "start", Task: "b", Fence: 1, Worker: "w2", AtUS: at(60).UnixMicro()},
			{Event: "end", Task: "b", Fence: 1, Worker: "w2", AtUS: at(650).UnixMicro()},
			{Event: "start", Task: "c", Fence: 1, Worker: "w1", AtUS: at(620).UnixMicro()},
			{Event: "end", Task: "c", Fence: 1, Worker: "w1", AtUS: at(850).UnixMicro()},
		},
	}
	f := FlowInput{
		StartsPerWindow: 2, KindLimit: 2, Limited: map[string]bool{"a": true, "b": true, "c": true},
		Starts: []Start{
			{Window: "rate/q/0", Worker: "w1", Forwarded: at(20)},
			{Window: "rate/q/0", Worker: "w2", Forwarded: at(30)},
			{Window: "rate/q/1", Worker: "w1", Forwarded: at(610)},
		},
		Windows: map[string]int{"rate/q/0": 2, "rate/q/1": 1},
	}
	return in, f
}

func wantFlow(t *testing.T, r *FlowReport, kinds ...string) {
	t.Helper()
	if len(r.Violations) != len(kinds) {
		t.Fatalf("violations %q, want one of each of %q", r.Violations, kinds)
	}
	for i, k := range kinds {
		if !strings.HasPrefix(r.Violations[i], k+":") {
			t.Errorf("violation %d is %q, want %s", i, r.Violations[i], k)
		}
	}
}

func TestCheckFlowClean(t *testing.T) {
	in, f := limitedRun()
	r := CheckFlow(in, f)
	wantFlow(t, r)
	if r.HandlerStarts != 3 || r.Counted != 3 || r.MaxRunning != 2 || r.FullWindows != 1 {
		t.Errorf("report %+v", r)
	}
}

// A handler that ran without a start of its own: c's worker took none
// after c's claim (the start it took before belongs to a).
func TestCheckFlowUnmatched(t *testing.T) {
	in, f := limitedRun()
	f.Starts = f.Starts[:2]
	wantFlow(t, CheckFlow(in, f), "unmatched")
	// Nor does another worker's start count.
	in, f = limitedRun()
	f.Starts[2].Worker = "w2"
	wantFlow(t, CheckFlow(in, f), "unmatched")
}

func TestCheckFlowOverWindow(t *testing.T) {
	in, f := limitedRun()
	f.Windows["rate/q/0"] = 3
	wantFlow(t, CheckFlow(in, f), "over_window")
}

// A third attempt of the limited kind while two run; then a worker
// killed in its handler holds its slot until its lease has run out, and
// an attempt after that is no overlap.
func TestCheckFlowOverLimit(t *testing.T) {
	in, f := limitedRun()
	in.Handler[5].AtUS = at(2000).UnixMicro() // c runs on...
	in.Handler[3].AtUS = at(2000).UnixMicro() // ...while b does
	in.Writes[3], in.Writes[5] = ending("b", 1, "SUCCEEDED", 2100), ending("c", 1, "SUCCEEDED", 2100)
	in.Writes = append(in.Writes, claim("d", 1, 640, 3000))
	in.Handler = append(in.Handler, HandlerEvent{Event: "start", Task: "d", Fence: 1, Worker: "w2", AtUS: at(700).UnixMicro()})
	f.Limited["d"] = true
	f.Starts = append(f.Starts, Start{Window: "rate/q/1", Worker: "w2", Forwarded: at(650)})
	wantFlow(t, CheckFlow(in, f), "over_limit")

	in, f = limitedRun()
	// e's worker dies in its handler (no end line): its lease runs to
	// 1500. f starts at 1400 (over the limit with a and e), g at 1600
	// (after e's lease: no overlap).
	in.Writes = append(in.Writes, claim("e", 1, 900, 1500), claim("f", 1, 1300, 4000), claim("g", 1, 1550, 4000))
	in.Handler = append(in.Handler,
		HandlerEvent{Event: "start", Task: "e", Fence: 1, Worker: "w2", AtUS: at(950).UnixMicro()},
		HandlerEvent{Event: "start", Task: "f", Fence: 1, Worker: "w1", AtUS: at(1400).UnixMicro()},
		HandlerEvent{Event: "end", Task: "f", Fence: 1, Worker: "w1", AtUS: at(1450).UnixMicro()},
		HandlerEvent{Event: "start", Task: "g", Fence: 1, Worker: "w1", AtUS: at(1600).UnixMicro()},
		HandlerEvent{Event: "start", Task: "a2", Fence: 1, Worker: "w1", AtUS: at(1000).UnixMicro()},
	)
	in.Writes = append(in.Writes, claim("a2", 1, 980, 4000))
	for _, id := range []string{"e", "f", "g", "a2"} {
		f.Limited[id] = true
	}
	f.Starts = append(f.Starts,
		Start{Window: "rate/q/2", Worker: "w2", Forwarded: at(920)}, Start{Window: "rate/q/2", Worker: "w1", Forwarded: at(990)},
		Start{Window: "rate/q/3", Worker: "w1", Forwarded: at(1350)}, Start{Window: "rate/q/3", Worker: "w1", Forwarded: at(1580)})
	r := CheckFlow(in, f)
	wantFlow(t, r, "over_limit")
	if !strings.Contains(r.Violations[0], "f fence 1") {
		t.Errorf("violation %q, want f's start (e's lease still held, a2 running)", r.Violations[0])
	}
}

// A handler of a message received well after a pause began counts as run
// while paused (information).
func TestCheckFlowRanWhilePaused(t *testing.T) {
	in, f := limitedRun()
	f.Paused = [][2]time.Time{{at(100), at(5000)}}
	f.PauseLag = 200 * time.Millisecond
	in.Deliveries = []Delivery{
		{Task: "a", Worker: "w1", Answered: at(10)},
		{Task: "c", Worker: "w1", Answered: at(590)},
	}
	r := CheckFlow(in, f)
	wantFlow(t, r)
	if r.RanWhilePaused != 1 {
		t.Errorf("ran while paused %d, want 1 (c)", r.RanWhilePaused)
	}
}
