package admin

import (
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/leasehold/leasehold/internal/awstest"
	"github.com/leasehold/leasehold/internal/iam"
	"github.com/leasehold/leasehold/internal/queues"
)

// Pause tags the queue, and resume untags it.
func TestPauseTagsTheQueue(t *testing.T) {
	t.Parallel()
	cfg := awstest.Config(t)
	qs := awstest.NewQueues(t, cfg)
	a := New(Config{AWS: cfg})
	if p, _ := a.Paused(t.Context(), qs.Work); p {
		t.Fatal("a new queue reads as paused")
	}
	r, err := a.Pause(t.Context(), qs.Work, true)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Paused || r.Since.IsZero() {
		t.Fatalf("paused: %+v", r)
	}
	if p, _, err := queues.PausedSince(t.Context(), a.sqs, qs.Work); err != nil || !p {
		t.Fatalf("the queue's tags after pause: paused %t, %v", p, err)
	}
	if r, err = a.Pause(t.Context(), qs.Work, false); err != nil || r.Paused {
		t.Fatalf("resumed: %+v, %v", r, err)
	}
}

// Pausing and resuming queues by name, the work queue and another fleet's
// (a queue of NamedQueueArns), makes exactly the calls of the template's
// PauseQueuesPolicy (internal/iam), action by action and resource by
// resource: each is granted there (iam.Enforce fails any other action
// before it is sent), and the policy grants nothing the command does not
// call. Every call is an SQS call on the queue: no Lambda action at all.
func TestPauseCallsExactlyThePauseQueuesPolicy(t *testing.T) {
	t.Parallel()
	cfg := awstest.Config(t)
	work, named := awstest.NewQueues(t, cfg).Work, awstest.NewQueues(t, cfg).Work
	targets := map[string]string{
		work: iam.WorkQueue, queues.NameFromURL(work): iam.WorkQueue,
		named: iam.NamedQueues, queues.NameFromURL(named): iam.NamedQueues,
	}
	var mu sync.Mutex
	used := map[iam.Grant]bool{}
	cfg.APIOptions = append(cfg.APIOptions, iam.Enforce(iam.PauseQueues.Calls), iam.Record(func(c iam.Call) {
		mu.Lock()
		defer mu.Unlock()
		res, ok := targets[c.Target]
		if !ok {
			res = "unknown target " + c.Target
		}
		used[iam.Grant{Action: c.Action, Resource: res}] = true
	}))
	a := New(Config{AWS: cfg})
	for _, q := range []string{work, named} {
		url, err := a.QueueURL(t.Context(), queues.NameFromURL(q))
		if err != nil {
			t.Fatal(err)
		}
		for _, paused := range []bool{true, false} {
			if _, err := a.Pause(t.Context(), url, paused); err != nil {
				t.Fatalf("%s: pause=%t: %v", url, paused, err)
			}
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, g := range iam.PauseQueues.Calls {
		if !used[g] {
			t.Errorf("PauseQueuesPolicy grants %s on %s, which pause and resume never call", g.Action, g.Resource)
		}
		if strings.HasPrefix(g.Action, "lambda:") {
			t.Errorf("PauseQueuesPolicy grants %s: pausing needs no Lambda action", g.Action)
		}
	}
	for g := range used {
		if !slices.Contains(iam.PauseQueues.Calls, g) {
			t.Errorf("pause or resume calls %s on %s, which PauseQueuesPolicy does not grant", g.Action, g.Resource)
		}
	}
}
