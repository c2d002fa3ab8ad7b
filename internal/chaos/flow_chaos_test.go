package chaos_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/leasehold/leasehold/internal/awstest"
	"github.com/leasehold/leasehold/internal/chaos"
	"github.com/leasehold/leasehold/internal/queues"
)

// Flow control under chaos: the work queue has a rate limit and the kind
// "limited" a concurrency limit, while workers are killed and frozen, their
// calls fail, and the test pauses and resumes the queue (docs/chaos.md,
// "Flow control").
const (
	flowKindLimit = 2
	// flowPauseLag is how stale a worker's reading of the pause may be:
	// Worker.Run reads the tags at most every 2 s.
	flowPauseLag = 3 * time.Second
)

// TestChaosFlowControl checks that no window gives more starts than the
// rate limit and that every handler start took one of its own, that no
// more attempts of the limited kind run at once (holding their lease) than
// its limit, and that nothing is lost or stuck.
func TestChaosFlowControl(t *testing.T) {
	needChaos(t)
	cfg := awstest.Config(t)
	p := readParams(t)
	p.tasks = envInt(t, "LEASEHOLD_CHAOS_FLOW_TASKS", 150)
	p.workflows, p.exitAfterFinish, p.freezeChildren = false, 0, false
	p.bound = scaled(max(5*time.Minute, time.Duration(p.tasks)*time.Second), p.factor)
	rate := envInt(t, "LEASEHOLD_CHAOS_FLOW_RATE", 10)
	t.Logf("chaos: flow control: seed=%d tasks=%d workers=%d rate=%d/s limited=%d at once faults=%+v dir=%s",
		p.seed, p.tasks, p.workers, rate, flowKindLimit, p.faults, p.dir)

	r := startRig(t, cfg, p,
		fmt.Sprintf("LEASEHOLD_RATE_LIMITS=%d/s", rate),
		fmt.Sprintf("LEASEHOLD_KIND_CONCURRENCY=limited=%d", flowKindLimit))
	pl := makeFlowPlan(p)

	pauses := &pauser{sq: r.sq, url: r.queues.Work, rng: rand.New(rand.NewPCG(p.seed, 7))}
	pauseCtx, stopPauses := context.WithCancel(context.Background())
	var pauseWG sync.WaitGroup
	pauseWG.Go(func() { pauses.run(pauseCtx) })
	endPauses := func() {
		stopPauses()
		pauseWG.Wait()
	}
	t.Cleanup(endPauses)

	started := time.Now()
	sendAll(t, r.sq, r.queues.Work, pl.messages)
	t.Logf("chaos: sent %d messages (%d valid tasks, %d limited, %d duplicates, %d malformed)",
		len(pl.messages), len(pl.valid), len(pl.limited), pl.duplicates, len(pl.malformed))
	waitTerminal(t, r.ddb, r.table, pl.valid, nil, p)
	endPauses()
	r.end()
	duration := time.Since(started)

	ev := r.gather(t, pl.valid, pl.malformed)
	in, records := ev.in, ev.in.Records
	rep := chaos.Check(in)
	flow := chaos.CheckFlow(in, chaos.FlowInput{
		StartsPerWindow: rate, Windows: awstest.RateWindows(t, r.ddb, r.table), Starts: r.ledger.Starts(),
		Limited: pl.limited, KindLimit: flowKindLimit, Paused: pauses.intervals(), PauseLag: flowPauseLag,
	})
	rep.Violations = append(rep.Violations, flow.Violations...)

	// The limits and the pauses must have bitten, or the run proves
	// nothing about them.
	rateHolds, slotHolds := 0, 0
	for _, rec := range records {
		for _, h := range rec.History {
			switch {
			case strings.Contains(h.Error, "held back by the rate limit"):
				rateHolds++
			case strings.Contains(h.Error, "at its concurrency limit"):
				slotHolds++
			}
		}
	}
	kills, stops := r.fleet.Counts()
	for _, miss := range []struct {
		n    int
		what string
	}{
		{rateHolds, "rate_holds: no task was held back by the rate limit"},
		{slotHolds, "slot_holds: no task was held back by the kind's concurrency limit"},
		{flow.FullWindows, "full_windows: no rate window filled up"},
		{len(pauses.intervals()), "pauses: the queue was never paused"},
		{kills, "kills: no worker was killed"},
	} {
		if miss.n == 0 {
			rep.Violations = append(rep.Violations, miss.what)
		}
	}

	summary := fmt.Sprintf("chaos flow: tasks=%d succeeded=%d stuck=%d wrong_end=%d double_finish=%d overlaps=%d stale_accepted=%d "+
		"finish_without_run=%d false_success=%d bad_history=%d malformed_ok=%d/%d panics=%d races=%d "+
		"unmatched=%d over_window=%d over_limit=%d handler_starts=%d counted_starts=%d windows=%d full_windows=%d max_running=%d/%d "+
		"rate_holds=%d slot_holds=%d pauses=%d ran_while_paused=%d "+
		"kills=%d stops=%d requests=%d resets_before=%d resets_after=%d delayed=%d takeovers=%d lease_lost=%d writes=%d rejected_writes=%d unknown_writes=%d cut_lines=%d seed=%d duration=%s",
		rep.Tasks, rep.Succeeded, rep.Stuck, rep.WrongEnd, rep.DoubleFinish, rep.Overlaps, rep.StaleAccepted,
		rep.FinishWithoutRun, rep.FalseSuccess, rep.BadHistory, rep.MalformedOK, rep.Malformed, rep.Panics, rep.Races,
		flow.Unmatched, flow.OverWindow, flow.OverLimit, flow.HandlerStarts, flow.Counted, flow.Windows, flow.FullWindows, flow.MaxRunning, flowKindLimit,
		rateHolds, slotHolds, len(pauses.intervals()), flow.RanWhilePaused,
		kills, stops, r.totals.Requests, r.totals.ResetsBefore, r.totals.ResetsAfter, r.totals.Delayed, rep.Takeovers, rep.LeaseLost,
		len(in.Writes), ev.rejected, ev.unknown, ev.cut, p.seed, duration.Round(time.Second))
	fmt.Println(summary)
	report := summary + "\n" + strings.Join(rep.Violations, "\n") + "\n"
	if err := os.WriteFile(filepath.Join(p.dir, "report-flow.txt"), []byte(report), 0o644); err != nil {
		t.Logf("chaos: write report: %v", err)
	}
	if len(rep.Violations) > 0 {
		where := "rerun with LEASEHOLD_CHAOS_DIR=<dir> to keep the evidence"
		if p.keepDir {
			where = "evidence in " + p.dir
		}
		t.Errorf("chaos: %d violation(s) (%s):\n%s\n%s", len(rep.Violations), where, summary, strings.Join(rep.Violations, "\n"))
	}
}

// flowPlan is what the flow-control run sends.
type flowPlan struct {
	valid      []string
	limited    map[string]bool // the tasks of the kind "limited"
	malformed  []string
	duplicates int
	messages   []string
}

// makeFlowPlan makes p.tasks inline tasks, one in three of the limited
// kind, with the malformed messages and duplicates of a plain run.
func makeFlowPlan(p params) flowPlan {
	rng := rand.New(rand.NewPCG(p.seed, p.seed^43))
	pl := flowPlan{limited: map[string]bool{}}
	var first, dups []string
	for i := range p.tasks {
		kind, id := "chaos", fmt.Sprintf("c%05d", i)
		if i%3 == 0 {
			kind, id = "limited", fmt.Sprintf("l%05d", i)
			pl.limited[id] = true
		}
		work := 10 + rng.IntN(290)
		if rng.IntN(10) == 0 {
			work = 2200 + rng.IntN(1800) // renewed at least once
		}
		body := fmt.Sprintf(`{"v":1,"kind":%q,"id":%q,"payload":{"n":%d,"work_ms":%d},"max_attempts":100}`, kind, id, i, work)
		pl.valid = append(pl.valid, id)
		first = append(first, body)
		if i%p.dupEvery == p.dupEvery/2 {
			dups = append(dups, body)
		}
	}
	for _, k := range malformedKinds {
		body := fmt.Sprintf(k, 0)
		pl.malformed = append(pl.malformed, body)
		first = append(first, body)
	}
	rng.Shuffle(len(first), func(i, j int) { first[i], first[j] = first[j], first[i] })
	pl.duplicates = len(dups)
	pl.messages = append(first, dups...)
	return pl
}

// pauser pauses the work queue for 2 to 4 s every 5 to 9 s (its pause tag,
// as `leasehold pause` sets it, written without faults), and records when.
type pauser struct {
	sq  *sqs.Client
	url string
	rng *rand.Rand

	mu   sync.Mutex
	done [][2]time.Time
}

func (ps *pauser) run(ctx context.Context) {
	between := func(a, b time.Duration) time.Duration { return a + time.Duration(ps.rng.Int64N(int64(b-a))) }
	set := func(paused bool) error {
		cctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		return queues.SetPaused(cctx, ps.sq, ps.url, paused, time.Now())
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(between(5*time.Second, 9*time.Second)):
		}
		at := time.Now()
		if set(true) != nil {
			continue
		}
		select {
		case <-ctx.Done():
		case <-time.After(between(2*time.Second, 4*time.Second)):
		}
		// Resumed whatever happens (a few tries), or the run's end would
		// find the queue paused.
		for try := 0; set(false) != nil && try < 20; try++ {
			time.Sleep(100 * time.Millisecond)
		}
		ps.mu.Lock()
		ps.done = append(ps.done, [2]time.Time{at, time.Now()})
		ps.mu.Unlock()
	}
}

func (ps *pauser) intervals() [][2]time.Time {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	return append([][2]time.Time(nil), ps.done...)
}
