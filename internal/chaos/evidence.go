package chaos

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Execution evidence written by the chaosworker processes, which write it
// with this type.

// HandlerEvent is one line of a worker's evidence file.
type HandlerEvent struct {
	Event   string `json:"ev"` // "start" or "end"
	Task    string `json:"task"`
	Fence   int64  `json:"fence"`
	Attempt int    `json:"attempt"`
	Worker  string `json:"worker"`
	PID     int    `json:"pid"`
	AtUS    int64  `json:"at_us"`
	Outcome string `json:"outcome,omitempty"` // end: "ok", "cancelled", "failed" (a planned failure) or "await" (a workflow wait)
	Cause   string `json:"cause,omitempty"`
	// Workflows: a fan's "spawn" or "resume" start and the children's
	// outcomes it read ("id STATUS n"); the dependencies a step read ("id
	// STATUS"); the token of a "callback" line; the status of the write an
	// "exit_after_finish" line follows.
	Phase  string   `json:"phase,omitempty"`
	Kids   []string `json:"kids,omitempty"`
	Deps   []string `json:"deps,omitempty"`
	Token  string   `json:"token,omitempty"`
	Status string   `json:"status,omitempty"`
	// Step lines (Event "step"): the step's name and the id of this run of
	// its function (also in the result it returns); Phase "run" (the
	// function starts), "done" (it returned its result) or "fail" (a
	// transient error).
	Step string `json:"step,omitempty"`
	Run  string `json:"run,omitempty"`
}

// At is the event's time.
func (e HandlerEvent) At() time.Time { return time.UnixMicro(e.AtUS) }

// MetricEvent is the part of a worker's metrics line (WorkerConfig.Metrics)
// the checks read: what the worker itself believes happened.
type MetricEvent struct {
	Task    string `json:"task_id"`
	Attempt int    `json:"attempt"`
	Outcome string `json:"outcome"` // "succeeded", "lease_lost", ... (one line per attempt, when it ends)
	Worker  string `json:"-"`
}

// readJSONL decodes every whole line of the files matching pattern into
// values made by decode, and counts the lines that do not decode (a line cut
// by a SIGKILL).
func readJSONL[T any](pattern string, each func(file string, v T)) (cut int, err error) {
	files, err := filepath.Glob(pattern)
	if err != nil {
		return 0, err
	}
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			return cut, err
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Bytes()
			if len(line) == 0 {
				continue
			}
			var v T
			if json.Unmarshal(line, &v) != nil {
				cut++
				continue
			}
			each(f, v)
		}
		err = sc.Err()
		_ = fh.Close()
		if err != nil {
			return cut, err
		}
	}
	return cut, nil
}

// ReadEvidence reads every evidence-*.jsonl and metrics-*.jsonl file in dir.
func ReadEvidence(dir string) (handler []HandlerEvent, metrics []MetricEvent, cut int, err error) {
	c1, err := readJSONL(filepath.Join(dir, "evidence-*.jsonl"), func(_ string, e HandlerEvent) {
		handler = append(handler, e)
	})
	if err != nil {
		return nil, nil, 0, err
	}
	c2, err := readJSONL(filepath.Join(dir, "metrics-*.jsonl"), func(file string, m MetricEvent) {
		m.Worker = strings.TrimSuffix(strings.TrimPrefix(filepath.Base(file), "metrics-"), ".jsonl")
		metrics = append(metrics, m)
	})
	return handler, metrics, c1 + c2, err
}
