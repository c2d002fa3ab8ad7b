package chaos

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/internal/lease"
)

// cleanDeploys is the evidence of a switch as it should go: d000 (a
// renamed step) diverged under v2, was held, and succeeded under v1;
// d002 (a change under workflow.Version) went on under v2 with version
// 0; d003 started under v2 and took version 1.
func cleanDeploys() (Input, map[string][]Write) {
	steps := func(names ...string) []lease.Step {
		out := make([]lease.Step, len(names))
		for i, n := range names {
			out[i] = lease.Step{Name: n, Result: []byte(`{"run":"r-` + n + `","fence":1}`)}
		}
		return out
	}
	result := func(n int, code string, version int) []byte {
		b, _ := json.Marshal(DeployResult{N: n, Code: code, Version: version, Summary: "r-s1"})
		return b
	}
	in := Input{Records: map[string]lease.Task{
		"d000": {ID: "d000", Status: lease.StatusSucceeded, Fence: 3, Steps: steps("s0", "s1", "sleep#1", "s2"), Result: result(0, "v1", 0)},
		"d002": {ID: "d002", Status: lease.StatusSucceeded, Fence: 2, Steps: steps("s0", "s1", "sleep#1", "s2"), Result: result(2, "v2", 0)},
		"d003": {ID: "d003", Status: lease.StatusSucceeded, Fence: 2, Steps: steps("s0", "version:audit", "audit", "s1", "sleep#1", "s2"), Result: result(3, "v2", 1)},
	}}
	in.Workflows = &Workflows{Deploys: &Deploys{
		Tasks: map[string]string{"d000": ChangeRename, "d002": ChangeVersion, "d003": ChangeVersion},
		Fresh: map[string]bool{"d003": true},
		ToV2:  at(1000), ToV1: at(2000),
	}}
	held := ending("d000", 2, "PENDING", 1500)
	held.Error = "held: diverged from its history at operation 2: recorded step main.StepResult \"s1\", the code asked for step main.StepResult \"summary\"; check 1 of the hold, the next at ..."
	reclaim := claim("d000", 3, 2500, 5000) // the check again keeps the error
	reclaim.Error = held.Error
	in.Handler = []HandlerEvent{
		{Event: "start", Task: "d000", Fence: 2, Phase: "v2", AtUS: at(1400).UnixMicro()},
		{Event: "end", Task: "d000", Fence: 2, Outcome: "error", Cause: "diverged from its history at operation 2: ...", AtUS: at(1450).UnixMicro()},
	}
	return in, map[string][]Write{
		"d000": {claim("d000", 1, 0, 3000), ending("d000", 1, "PENDING", 100), claim("d000", 2, 1390, 4000), held, reclaim, ending("d000", 3, "SUCCEEDED", 2600)},
	}
}

func checkDeploysOf(in Input, writes map[string][]Write) (DeployReport, []string) {
	var flags []string
	r := checkDeploys(in, writes, func(kind, detail string) { flags = append(flags, kind+": "+detail) })
	return r, flags
}

func TestCheckDeploysClean(t *testing.T) {
	in, writes := cleanDeploys()
	r, flags := checkDeploysOf(in, writes)
	if len(flags) > 0 {
		t.Fatalf("flags on a clean switch: %v", flags)
	}
	if r.Tasks != 3 || r.Diverged != 1 || r.Held != 1 || r.Holds != 1 || r.Resumed != 1 || r.DivergedRuns != 1 || r.V2Runs != 1 {
		t.Fatalf("report %+v", r)
	}
}

// TestCheckDeploysCatches breaks the clean evidence one way at a time and
// wants the check to name it.
func TestCheckDeploysCatches(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		spoil      func(in *Input, writes map[string][]Write)
	}{
		{"a hold without the reason", "held_wrong", func(_ *Input, w map[string][]Write) {
			w["d000"][3].Error = heldPrefix + "2: recorded step main.StepResult \"s0\", the code asked for something else"
		}},
		{"a guarded change held", "held_wrong", func(_ *Input, w map[string][]Write) {
			h := ending("d002", 1, "PENDING", 1500)
			h.Error = heldPrefix + "2: ..."
			w["d002"] = []Write{h}
		}},
		{"a diverged run that retried", "unheld", func(_ *Input, w map[string][]Write) {
			w["d000"][3].Error = "diverged ...: retrying"
		}},
		{"a summary not the recorded one", "wrong_summary", func(in *Input, _ map[string][]Write) {
			rec := in.Records["d000"]
			rec.Result, _ = json.Marshal(DeployResult{Code: "v1", Summary: "r-other"})
			in.Records["d000"] = rec
		}},
		{"a step run twice under two names", "wrong_summary", func(in *Input, _ map[string][]Write) {
			rec := in.Records["d000"]
			rec.Steps = append(rec.Steps, lease.Step{Name: "summary", Result: []byte(`{"run":"r-x"}`)})
			in.Records["d000"] = rec
		}},
		{"a fresh task on version 0", "wrong_version", func(in *Input, _ map[string][]Write) {
			rec := in.Records["d003"]
			rec.Result, _ = json.Marshal(DeployResult{N: 3, Code: "v2", Version: 0, Summary: "r-s1"})
			in.Records["d003"] = rec
		}},
		{"a diverged task finished by v2", "wrong_version", func(in *Input, _ map[string][]Write) {
			rec := in.Records["d000"]
			rec.Result, _ = json.Marshal(DeployResult{Code: "v2", Summary: "r-s1"})
			in.Records["d000"] = rec
		}},
		{"a switch that diverged nothing", "diverged", func(in *Input, w map[string][]Write) {
			in.Handler = nil
			delete(w, "d000")
		}},
		{"no switch", "deploy_skipped", func(in *Input, _ map[string][]Write) {
			in.Workflows.Deploys.Skipped = "deploy_skipped: only 1 of 2 slept"
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in, writes := cleanDeploys()
			tc.spoil(&in, writes)
			_, flags := checkDeploysOf(in, writes)
			if !slices.ContainsFunc(flags, func(f string) bool { return strings.HasPrefix(f, tc.want+": ") }) {
				t.Fatalf("flags %v, want one %s", flags, tc.want)
			}
		})
	}
}
