package chaos_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/leasehold/leasehold/internal/awstest"
	"github.com/leasehold/leasehold/internal/chaos"
)

// rig is one chaos run's moving parts: its table and queues, one
// fault-injecting proxy per distinct upstream endpoint with the ledger of
// what went through them, the fleet of workers behind the proxies, and the
// loop that kills and freezes them.
type rig struct {
	table  string
	queues awstest.Queues
	ddb    *dynamodb.Client
	sq     *sqs.Client
	ledger *chaos.Ledger
	fleet  *chaos.Fleet
	// endpoint maps each upstream to its proxy's URL.
	endpoint map[string]string
	// totals adds up the proxies' counts once they are closed.
	totals chaos.ProxyStats

	t          *testing.T
	p          params
	proxies    []*chaos.Proxy
	stopped    bool
	stopChaos  context.CancelFunc
	chaosWG    sync.WaitGroup
	chaosErr   error
	chaosEnded bool
}

// startRig builds the worker, creates the run's table and queues, starts
// the proxies, the fleet (with env added to each worker's environment)
// and the chaos loop. Everything it starts is stopped by the test's
// cleanup, or earlier by end.
func startRig(t *testing.T, cfg aws.Config, p params, env ...string) *rig {
	t.Helper()
	bin := buildWorker(t, p)
	r := &rig{t: t, p: p, table: awstest.NewTable(t, cfg), queues: awstest.NewQueues(t, cfg),
		ddb: dynamodb.NewFromConfig(cfg), sq: sqs.NewFromConfig(cfg), endpoint: map[string]string{}}
	r.ledger = chaos.NewLedger(r.table)
	t.Cleanup(r.closeProxies)
	for i, name := range []string{"AWS_ENDPOINT_URL_DYNAMODB", "AWS_ENDPOINT_URL_SQS"} {
		up := strings.TrimRight(os.Getenv(name), "/")
		if _, ok := r.endpoint[up]; ok {
			continue
		}
		px, err := chaos.StartProxy(up, p.faults, p.seed+uint64(i)*7919, r.ledger.Observe)
		if err != nil {
			t.Fatal(err)
		}
		r.proxies = append(r.proxies, px)
		r.endpoint[up] = px.URL()
	}
	t.Logf("chaos: proxies (upstream -> proxy): %v", r.endpoint)

	r.fleet = &chaos.Fleet{Bin: bin, Dir: p.dir, Env: append(workerEnv(p, r.endpoint, r.table, r.queues), env...)}
	t.Cleanup(r.stopFleet) // also reaps the workers of a Start that failed half-way
	if err := r.fleet.Start(p.workers); err != nil {
		t.Fatal(err)
	}
	var chaosCtx context.Context
	chaosCtx, r.stopChaos = context.WithCancel(context.Background())
	r.chaosWG.Go(func() {
		r.chaosErr = chaos.Chaos{
			KillMin: p.killMin, KillMax: p.killMax,
			PauseEvery: p.pauseEvery, PauseFor: p.pauseFor,
			Seed: p.seed,
		}.Run(chaosCtx, r.fleet)
	})
	t.Cleanup(r.endChaos)
	return r
}

func (r *rig) endChaos() {
	if r.chaosEnded {
		return
	}
	r.chaosEnded = true
	r.stopChaos()
	r.chaosWG.Wait()
	if r.chaosErr != nil {
		r.t.Errorf("chaos: the chaos loop stopped early: %v", r.chaosErr)
	}
}

func (r *rig) stopFleet() {
	if r.stopped {
		return
	}
	r.stopped = true
	if err := r.fleet.StopAll(r.p.graceStop); err != nil {
		r.t.Errorf("chaos: %v", err)
	}
}

func (r *rig) closeProxies() {
	for _, px := range r.proxies {
		st := px.Stats()
		r.totals.Requests += st.Requests
		r.totals.ResetsBefore += st.ResetsBefore
		r.totals.ResetsAfter += st.ResetsAfter
		r.totals.Delayed += st.Delayed
		r.totals.UpstreamErrors += st.UpstreamErrors
		if err := px.Close(10 * time.Second); err != nil {
			r.t.Logf("chaos: proxy close: %v", err)
		}
	}
	r.proxies = nil
}

// end stops the chaos, then every worker gracefully, then the proxies: the
// run is over, and its evidence complete.
func (r *rig) end() {
	r.endChaos()
	r.stopFleet()
	r.closeProxies()
}

// evidence is what a run left, once it is over (end), for the checks.
type evidence struct {
	in                chaos.Input
	rejected, unknown int // writes refused, and forwarded with no answer
	cut               int // evidence lines cut by a SIGKILL
}

// gather reads what the run left: the table's records, the dead-letter
// queue (want: the malformed messages sent), the workers' evidence and
// stderr, and the ledger; valid and malformed are the run's valid task
// ids and malformed bodies.
func (r *rig) gather(t *testing.T, valid, malformed []string) evidence {
	t.Helper()
	records := scanRecords(t, r.ddb, r.table)
	dlq := drainDLQ(t, r.sq, r.queues.WorkDLQ, len(malformed))
	handler, metrics, cut, err := chaos.ReadEvidence(r.p.dir)
	if err != nil {
		t.Fatalf("chaos: read evidence: %v", err)
	}
	stderr := map[string]string{}
	for _, n := range r.fleet.Names() {
		b, err := os.ReadFile(filepath.Join(r.p.dir, "stderr-"+n+".log"))
		if err != nil {
			t.Fatalf("chaos: %v", err)
		}
		stderr[n] = string(b)
	}
	writes, rejected, unknown := r.ledger.Writes()
	deliveries, deletions := r.ledger.Messages()
	return evidence{rejected: rejected, unknown: unknown, cut: cut, in: chaos.Input{
		Valid: valid, Records: records, Writes: writes, Deliveries: deliveries, Deletions: deletions, Fates: r.fleet.Fates(),
		Handler: handler, Metrics: metrics, Malformed: malformed, DLQ: dlq, Stderr: stderr, Now: time.Now(),
		Downs: r.fleet.Downs(),
	}}
}

// needChaos skips a chaos test unless LEASEHOLD_CHAOS=1 asks for it.
func needChaos(t *testing.T) {
	t.Helper()
	if os.Getenv("LEASEHOLD_CHAOS") != "1" {
		t.Skip("chaos test is opt-in: set LEASEHOLD_CHAOS=1 (make chaos)")
	}
	if testing.Short() {
		t.Skip("chaos test skipped with -short")
	}
}
