package chaos_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/leasehold/leasehold/internal/chaos"
	"github.com/leasehold/leasehold/internal/lease"
)

// The version switch (docs/chaos.md, "Deploys"). The times are not
// scaled with LEASEHOLD_CHAOS_TIME_FACTOR: a held task is checked again a
// minute after its hold (lifecycle.MinDivergedHold), so the workers run v2
// for less than that when they can (deployV2For, or until the fresh tasks
// end, at most deployV2Max), and each task
// that diverged is held once and checked again under v1.
const (
	// deploySleep: how long a deploy task sleeps after its summary step;
	// the switch to v2 comes once every one of them sleeps, so most wake
	// under v2.
	deploySleep = 20 * time.Second
	// deployGate bounds the wait for them all to sleep; past it the
	// switch is skipped (a violation).
	deployGate = 2 * time.Minute
	// deployV2For: the least time the workers run v2; deployV2Max: the
	// most, while the tasks started under v2 finish. The rollback waits
	// for the fresh tasks to end, not for a clock: on a loaded machine
	// their claims and checkpoints can take past a minute, and a rollback
	// before they end is a violation of the test's timing, not of the
	// product's (v1 cannot run them). Past a minute a task that diverged
	// under v2 may be held a second time there, which costs it two more
	// minutes, not a violation.
	deployV2For = 30 * time.Second
	deployV2Max = 3 * time.Minute
	// deployGrace: how long a worker has to stop for a deploy.
	deployGrace = 10 * time.Second
)

// deployPlan is the deploy tasks of a run: inflight (sent first, so that
// they start at once, and asleep under v1 when the switch comes) and fresh
// (sent once the workers run v2: they start under v2 and must end before
// the switch back, as they are not v1's to run).
type deployPlan struct {
	inflight, fresh []string // message bodies
	valid           []string
	d               chaos.Deploys
}

func makeDeploys(p params, rng *rand.Rand) deployPlan {
	dp := deployPlan{d: chaos.Deploys{Tasks: map[string]string{}, Fresh: map[string]bool{}}}
	changes := []string{chaos.ChangeRename, chaos.ChangeSleep, chaos.ChangeVersion}
	inflight, fresh := 3*max(4, p.tasks/50), max(3, p.tasks/100)
	for i := range inflight + fresh {
		id := fmt.Sprintf("d%03d", i)
		pl := chaos.DeployPayload{N: i, Change: changes[i%3], WorkMS: 50 + rng.IntN(100), SleepMS: int(deploySleep/time.Millisecond) + rng.IntN(2000)}
		if i >= inflight {
			pl.Change, pl.SleepMS = chaos.ChangeVersion, 300+rng.IntN(700)
			dp.d.Fresh[id] = true
		}
		b, err := json.Marshal(pl)
		if err != nil {
			panic(err)
		}
		body := fmt.Sprintf(`{"v":1,"kind":"deploy","id":%q,"payload":%s,"max_attempts":100}`, id, b)
		if i < inflight {
			dp.inflight = append(dp.inflight, body)
		} else {
			dp.fresh = append(dp.fresh, body)
		}
		dp.d.Tasks[id] = pl.Change
		dp.valid = append(dp.valid, id)
	}
	return dp
}

// runDeploys waits until every in-flight deploy task sleeps (its sleep
// recorded), switches the fleet to v2, sends the fresh tasks, and switches
// back to v1 once deployV2For has passed and the fresh tasks ended (at
// most deployV2Max after the switch). It returns the plan's Deploys with
// the switches' times, or why it made none.
func runDeploys(ctx context.Context, t *testing.T, ledger *chaos.Ledger, fleet *chaos.Fleet, sq *sqs.Client, queue string, dp deployPlan) chaos.Deploys {
	d := dp.d
	asleep, ended := map[string]bool{}, map[string]bool{}
	seen := 0
	watch := func() {
		var ws []chaos.Write
		ws, seen = ledger.WritesFrom(seen)
		for _, w := range ws {
			if _, ok := d.Tasks[w.Task]; !ok {
				continue
			}
			if slices.Contains(w.Steps, "sleep#1") {
				asleep[w.Task] = true
			}
			if lease.Status(w.Status).Terminal() {
				ended[w.Task] = true
			}
		}
	}
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	gate := time.Now().Add(deployGate)
	for {
		watch()
		n := 0
		for id := range d.Tasks {
			if !d.Fresh[id] && asleep[id] {
				n++
			}
		}
		if n == len(dp.inflight) {
			break
		}
		if time.Now().After(gate) {
			d.Skipped = fmt.Sprintf("deploy_skipped: only %d of %d deploy tasks slept within %s: no switch to v2", n, len(dp.inflight), deployGate)
			return d
		}
		select {
		case <-ctx.Done():
			d.Skipped = "deploy_skipped: the run ended before the deploy tasks slept"
			return d
		case <-tick.C:
		}
	}
	if err := fleet.Deploy("v2", deployGrace); err != nil {
		t.Errorf("chaos: deploy v2: %v", err)
	}
	d.ToV2 = time.Now()
	t.Logf("chaos: workers switched to v2")
	if err := sendBodies(ctx, t.Logf, sq, queue, dp.fresh); err != nil {
		t.Errorf("chaos: send the fresh deploy tasks: %v", err)
	}
	for {
		watch()
		done := true
		for id := range d.Fresh {
			done = done && ended[id]
		}
		since := time.Since(d.ToV2)
		if since >= deployV2Max || done && since >= deployV2For {
			break
		}
		select {
		case <-ctx.Done():
		case <-tick.C:
			continue
		}
		break
	}
	if err := fleet.Deploy("v1", deployGrace); err != nil {
		t.Errorf("chaos: deploy v1: %v", err)
	}
	d.ToV1 = time.Now()
	t.Logf("chaos: workers switched back to v1 after %s", d.ToV1.Sub(d.ToV2).Round(time.Second))
	return d
}
