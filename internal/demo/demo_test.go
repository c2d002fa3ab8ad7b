package demo

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold/internal/awstest"
)

// TestDemoEndsAsExpected runs the whole demo on a fresh table and queue set,
// with a shorter delay, and checks that it reports every task as expected.
func TestDemoEndsAsExpected(t *testing.T) {
	t.Parallel()
	cfg := awstest.Config(t)
	queues := awstest.NewQueues(t, cfg)
	res := Resources{
		Table:        awstest.NewTable(t, cfg),
		WorkQueueURL: queues.Work, WorkDLQURL: queues.WorkDLQ,
		IntakeQueueURL: queues.Intake, IntakeDLQURL: queues.IntakeDLQ,
	}
	var out bytes.Buffer
	// The lease, its renewal lead and the slow task's run all stretch by
	// the suite's time scale: under load one renewal call can take longer
	// than the demo's 2 s lead, and a lost lease is then the right outcome,
	// not a failure of the demo.
	f := float64(awstest.Scale(time.Second)) / float64(time.Second)
	err := Run(t.Context(), Config{AWS: cfg, Resources: res, Delay: 3 * time.Second, Slow: awstest.Scale(5 * time.Second),
		Timeout: awstest.Scale(time.Minute), Out: &out, TimeScale: f})
	if err != nil {
		t.Errorf("Run: %v", err)
	}
	for _, want := range []string{"every task ended as expected", "DEAD-LETTERED", "totals: SUCCEEDED 17, FAILED 2, DEAD-LETTERED 1",
		"SUCCEEDED, message won", "SUCCEEDED, timeout won"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("demo output:\n%s", out.String())
	}
}
