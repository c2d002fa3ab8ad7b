package bench

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/awstest"
	"github.com/leasehold/leasehold/workflow"
)

// The workflows make bench prices (docs/workflows.md): chains of "step"
// tasks linked with After, a "fanout" parent that awaits "echo" children,
// and an "approve" task that waits for a callback. Each starts with
// Client.Enqueue, the documented way, and runs through the real worker.

// callbackToken is what an "approve" task hands out.
type callbackToken struct{ id, token string }

// callbackTimeout is how long an "approve" task waits. The harness answers
// as soon as the task waits; the timeout token comes later, finds the task
// finished, and is acknowledged (a write whose condition fails).
func callbackTimeout() time.Duration { return awstest.Scale(3 * time.Second) }

// handleWorkflows registers the workflow kinds with hs.
func (h *harness) handleWorkflows(hs *leasehold.Handlers) {
	h.handleOperations(hs)
	leasehold.Handle(hs, "step", func(_ context.Context, t *leasehold.Task[echo]) (echo, error) {
		return t.Payload, nil
	})
	leasehold.Handle(hs, "fanout", func(ctx context.Context, t *leasehold.Task[echo]) (echo, error) {
		kids := make([]workflow.Child, t.Payload.N)
		for i := range kids {
			kids[i] = workflow.Child{Kind: "echo", Payload: echo{N: i}}
		}
		outs, err := workflow.All(ctx, "echo", kids...)
		if err != nil {
			return echo{}, err
		}
		for _, k := range outs {
			if k.Status != leasehold.StatusSucceeded {
				return echo{}, leasehold.Fail(fmt.Errorf("child %s ended %s", k.ID, k.Status))
			}
		}
		return echo{N: len(outs)}, nil
	})
	leasehold.Handle(hs, "steps", func(ctx context.Context, t *leasehold.Task[echo]) (echo, error) {
		sum := 0
		for i := range t.Payload.N {
			v, err := workflow.Step(ctx, fmt.Sprintf("step-%d", i), func(context.Context) (int, error) { return i, nil })
			if err != nil {
				return echo{}, err
			}
			sum += v
		}
		return echo{N: sum}, nil
	})
	leasehold.Handle(hs, "history", func(ctx context.Context, t *leasehold.Task[echo]) (echo, error) {
		r := strings.Repeat("r", max(t.Payload.Bytes-2, 0))
		for i := range t.Payload.N {
			if _, err := workflow.Step(ctx, fmt.Sprintf("step-%d", i), func(context.Context) (string, error) { return r, nil }); err != nil {
				return echo{}, err
			}
		}
		// A second run replays the whole history.
		if err := workflow.Sleep(ctx, time.Second); err != nil {
			return echo{}, err
		}
		return echo{N: t.Payload.N}, nil
	})
	leasehold.Handle(hs, "approve", func(ctx context.Context, t *leasehold.Task[echo]) (echo, error) {
		return workflow.WaitForCallback[echo](ctx, "approval", callbackTimeout(), func(ctx context.Context, tok string) error {
			select {
			case h.callbacks <- callbackToken{id: t.ID, token: tok}:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	})
	leasehold.Handle(hs, "mapper", func(ctx context.Context, t *leasehold.Task[echo]) (echo, error) {
		res, err := workflow.Map(ctx, "items", t.Payload.N, func(i int) workflow.Child {
			return workflow.Child{Kind: "echo", Payload: echo{N: i}}
		}, workflow.MapOptions{MaxConcurrency: mapConcurrency})
		if err != nil {
			return echo{}, err
		}
		return echo{N: res.Succeeded}, nil
	})
	leasehold.Handle(hs, "sleeper", func(ctx context.Context, t *leasehold.Task[echo]) (echo, error) {
		if _, err := workflow.Step(ctx, "before", func(context.Context) (int, error) { return 1, nil }); err != nil {
			return echo{}, err
		}
		if err := workflow.Sleep(ctx, sleepFor()); err != nil {
			return echo{}, err
		}
		n, err := workflow.Step(ctx, "after", func(context.Context) (int, error) { return 2, nil })
		return echo{N: n}, err
	})
}

// sleepFor is the sleep of the "sleeper" kind: short, so the bench does
// not wait long; a wake-up within 15 minutes comes as a delayed token.
func sleepFor() time.Duration { return 2 * time.Second }

// shape is one workflow shape the bench runs, with what its design
// says it costs and what its counterparts on Step Functions Standard and
// Lambda durable functions would be charged for.
type shape struct {
	name     string
	perRound int // workflows started together (a bounded backlog)
	// runs, when set, is how many of it a bench runs, whatever
	// LEASEHOLD_BENCH_WORKFLOWS says (a map of 1,000 is 1,000 tasks).
	runs     int
	start    func(h *harness, id string) []string
	callback bool // its tasks wait for a callback, which the harness gives
	// after, when set, runs once a round's tasks have succeeded, counted
	// (a read of what they published, say).
	after func(h *harness, ids []string)
	// steps: a chain's or a Step workflow's length (0 for the others); the
	// goal of issue 12 is priced for 4.
	steps int
	// design is the happy path's writes per workflow by kind, as the meter
	// names them (docs/workflows.md); designWU their write units.
	design   map[string]float64
	designWU float64
	// Step Functions Standard: state transitions, and the Lambda
	// invocations its Task states make. Durable functions: durable
	// operations, and invocations (the first and one per resume).
	sfTransitions, sfInvocations float64
	durableOps, durableInvokes   float64
	counterpart                  string // the equivalent on the other two
}

// chain is a workflow of n "step" tasks, each After the one before.
func chain(n int) shape {
	k := float64(n - 1) // dependents
	return shape{
		name:     fmt.Sprintf("%d-step chain", n),
		steps:    n,
		perRound: max(1, 10/n),
		start: func(h *harness, id string) []string {
			ids := make([]string, n)
			for i := range ids {
				ids[i] = fmt.Sprintf("%s-%d", id, i+1)
				s := leasehold.Submission{Kind: "step", Payload: echo{N: i}, ID: ids[i]}
				if i > 0 {
					s.After = []string{ids[i-1]}
				}
				h.enqueue(s)
			}
			return ids
		},
		design: map[string]float64{
			"create (PENDING)": 1, "create (WAITING)": k,
			"watch": k, "notify": k, "resume and claim": k, "claim": 1, "finish or release": float64(n),
		},
		// Each dependent sits in the sweep index at its wait's deadline:
		// the create puts the entry (4 write units: the item, by_created,
		// by_kind and sweep), the resume removes it (2).
		designWU:      listedCreate + (listedCreate+1)*k + k + k + 2*k + 1 + float64(n),
		sfTransitions: float64(n), sfInvocations: float64(n),
		durableOps: float64(n) + 1, durableInvokes: 1,
		counterpart: fmt.Sprintf("SF: %d Task states; durable: %d steps", n, n),
	}
}

// linked is a chain of n "step" tasks known at enqueue (leasehold.Submission.Then):
// each link is created and claimed from the token its predecessor sends
// when it succeeds, with no WAITING create, watch, notify or wake-up.
func linked(n int) shape {
	k := float64(n - 1) // links after the head
	return shape{
		name:     fmt.Sprintf("%d-link chain (Then)", n),
		steps:    n,
		perRound: max(1, 10/n),
		start: func(h *harness, id string) []string {
			links := make([]leasehold.Link, n-1)
			ids := []string{id}
			for i := range links {
				links[i] = leasehold.Link{Kind: "step", Payload: echo{N: i + 1}}
				ids = append(ids, fmt.Sprintf("%s#%d", id, i+2))
			}
			h.enqueue(leasehold.Submission{Kind: "step", Payload: echo{N: 0}, ID: id, Then: links})
			return ids
		},
		design: map[string]float64{
			"create (PENDING)": 1, "claim": 1, "create (RUNNING)": k, "finish or release": float64(n),
		},
		// The head: create with its listing entries (listedCreate), claim,
		// finish; each link: create claimed (1: listed under the head
		// unless it fails), finish.
		designWU:      listedCreate + 1 + k + float64(n),
		sfTransitions: float64(n), sfInvocations: float64(n),
		durableOps: float64(n) + 1, durableInvokes: 1,
		counterpart: fmt.Sprintf("SF: %d Task states; durable: %d steps", n, n),
	}
}

// listedCreate is the write units of a client task's create: the item
// and its entries in the listing indexes by_created and by_kind (issue 39:
// a task of the default work queue has no by_queue entry).
const listedCreate = 3

// mapConcurrency is the map shape's MaxConcurrency.
const mapConcurrency = 50

// mapped is a parent that maps n "echo" children, conc at a time
// (workflow.Map, sliding: docs/workflows.md, "Sliding"): each child that
// ends starts its slot's next one and counts itself in its slot group; the
// parent runs once per batch of items it writes ahead into pages.
func mapped(n, conc int) shape {
	k := float64(n)
	// The parent's runs: the first produces twice Ahead items, each later
	// one (woken at the low-water mark) up to twice Ahead past the
	// furthest slot; the last sums the map.
	ahead := max(conc, 256)
	batches := float64(1 + (max(0, n-2*ahead)+ahead-1)/ahead)
	runs := batches + 1
	pages := float64((n + 15) / 16)
	unparks := float64(min(conc, n))
	return shape{
		name:     fmt.Sprintf("map of %d (%d at a time)", n, conc),
		perRound: 1,
		runs:     1,
		start: func(h *harness, id string) []string {
			h.enqueue(leasehold.Submission{Kind: "mapper", Payload: echo{N: n}, ID: id})
			return []string{id}
		},
		design: withoutZeros(map[string]float64{
			"create (PENDING)": 1, "claim": 1, "suspend": runs - 1, "resume and claim": runs - 1, "checkpoint": 1, "finish or release": 1 + k,
			"create (RUNNING)": k, "map report": k, "map page": pages, "map group (create or rewrite)": 1,
			"map raise": batches - 1, "map unpark": unparks, "notify": runs - 1,
		}),
		// The parent: create (listedCreate), claim, each wait's suspension with its
		// sweep entry (2), its wake (the notify of its wake id, 1) and
		// resume, which removes the entry (2), the summary's checkpoint,
		// the finish; the group's create, a raise per later batch, the
		// first children's unparks; the pages (a 16-item page of echo
		// items is about 2 KB). Each child: create claimed (1), finish
		// (1), its report (1). Issue 36's target is 3.5 a child.
		designWU:      listedCreate + 1 + (2+1+2)*(runs-1) + 1 + 1 + 1 + (batches - 1) + unparks + 2*pages + k*(1+1+1),
		sfTransitions: k + 3, sfInvocations: k + 2,
		durableOps: k + 3, durableInvokes: 1,
		counterpart: fmt.Sprintf("SF: Task, Map of %d Tasks (MaxConcurrency %d), Task; durable: map of %d items, one step", n, conc, n),
	}
}

// withoutZeros drops the kinds of write a design makes none of.
func withoutZeros(design map[string]float64) map[string]float64 {
	for kind, n := range design {
		if n == 0 {
			delete(design, kind)
		}
	}
	return design
}

// stepped is one task whose handler runs n steps (workflow.Step), each
// recorded once: the durable-function way to write a workflow of n steps.
func stepped(n int) shape {
	k := float64(n)
	return shape{
		name:     fmt.Sprintf("%d steps of one task (Step)", n),
		steps:    n,
		perRound: 10,
		start: func(h *harness, id string) []string {
			h.enqueue(leasehold.Submission{Kind: "steps", Payload: echo{N: n}, ID: id})
			return []string{id}
		},
		design: map[string]float64{
			"create (PENDING)": 1, "claim": 1, "checkpoint": k, "finish or release": 1,
		},
		designWU:      listedCreate + 1 + k + 1,
		sfTransitions: k, sfInvocations: k,
		durableOps: k + 1, durableInvokes: 1,
		counterpart: fmt.Sprintf("SF: %d Task states; durable: %d steps", n, n),
	}
}

// fanout is a parent that awaits n "echo" children with workflow.All.
func fanout(n int) shape {
	k := float64(n)
	return shape{
		name:     fmt.Sprintf("%d-child fan-out/fan-in", n),
		perRound: 1,
		start: func(h *harness, id string) []string {
			h.enqueue(leasehold.Submission{Kind: "fanout", Payload: echo{N: n}, ID: id})
			return []string{id}
		},
		design: map[string]float64{
			"create (PENDING)": 1, "claim": 1, "suspend": 1, "resume and claim": 1, "finish or release": 1 + k,
			"create (RUNNING)": k, "notify": k,
		},
		// The suspension puts the parent in the sweep index at its wait's
		// deadline (2 write units), the resume removes it (2). All's
		// outcomes are read, not written: the run that reads them ends the
		// task.
		designWU:      listedCreate + 1 + 2 + 2 + (1 + k) + k + k,
		sfTransitions: k + 3, sfInvocations: k + 2,
		durableOps: k + 3, durableInvokes: 1,
		counterpart: fmt.Sprintf("SF: Task, Map of %d Tasks, Task; durable: map of %d items, one step", n, n),
	}
}

// callback is a task that waits for a callback (workflow.WaitForCallback),
// completed with Client.CompleteCallback as soon as it waits; the task then
// runs again to read the answer.
func callback() shape {
	return shape{
		name:     "callback",
		perRound: 10,
		callback: true,
		start: func(h *harness, id string) []string {
			h.enqueue(leasehold.Submission{Kind: "approve", Payload: echo{}, ID: id})
			return []string{id}
		},
		design: map[string]float64{
			"create (PENDING)": 1, "claim": 2, "suspend": 1, "checkpoint": 1, "finish or release": 1,
			"failed condition: claim": 1,
		},
		// The answer records the step callback:approval and leaves the task
		// PENDING with a sweep entry, should the message that runs it be
		// lost (the meter sees a checkpoint: 2 write units); the run that
		// reads it is a claim (1) and a finish that removes the entry (2);
		// the timeout token then finds the task finished (1).
		designWU:      listedCreate + 1 + 1 + 2 + 1 + 2 + 1,
		sfTransitions: 1, sfInvocations: 1,
		durableOps: 2, durableInvokes: 2,
		counterpart: "SF: one Task state with .waitForTaskToken; durable: waitForCallback",
	}
}

// sleep is a task of two steps with a durable sleep between them.
func sleep() shape {
	return shape{
		name:     "sleep between 2 steps",
		perRound: 10,
		start: func(h *harness, id string) []string {
			h.enqueue(leasehold.Submission{Kind: "sleeper", Payload: echo{}, ID: id})
			return []string{id}
		},
		design: map[string]float64{
			"create (PENDING)": 1, "claim": 2, "checkpoint": 3, "finish or release": 2,
		},
		// create with its listing entries (listedCreate), two claims, the two steps'
		// and the sleep's checkpoints (3); the snooze's release puts the
		// task in the sweep index at its wake-up, which is how a lost
		// token or a wake-up beyond 15 minutes reaches it (2), and the
		// finish takes it out (2).
		designWU:      listedCreate + 2 + 3 + 2 + 2,
		sfTransitions: 3, sfInvocations: 2,
		durableOps: 3, durableInvokes: 2,
		counterpart: "SF: Task, Wait, Task; durable: step, wait, step",
	}
}

func (h *harness) enqueue(s leasehold.Submission) {
	ctx, cancel := context.WithTimeout(h.t.Context(), awstest.Scale(10*time.Second))
	defer cancel()
	if _, err := h.client.Enqueue(ctx, s); err != nil {
		h.t.Fatalf("Enqueue %s: %v", s.Kind, err)
	}
}

// workflowResult is what n workflows of w cost on the stack.
type workflowResult struct {
	w         shape
	n         int
	counts    Counts
	empty     int // receives that brought nothing, left out of counts
	delivered int // messages handed to the worker
}

// runWorkflows runs n workflows of w, w.perRound at a time, and counts
// everything they cost: each round is drained until its tasks have
// succeeded (and, for callbacks, until the timeout tokens came back), then
// the queue until a receive brings nothing.
func (h *harness) runWorkflows(w shape, n int) workflowResult {
	h.meter.Reset()
	h.empty, h.delivered, h.acked = 0, 0, 0
	for done := 0; done < n; done += w.perRound {
		var ids []string
		for range min(w.perRound, n-done) {
			ids = append(ids, w.start(h, nextID(strings.ReplaceAll(w.name, "/", "-")))...)
		}
		acked := h.acked
		if w.callback {
			h.drainUntil(w.name, func() bool { return h.allIn(ids, "WAITING") })
			h.completeCallbacks(ids)
			// Three messages per task: the enqueue's, the answer's (the
			// task, PENDING, runs again to read it) and the timeout token.
			h.drainUntil(w.name, func() bool { return h.allIn(ids, "SUCCEEDED") && h.acked-acked >= 3*len(ids) })
		} else {
			h.drainUntil(w.name, func() bool { return h.allIn(ids, "SUCCEEDED") })
		}
		if w.after != nil {
			w.after(h, ids)
		}
	}
	for h.pollCounted(); h.empty == 0; h.pollCounted() {
	}
	counts := h.meter.Snapshot()
	counts.Calls["SQS ReceiveMessage"] -= h.empty
	return workflowResult{w: w, n: n, counts: counts, empty: h.empty, delivered: h.delivered}
}

// drainUntil polls through the metered worker until done holds. It gives
// up only when no message has been acknowledged for 90 s (scaled): a map of
// 1,000 children takes thousands of messages, as long as a loaded machine
// needs for them, and a stall is what it must catch.
func (h *harness) drainUntil(name string, done func() bool) {
	stall := awstest.Scale(90 * time.Second)
	deadline, acked := time.Now().Add(stall), h.acked
	for !done() {
		if h.acked != acked {
			deadline, acked = time.Now().Add(stall), h.acked
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("%s: not done after %d messages acknowledged, none for %s", name, h.acked, stall)
		}
		h.pollCounted()
	}
}

// allIn says whether every task of ids has status, read with the meter's
// own client (not counted).
func (h *harness) allIn(ids []string, status string) bool {
	for _, id := range ids {
		item, err := h.meter.read(h.t.Context(), id)
		if err != nil {
			h.t.Fatalf("read %s: %v", id, err)
		}
		if s, ok := item["status"].(*types.AttributeValueMemberS); !ok || s.Value != status {
			return false
		}
	}
	return true
}

// completeCallbacks completes each task of ids with the token its handler
// handed out.
func (h *harness) completeCallbacks(ids []string) {
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	for len(want) > 0 {
		var cb callbackToken
		select {
		case cb = <-h.callbacks:
		case <-time.After(awstest.Scale(10 * time.Second)):
			h.t.Fatalf("callback tokens missing for %v", want)
		}
		if !want[cb.id] {
			continue
		}
		delete(want, cb.id)
		ctx, cancel := context.WithTimeout(h.t.Context(), awstest.Scale(10*time.Second))
		_, err := h.client.CompleteCallback(ctx, cb.token, echo{N: 1})
		cancel()
		if err != nil {
			h.t.Fatalf("CompleteCallback %s: %v", cb.id, err)
		}
	}
}

// Per workflow.
func (r workflowResult) per(v float64) float64 { return v / float64(r.n) }

func (r workflowResult) sqsRequests() float64 {
	var n float64
	for op, c := range r.counts.Calls {
		if strings.HasPrefix(op, "SQS ") {
			n += float64(c)
		}
	}
	return r.per(n)
}

// invocations is the Lambda invocations per workflow: the messages it
// brought, in batches of lambdaBatch (the cost model of single tasks).
func (r workflowResult) invocations() float64 {
	return r.per(float64(r.delivered)) / lambdaBatch
}

// cost is r's cost per million workflows: its write and read units, its
// SQS requests and its Lambda invocations (not the handlers' own time).
func (r workflowResult) cost() float64 {
	return 1e6 * (r.per(r.counts.WU)*priceWRU + r.per(r.counts.RU)*priceRRU + r.sqsRequests()*priceSQS +
		r.invocations()*lambdaInvocation)
}

// happyPath is the write units per workflow along the design's path: each
// write kind the design names, as many times as it says, at its mean
// measured cost; plus any other kind of write that landed (a write the
// design does not know of). Failed conditions the design does not name are
// left out: on a loaded emulator an SDK retry of a write whose answer was
// lost fails its condition, and a redelivered message finds its task taken.
func (r workflowResult) happyPath() (wu float64, missing []string) {
	for kind, us := range r.counts.ByWrite {
		n, designed := r.w.design[kind]
		if !designed {
			if strings.HasPrefix(kind, "failed condition") {
				continue
			}
			n = r.per(float64(len(us)))
		}
		wu += n * mean(us)
	}
	for kind := range r.w.design {
		if len(r.counts.ByWrite[kind]) == 0 {
			missing = append(missing, kind)
		}
	}
	sort.Strings(missing)
	return wu, missing
}

func mean(v []float64) float64 {
	var sum float64
	for _, x := range v {
		sum += x
	}
	return sum / float64(len(v))
}

// Prices of the other two, us-east-1 list (docs/performance.md names the
// sources).
const (
	priceSFTransition = 25.0 / 1e6 // Step Functions Standard, per state transition
	priceDurableOp    = 8.0 / 1e6  // Lambda durable functions, per durable operation
	priceDurableGB    = 0.25       // durable functions, per GB of data written
	durableOpBytes    = 100        // data written per durable operation, estimated
	// lambdaInvocation is one invocation in the model of cost_test.go:
	// the request, and lambdaOverhead seconds at lambdaGB.
	lambdaInvocation = priceLambdaReq + lambdaGB*lambdaOverhead*priceLambdaGBs
)

// stepFunctions is the cost per million workflows of w on Step Functions
// Standard: its transitions, and one Lambda invocation per Task state run.
func (w shape) stepFunctions() float64 {
	return 1e6 * (w.sfTransitions*priceSFTransition + w.sfInvocations*lambdaInvocation)
}

// durable is the cost per million workflows of w as a Lambda durable
// function: its operations, the data they write, and its invocations.
func (w shape) durable() float64 {
	return 1e6 * (w.durableOps*priceDurableOp + w.durableOps*durableOpBytes/1e9*priceDurableGB + w.durableInvokes*lambdaInvocation)
}

// renderWorkflows is the generated report on the workflows.
func renderWorkflows(rs []workflowResult) string {
	var b strings.Builder
	b.WriteString("\n### Workflows\n\nPer workflow, each started with `Client.Enqueue` and run through the worker (`internal/bench/workflow_test.go`):\n\n")
	b.WriteString("| workflow | runs | calls per workflow by operation | write units | of which index | design (happy path) | read units | SQS requests | messages | cost per million workflows |\n|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rs {
		var ops []string
		for op, c := range r.counts.Calls {
			ops = append(ops, fmt.Sprintf("%s %.2f", op, r.per(float64(c))))
		}
		sort.Strings(ops)
		var gsi float64
		for _, u := range r.counts.GSIWU {
			gsi += u
		}
		hp, _ := r.happyPath()
		fmt.Fprintf(&b, "| %s | %d | %s | **%.2f** | %.2f | %.2f (design %.0f) | %.2f | %.2f | %.2f | **$%.2f** |\n",
			r.w.name, r.n, strings.Join(ops, ", "), r.per(r.counts.WU), r.per(gsi), hp, r.w.designWU,
			r.per(r.counts.RU), r.sqsRequests(), r.per(float64(r.delivered)), r.cost())
	}
	b.WriteString("\nWrites per workflow, by kind (count per workflow, mean write units each):\n\n| workflow | write | per workflow | design | write units each |\n|---|---|---|---|---|\n")
	for _, r := range rs {
		var kinds []string
		for k := range r.counts.ByWrite {
			kinds = append(kinds, k)
		}
		sort.Strings(kinds)
		for _, k := range kinds {
			d := "-"
			if n, ok := r.w.design[k]; ok {
				d = fmt.Sprintf("%.0f", n)
			}
			fmt.Fprintf(&b, "| %s | %s | %.2f | %s | %.2f |\n", r.w.name, k, r.per(float64(len(r.counts.ByWrite[k]))), d, mean(r.counts.ByWrite[k]))
		}
	}
	b.WriteString("\nNext to Step Functions Standard and Lambda durable functions (cost per million workflows; the handlers' own run time, the same on all three, left out):\n\n")
	b.WriteString("| workflow | leasehold | Step Functions Standard | transitions | Lambda durable functions | durable operations | leasehold ÷ durable | counted as |\n|---|---|---|---|---|---|---|---|\n")
	for _, r := range rs {
		fmt.Fprintf(&b, "| %s | **$%.2f** | $%.2f | %.0f | $%.2f | %.0f | %.2f | %s |\n", r.w.name, r.cost(), r.w.stepFunctions(), r.w.sfTransitions,
			r.w.durable(), r.w.durableOps, r.cost()/r.w.durable(), r.w.counterpart)
	}
	for _, r := range rs {
		if r.w.steps != 4 {
			continue
		}
		ratio := r.cost() / r.w.durable()
		verdict := "**met**"
		if ratio > 0.25 {
			verdict = "**not met**"
		}
		fmt.Fprintf(&b, "\nGoal (issue 12): a 4-step workflow at most a quarter of durable functions' price, $%.2f. leasehold (%s): $%.2f, %.2f of it: %s.\n",
			r.w.durable()/4, r.w.name, r.cost(), ratio, verdict)
	}
	fmt.Fprintf(&b, "\nPrices: Step Functions Standard $%.0f per million state transitions, plus one Lambda invocation ($%.4f per million: the request and %.0f ms at %.0f MB) per Task state; Lambda durable functions $%.0f per million durable operations, $%.2f per GB written (%d B an operation, estimated), plus $%.4f per million per invocation. Lambda invocations of leasehold: the messages delivered, in batches of %d.\n",
		priceSFTransition*1e6, lambdaInvocation*1e6, lambdaOverhead*1000, lambdaGB*1024, priceDurableOp*1e6, priceDurableGB, durableOpBytes, lambdaInvocation*1e6, lambdaBatch)
	return b.String()
}
