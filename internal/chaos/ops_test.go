package chaos_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/chaos"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/token"
)

// Sizes of the branches, races and messages (docs/chaos.md, "Branches,
// races and messages"): per 1000 tasks, 25 "branches" tasks, 40 racers
// and 25 inboxes; at least 4, 6 and 4.
func opsSizes(tasks int) (branches, racers, inboxes int) {
	return max(4, tasks/40), max(6, tasks/25), max(4, tasks/40)
}

// inboxTopics are the topics of an inbox's receives, in order: "a" is
// sent to by the client, "b" by messages on the work queue.
var inboxTopics = []string{"a", "b", "a", "b", "a"}

// inboxTimeout bounds each of an inbox's receives: far beyond the gaps
// between its messages, so that a timeout (which fails the task) means a
// message was lost.
const inboxTimeout = 4 * time.Minute

// addOps adds the branches, racers and inboxes to wp.
func addOps(p params, rng *rand.Rand, wp *workflowPlan) {
	wf := &wp.wf
	wf.Branches, wf.Races, wf.Inboxes = map[string]bool{}, map[string]chaos.RacePlan{}, map[string][]string{}
	add := func(id, body string) {
		wp.valid = append(wp.valid, id)
		wp.bodies = append(wp.bodies, body)
	}
	nb, nr, ni := opsSizes(p.tasks)
	// Branches: every other one has a step of branch b that fails
	// transiently in the first attempt, and every third's branch c sleeps
	// between its steps.
	for i := range nb {
		id := fmt.Sprintf("br%03d", i)
		wf.Branches[id] = true
		payload := map[string]any{"work_ms": 100 + rng.IntN(400), "fail_b": i%2 == 0}
		if i%3 == 0 {
			payload["sleep_ms"] = 1000 + rng.IntN(1000)
		}
		b, _ := json.Marshal(payload)
		add(id, fmt.Sprintf(`{"v":1,"kind":"branches","id":%q,"payload":%s,"max_attempts":100}`, id, b))
	}
	// Racers: a third answered as soon as the token is out, a third
	// after the timer's deadline, a third never.
	for i := range nr {
		id := fmt.Sprintf("r%03d", i)
		plan := chaos.RacePlan{Answer: []string{"early", "late", "never"}[i%3], TimerMS: 3000 + rng.IntN(2000)}
		wf.Races[id] = plan
		add(id, fmt.Sprintf(`{"v":1,"kind":"racer","id":%q,"payload":{"timer_ms":%d,"timeout_ms":60000},"max_attempts":100}`, id, plan.TimerMS))
	}
	for i := range ni {
		id := fmt.Sprintf("in%03d", i)
		wf.Inboxes[id] = inboxTopics
		b, _ := json.Marshal(map[string]any{"topics": inboxTopics, "timeout_ms": inboxTimeout.Milliseconds()})
		add(id, fmt.Sprintf(`{"v":1,"kind":"inbox","id":%q,"payload":%s,"max_attempts":100}`, id, b))
	}
}

// raceLag is how long after a racer's token is handed out the test
// answers it, and how many copies it sends (half by the client, half as
// messages); copies 0 for one it never answers.
func raceLag(plan chaos.RacePlan) (lag time.Duration, copies int) {
	switch plan.Answer {
	case "early":
		return 0, callbackCopies
	case "late":
		return time.Duration(plan.TimerMS)*time.Millisecond + 4*time.Second, 2
	}
	return 0, 0
}

// messenger sends each inbox its messages once it has started (its first
// claim seen in the ledger), one at a time, 0.3 to 2.3 s apart, across
// the kills and pauses: on topic "a" by the client (the first with Send,
// the second with SendOnce twice, the third with SendOnce), on topic "b"
// as messages on the work queue (with a message id, the second sent
// twice, in every other inbox; named by SQS's own message id in the
// others).
type messenger struct {
	client *leasehold.Client
	sq     *sqs.Client
	queue  string
	seed   uint64

	mu    sync.Mutex
	sends []chaos.MessageSend
}

// run sends until every inbox of targets has had its messages or ctx
// ends, and returns what it sent.
func (m *messenger) run(ctx context.Context, ledger *chaos.Ledger, targets map[string][]string) []chaos.MessageSend {
	var wg sync.WaitGroup
	left := map[string]bool{}
	for id := range targets {
		left[id] = true
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	seen, n := 0, uint64(0)
	for len(left) > 0 {
		select {
		case <-ctx.Done():
			left = nil
			continue
		case <-tick.C:
		}
		var ws []chaos.Write
		ws, seen = ledger.WritesFrom(seen)
		for _, w := range ws {
			if !left[w.Task] || w.Status != string(lease.StatusRunning) {
				continue
			}
			delete(left, w.Task)
			n++
			rng := rand.New(rand.NewPCG(m.seed, n))
			wg.Go(func() { m.sendAll(ctx, w.Task, targets[w.Task], rng) })
		}
	}
	wg.Wait()
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.sends)
}

// sendAll sends inbox id its messages, one per receive of topics.
func (m *messenger) sendAll(ctx context.Context, id string, topics []string, rng *rand.Rand) {
	k := map[string]int{}
	named := rng.IntN(2) == 0
	for _, topic := range topics {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(300+rng.IntN(2000)) * time.Millisecond):
		}
		msg := chaos.InboxMessage{ID: fmt.Sprintf("%s-%s%d", id, topic, k[topic]), Topic: topic, K: k[topic]}
		s := chaos.MessageSend{Task: id, Topic: topic, ID: msg.ID, K: msg.K}
		copies := 1
		switch {
		case topic == "a" && k[topic] == 0:
			s.Via = "send"
		case topic == "a":
			s.Via = "once"
			if k[topic] == 1 {
				copies = 2
			}
		default:
			s.Via = "sqs"
			if named && k[topic] == 1 {
				copies = 2
			}
		}
		k[topic]++
		for c := range copies {
			s.Copy = c
			m.sendOne(ctx, s, msg, named)
		}
	}
}

// sendOne sends one copy of msg as s says, and records it; a SendOnce
// that fails otherwise than by a refusal is tried again (3 tries), as
// its documentation advises.
func (m *messenger) sendOne(ctx context.Context, s chaos.MessageSend, msg chaos.InboxMessage, named bool) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*callTimeout)
	defer cancel()
	var err error
	switch s.Via {
	case "send":
		s.Seq, err = m.client.Send(cctx, s.Task, s.Topic, msg)
	case "once":
		for range 3 {
			if s.Seq, err = m.client.SendOnce(cctx, s.Task, s.Topic, s.ID, msg); err == nil || errors.Is(err, leasehold.ErrInvalid) || errors.Is(err, leasehold.ErrFinished) {
				break
			}
		}
	default:
		mid := ""
		if named {
			mid = s.ID
		}
		raw, _ := json.Marshal(msg)
		var body string
		if body, err = token.Message(s.Task, s.Topic, mid, raw); err == nil {
			_, err = m.sq.SendMessage(cctx, &sqs.SendMessageInput{QueueUrl: aws.String(m.queue), MessageBody: aws.String(body)})
		}
	}
	if err != nil {
		s.Err = err.Error()
	}
	m.mu.Lock()
	m.sends = append(m.sends, s)
	m.mu.Unlock()
}

// sendErrors counts the sends that returned an error.
func sendErrors(sends []chaos.MessageSend) int {
	n := 0
	for _, s := range sends {
		if s.Err != "" {
			n++
		}
	}
	return n
}
