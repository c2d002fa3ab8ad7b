package chaos_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/chaos"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/token"
	"github.com/leasehold/leasehold/workflow"
)

// workflowPlan is the workflow part of a run: parents that fan out, chains
// of dependencies (some with a head that fails for good) and tasks that wait
// for a callback.
type workflowPlan struct {
	wf     chaos.Workflows
	expect map[string]lease.Status
	valid  []string // every workflow task, children included
	bodies []string // the inline tokens to send (not the children's)
	// cancel maps the parents the test cancels to how long after their
	// suspension it does.
	cancel map[string]time.Duration
}

// Workflow sizes: per 1000 tasks, 20 parents of 5-10 children (every fifth
// of 20), 10 parents of 20 children that the test cancels, 25 chains of 3
// (After), 25 chains of 3 known at enqueue (Then),
// 20 after-any groups, 20 callback tasks and 83 tasks of 4-6 steps; at
// least a few of each in a small run (16 step tasks).
func makeWorkflows(p params, rng *rand.Rand) workflowPlan {
	wp := workflowPlan{
		wf: chaos.Workflows{
			Fans: map[string][]string{}, ChildN: map[string]int{},
			After: map[string][]string{}, AfterAny: map[string]bool{}, Callbacks: map[string]bool{},
			Steps: map[string]int{}, Sleeps: map[string]int{}, Orders: map[string][]string{}, Maps: map[string]chaos.MapPlan{},
		},
		expect: map[string]lease.Status{},
		cancel: map[string]time.Duration{},
	}
	add := func(id, body string) {
		wp.valid = append(wp.valid, id)
		wp.bodies = append(wp.bodies, body)
	}
	type step struct {
		N      int  `json:"n"`
		WorkMS int  `json:"work_ms"`
		Fail   bool `json:"fail,omitempty"`
	}
	fans := max(3, p.tasks/50)
	cancelled := max(2, p.tasks/100)
	for i := range fans + cancelled {
		parent := fmt.Sprintf("f%03d", i)
		n := 5 + rng.IntN(6)
		if i%5 == 0 || i >= fans {
			n = 20
		}
		if i >= fans {
			// Cancelled by the test once its suspension lands: every
			// other one at once (most children have no item yet), the
			// others while the children run.
			parent = fmt.Sprintf("x%03d", i-fans)
			wp.cancel[parent] = 0
			if i%2 == 1 {
				wp.cancel[parent] = time.Duration(500+rng.IntN(1000)) * time.Millisecond
			}
		}
		kids := make([]step, n)
		for k := range kids {
			id := workflow.ChildIDIn(parent, "kids", k)
			// Long enough for the fan-in to last seconds, in which
			// workers are killed.
			kids[k] = step{N: 1000*i + k, WorkMS: 300 + rng.IntN(1200)}
			if rng.IntN(4) == 0 {
				kids[k].WorkMS = 2200 + rng.IntN(1800) // renewed at least once
			}
			// Every fourth parent has a child that fails for good: the
			// parent still resumes, and reads the failure.
			if i%4 == 2 && k == 0 && i < fans {
				kids[k].Fail = true
				wp.expect[id] = lease.StatusFailed
			}
			wp.wf.Fans[parent] = append(wp.wf.Fans[parent], id)
			wp.wf.ChildN[id] = kids[k].N
			wp.valid = append(wp.valid, id)
		}
		payload, _ := json.Marshal(map[string]any{"children": kids})
		add(parent, fmt.Sprintf(`{"v":1,"kind":"fan","id":%q,"payload":%s,"max_attempts":100}`, parent, payload))
	}
	for i := range max(4, p.tasks/40) {
		prev := ""
		for s := range 3 {
			id := fmt.Sprintf("k%03d-%d", i, s)
			fail := s == 0 && i%3 == 1 // its dependents must be cancelled
			body := fmt.Sprintf(`{"v":1,"kind":"step","id":%q,"payload":{"n":%d,"work_ms":%d,"fail":%t},"max_attempts":100`,
				id, s, 20+rng.IntN(300), fail)
			if prev != "" {
				body += fmt.Sprintf(`,"after":[%q]`, prev)
				wp.wf.After[id] = []string{prev}
			}
			switch {
			case fail:
				wp.expect[id] = lease.StatusFailed
			case s > 0 && i%3 == 1:
				wp.expect[id] = lease.StatusCancelled
			}
			add(id, body+"}")
			prev = id
		}
	}
	// Chains known at enqueue (Then): 3 tasks in one inline token, each
	// link run from the token its predecessor sends; in every third the
	// second link fails for good, and the third must be CANCELLED.
	for i := range max(4, p.tasks/40) {
		head := fmt.Sprintf("t%03d", i)
		type link struct {
			ID          string `json:"id"`
			Kind        string `json:"kind"`
			Payload     step   `json:"payload"`
			MaxAttempts int    `json:"max_attempts"`
		}
		var links []link
		prev := head
		for s := 2; s <= 3; s++ {
			id := fmt.Sprintf("%s#%d", head, s)
			fail := s == 2 && i%3 == 1
			links = append(links, link{ID: id, Kind: "step", Payload: step{N: s, WorkMS: 20 + rng.IntN(300), Fail: fail}, MaxAttempts: chaos.MaxAttempts})
			wp.wf.After[id] = []string{prev}
			switch {
			case fail:
				wp.expect[id] = lease.StatusFailed
			case i%3 == 1:
				wp.expect[id] = lease.StatusCancelled
			}
			wp.valid = append(wp.valid, id)
			prev = id
		}
		then, _ := json.Marshal(links)
		add(head, fmt.Sprintf(`{"v":1,"kind":"step","id":%q,"payload":{"n":1,"work_ms":%d},"max_attempts":100,"then":%s}`, head, 20+rng.IntN(300), then))
	}
	// After-any groups: 2-3 heads, one of which fails for good in every
	// other group; the dependent runs once they have all ended.
	for i := range max(2, p.tasks/50) {
		dep := fmt.Sprintf("g%03d-d", i)
		var heads []string
		for h := range 2 + rng.IntN(2) {
			id := fmt.Sprintf("g%03d-h%d", i, h)
			fail := i%2 == 0 && h == 0
			if fail {
				wp.expect[id] = lease.StatusFailed
			}
			add(id, fmt.Sprintf(`{"v":1,"kind":"step","id":%q,"payload":{"n":%d,"work_ms":%d,"fail":%t},"max_attempts":100}`,
				id, h, 20+rng.IntN(600), fail))
			heads = append(heads, id)
		}
		wp.wf.After[dep], wp.wf.AfterAny[dep] = heads, true
		after, _ := json.Marshal(heads)
		add(dep, fmt.Sprintf(`{"v":1,"kind":"step","id":%q,"payload":{"n":%d,"work_ms":%d},"max_attempts":100,"after":%s,"after_any":true}`,
			dep, i, 20+rng.IntN(300), after))
	}
	// Tasks written as steps: every other one has a step that fails
	// transiently in its first one or two attempts.
	// Enough checkpoints (some 80 in a 200-task run) that the proxy's
	// lost answers (3 %) hit a few.
	for i := range max(16, p.tasks/12) {
		id := fmt.Sprintf("s%03d", i)
		n := 4 + rng.IntN(3)
		failAt, failTimes := -1, 0
		if i%2 == 0 {
			failAt, failTimes = rng.IntN(n), 1+rng.IntN(2)
		}
		wp.wf.Steps[id] = n
		// Every third sleeps (workflow.Sleep) 1 to 3 s after one of its
		// steps: the sleep crosses the workers' kills and restarts.
		sleepAfter, sleepMS := -1, 0
		if i%3 == 0 {
			sleepAfter, sleepMS = rng.IntN(n-1), 1000+rng.IntN(2000)
			wp.wf.Sleeps[id] = sleepAfter
		}
		add(id, fmt.Sprintf(`{"v":1,"kind":"steps","id":%q,"payload":{"steps":%d,"work_ms":%d,"fail_at":%d,"fail_times":%d,"sleep_after":%d,"sleep_ms":%d},"max_attempts":100}`,
			id, n, 50+rng.IntN(350), failAt, failTimes, sleepAfter, sleepMS))
	}
	// Orders: several awaits in one handler (step, 4-8 children with
	// workflow.All, step, a callback with workflow.WaitForCallback, a
	// sleep of 1-2 s across the kills, step).
	for i := range max(3, p.tasks/50) {
		id := fmt.Sprintf("o%03d", i)
		kids := make([]step, 4+rng.IntN(5))
		for k := range kids {
			kid := workflow.ChildIDIn(id, "pack", k)
			kids[k] = step{N: 100000 + 100*i + k, WorkMS: 200 + rng.IntN(1200)}
			wp.wf.ChildN[kid] = kids[k].N
			wp.wf.Orders[id] = append(wp.wf.Orders[id], kid)
			wp.valid = append(wp.valid, kid)
		}
		wp.wf.Steps[id], wp.wf.Sleeps[id] = 3, 1
		payload, _ := json.Marshal(map[string]any{"children": kids, "work_ms": 50 + rng.IntN(200), "timeout_ms": 45000, "sleep_ms": 1000 + rng.IntN(1000)})
		add(id, fmt.Sprintf(`{"v":1,"kind":"order","id":%q,"payload":%s,"max_attempts":100}`, id, payload))
	}
	// A sliding map of twice as many children as the run has plain tasks
	// (2,000 in a 1,000-task run, 400 at CI size), mapConc at a time,
	// across the kills; every 50th child fails for good and the map
	// tolerates 5 % of failures, so its summary must count both.
	{
		id := "map-000"
		n, failEvery := mapChildren(p.tasks), 50
		plan := chaos.MapPlan{N: n, Conc: mapConc}
		for k := range n {
			kid := workflow.ChildIDIn(id, "items", k)
			wp.wf.ChildN[kid] = k
			wp.valid = append(wp.valid, kid)
			plan.Kids = append(plan.Kids, kid)
			if k%failEvery == failEvery-1 {
				wp.expect[kid] = lease.StatusFailed
			}
		}
		wp.wf.Maps[id] = plan
		add(id, fmt.Sprintf(`{"v":1,"kind":"mapper","id":%q,"payload":{"n":%d,"conc":%d,"work_ms":%d,"fail_every":%d,"tolerate_pct":5},"max_attempts":100}`,
			id, n, mapConc, 50+rng.IntN(100), failEvery))
	}
	for i := range max(3, p.tasks/50) {
		id := fmt.Sprintf("b%03d", i)
		wp.wf.Callbacks[id] = true
		add(id, fmt.Sprintf(`{"v":1,"kind":"cb","id":%q,"payload":{"timeout_ms":45000},"max_attempts":100}`, id))
	}
	addOps(p, rng, &wp)
	return wp
}

// mapConc is the sliding map's MaxConcurrency. It is above what the fleet
// runs of the map at once (4 workers of 8 handlers, shared with the other
// tasks; a CI-size run had at most 14 of the map's children running at
// once), so the bound does not bind in a run: the unit tests show the
// check catches C+1. At 12 a CI-size run had at most 6 at once and its
// 400 children did not all end within the run's bound (7m39s): each of
// the 120 exits right after a child's end stalls that slot until the
// child's message comes back.
const mapConc = 50

// mapChildren is the size of the run's sliding map: twice its plain
// tasks, at least 100.
func mapChildren(tasks int) int { return max(100, 2*tasks) }

// callbackCopies is how many times each callback token is answered, at
// once: half through the Go client, half as messages on the work queue.
const callbackCopies = 4

// answerer answers every callback token the workers hand out (their
// "callback" evidence lines), callbackCopies times each, concurrently.
type answerer struct {
	t      *testing.T
	dir    string
	client *leasehold.Client
	sq     *sqs.Client
	queue  string

	// races: how each racer's callback is answered (addOps).
	races map[string]chaos.RacePlan

	mu       sync.Mutex
	answered map[string]bool // tokens answered
	offsets  map[string]int  // evidence file -> bytes read
	answers  []chaos.CallbackAnswer
	wg       sync.WaitGroup
}

// run polls the evidence files until ctx ends, then waits for the answers
// in flight.
func (a *answerer) run(ctx context.Context) {
	defer a.wg.Wait()
	tick := time.NewTicker(300 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		for _, e := range a.newCallbacks() {
			if e.Token == "" || a.answered[e.Token] {
				continue
			}
			a.answered[e.Token] = true
			// Every other token lets its messages go first, so that both
			// forms win some waits; the copies of each form race. A
			// racer's token is answered as its plan says: every copy at
			// once, or after the timer's deadline, or never.
			lag, copies, all := time.Duration(0), callbackCopies, false
			if len(a.answered)%2 == 0 {
				lag = 6 * time.Second
			}
			if plan, ok := a.races[e.Task]; ok {
				lag, copies = raceLag(plan)
				all = true
			}
			for k := range copies {
				a.wg.Add(1)
				go func() {
					defer a.wg.Done()
					if (k%2 == 0 || all) && lag > 0 {
						select {
						case <-ctx.Done():
						case <-time.After(lag):
						}
					}
					a.answer(ctx, e, k)
				}()
			}
		}
	}
}

// newCallbacks reads the "callback" lines added to the evidence files since
// the last call (whole lines only; a line cut by a SIGKILL is skipped).
func (a *answerer) newCallbacks() []chaos.HandlerEvent {
	files, err := filepath.Glob(filepath.Join(a.dir, "evidence-*.jsonl"))
	if err != nil {
		return nil
	}
	var out []chaos.HandlerEvent
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil || len(b) <= a.offsets[f] {
			continue
		}
		b = b[a.offsets[f]:]
		end := bytes.LastIndexByte(b, '\n')
		if end < 0 {
			continue
		}
		a.offsets[f] += end + 1
		for line := range bytes.SplitSeq(b[:end], []byte("\n")) {
			if !bytes.Contains(line, []byte(`"ev":"callback"`)) {
				continue
			}
			var e chaos.HandlerEvent
			if json.Unmarshal(line, &e) == nil {
				out = append(out, e)
			}
		}
	}
	return out
}

func (a *answerer) answer(ctx context.Context, e chaos.HandlerEvent, k int) {
	ans := chaos.CallbackAnswer{Task: e.Task, Fence: e.Fence, Via: "client"}
	result := map[string]any{"fence": e.Fence, "copy": k}
	if k%2 == 1 {
		ans.Via = "sqs"
		result["via"] = "sqs"
		raw, _ := json.Marshal(result)
		body, err := token.CallbackMessage(e.Token, raw, false, "")
		if err == nil {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
			_, err = a.sq.SendMessage(cctx, &sqs.SendMessageInput{QueueUrl: aws.String(a.queue), MessageBody: aws.String(body)})
			cancel()
		}
		if err != nil {
			ans.Err = err.Error()
		}
	} else {
		result["via"] = "client"
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*callTimeout)
		_, err := a.client.CompleteCallback(cctx, e.Token, result)
		cancel()
		switch {
		case err == nil:
			ans.Accepted = true
		case errors.Is(err, leasehold.ErrBadCallback):
			ans.Rejected = true
		default:
			ans.Err = err.Error()
		}
	}
	a.mu.Lock()
	a.answers = append(a.answers, ans)
	a.mu.Unlock()
}

func (a *answerer) result() []chaos.CallbackAnswer {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]chaos.CallbackAnswer(nil), a.answers...)
}

// killDuringFanIn SIGKILLs a random worker when every other parent's
// suspension lands (seen in the ledger), while its children run, until ctx
// ends; it returns how many it killed.
func killDuringFanIn(ctx context.Context, t *testing.T, ledger *chaos.Ledger, fleet *chaos.Fleet, fans map[string][]string, seed uint64) int {
	rng := rand.New(rand.NewPCG(seed, seed^7))
	targets := map[string]bool{}
	for i, parent := range slices.Sorted(maps.Keys(fans)) {
		if i%2 == 0 {
			targets[parent] = true
		}
	}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	seen, kills := 0, 0
	for {
		select {
		case <-ctx.Done():
			return kills
		case <-tick.C:
		}
		var ws []chaos.Write
		ws, seen = ledger.WritesFrom(seen)
		for _, w := range ws {
			if !targets[w.Task] || w.FromWaiting || w.Status != string(lease.StatusWaiting) {
				continue
			}
			delete(targets, w.Task)
			if err := fleet.KillRandom(rng); err != nil {
				t.Errorf("chaos: kill during fan-in: %v", err)
				return kills
			}
			kills++
		}
	}
}

// freezeChildHolders freezes the worker that claims a child, for d (longer
// than its message's visibility and its lease, so that another worker takes
// the child over while it is frozen), at most one at a time and one every
// `every`, until ctx ends, and returns how many it froze. Each child so
// frozen is listed in the file doomed: the worker that takes it over
// exits right after its finish write, so the frozen holder wakes to find
// the child ended and its parent untold (exits_beside_stale).
func freezeChildHolders(ctx context.Context, ledger *chaos.Ledger, fleet *chaos.Fleet, doomed string, d, every time.Duration) int {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	var (
		seen, frozen int
		last         time.Time
		thaw         <-chan time.Time
		resume       func()
	)
	defer func() {
		if resume != nil {
			resume()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return frozen
		case <-thaw:
			resume()
			resume, thaw = nil, nil
		case <-tick.C:
		}
		var ws []chaos.Write
		ws, seen = ledger.WritesFrom(seen)
		if resume != nil || time.Since(last) < every {
			continue
		}
		for _, w := range ws {
			worker, _, _ := strings.Cut(w.Owner, "/")
			if w.Status != string(lease.StatusRunning) || !strings.Contains(w.Task, "/") || worker == "" {
				continue
			}
			if r, ok := fleet.PauseNamed(worker); ok {
				resume, thaw, last = r, time.After(d), time.Now()
				if doom(doomed, w.Task) == nil {
					frozen++
				}
				break
			}
		}
	}
}

// doom appends id to the file doomed.
func doom(doomed, id string) error {
	f, err := os.OpenFile(doomed, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	_, err = f.WriteString(id + "\n")
	return errors.Join(err, f.Close())
}

// cancelParents cancels each parent of targets with client once its
// suspension lands (seen in the ledger), after its delay, until ctx ends,
// and returns the calls. A call that fails otherwise than "already
// finished" is tried again, at most 3 times, as docs/workflows.md advises.
func cancelParents(ctx context.Context, ledger *chaos.Ledger, client *leasehold.Client, targets map[string]time.Duration) []chaos.CancelCall {
	var (
		mu    sync.Mutex
		calls []chaos.CancelCall
		wg    sync.WaitGroup
	)
	defer wg.Wait()
	left := maps.Clone(targets)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	seen := 0
	for len(left) > 0 {
		select {
		case <-ctx.Done():
			wg.Wait()
			return calls
		case <-tick.C:
		}
		var ws []chaos.Write
		ws, seen = ledger.WritesFrom(seen)
		for _, w := range ws {
			delay, ok := left[w.Task]
			if !ok || w.FromWaiting || w.Status != string(lease.StatusWaiting) {
				continue
			}
			delete(left, w.Task)
			wg.Add(1)
			go func() {
				defer wg.Done()
				select {
				case <-ctx.Done():
					return
				case <-time.After(delay):
				}
				c := chaos.CancelCall{Task: w.Task}
				for range 3 {
					cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*callTimeout)
					c.Sent = time.Now()
					info, err := client.Cancel(cctx, w.Task)
					c.Returned = time.Now()
					cancel()
					c.Status, c.Err, c.Finished = string(info.Status), "", false
					if err == nil {
						break
					}
					c.Err, c.Finished = err.Error(), errors.Is(err, leasehold.ErrFinished)
					if c.Finished {
						break
					}
				}
				mu.Lock()
				calls = append(calls, c)
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	return calls
}

// viaProxy sends the DynamoDB calls of an SDK config (those to upstream) to
// the proxy at proxyURL instead, leaving the others alone.
type viaProxy struct {
	next           aws.HTTPClient
	upstream, repl *url.URL
}

func (v viaProxy) Do(req *http.Request) (*http.Response, error) {
	if req.URL.Host == v.upstream.Host {
		req = req.Clone(req.Context())
		req.URL.Scheme, req.URL.Host = v.repl.Scheme, v.repl.Host
		req.Host = v.repl.Host
	}
	return v.next.Do(req)
}

// callbackClient is a leasehold client whose DynamoDB calls go through a
// proxy without faults that records them in the ledger under
// chaos.ClientName, so that the callbacks it lands are seen.
func callbackClient(t *testing.T, cfg aws.Config, dynamoUpstream string, ledger *chaos.Ledger, table, queue string) *leasehold.Client {
	t.Helper()
	px, err := chaos.StartProxy(dynamoUpstream, chaos.Faults{}, 1, ledger.Observe)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = px.Close(10 * time.Second) })
	up, err1 := url.Parse(dynamoUpstream)
	repl, err2 := url.Parse(px.URL())
	if err := errors.Join(err1, err2); err != nil {
		t.Fatal(err)
	}
	c := cfg.Copy()
	c.AppID = chaos.ClientName
	c.HTTPClient = viaProxy{next: cfg.HTTPClient, upstream: up, repl: repl}
	client, err := leasehold.NewClient(leasehold.ClientConfig{AWS: c, Table: table, QueueURL: queue})
	if err != nil {
		t.Fatal(err)
	}
	return client
}
