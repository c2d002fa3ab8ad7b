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
	err := Run(t.Context(), Config{AWS: cfg, Resources: res, Delay: 3 * time.Second, Slow: 5 * time.Second, Timeout: time.Minute, Out: &out})
	if err != nil {
		t.Errorf("Run: %v", err)
	}
	for _, want := range []string{"every task ended as expected", "DEAD-LETTERED", "totals: SUCCEEDED 7, FAILED 2, DEAD-LETTERED 1"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("demo output:\n%s", out.String())
	}
}
