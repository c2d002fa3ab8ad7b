package awstest_test

import (
	"slices"
	"testing"

	"github.com/leasehold/leasehold/internal/awstest"
)

// TestChildEnvDropsTheNamedResources: a child started with ChildEnv sees
// none of the stack's named table and queues that the test's shell had,
// keeps everything else, and gets what the test gives it.
func TestChildEnvDropsTheNamedResources(t *testing.T) {
	named := []string{"LEASEHOLD_TABLE", "LEASEHOLD_WORK_QUEUE_URL", "LEASEHOLD_WORK_DLQ_URL",
		"LEASEHOLD_INTAKE_QUEUE_URL", "LEASEHOLD_INTAKE_DLQ_URL", "LEASEHOLD_REPORTS_QUEUE_URL"}
	kept := []string{"LEASEHOLD_STACK_PORT", "LEASEHOLD_LOG_LEVEL", "LEASEHOLD_REQUIRE_STACK", "AWS_ENDPOINT_URL_SQS"}
	for _, k := range append(slices.Clone(named), kept...) {
		t.Setenv(k, "from-the-shell")
	}
	env := awstest.ChildEnv("LEASEHOLD_TABLE=mine", "LEASEHOLD_WORK_QUEUE_URL=http://q/mine")
	for _, k := range named {
		if !awstest.NamedResourceVar(k) {
			t.Errorf("NamedResourceVar(%q) = false", k)
		}
		if slices.Contains(env, k+"=from-the-shell") {
			t.Errorf("ChildEnv kept %s from the test's environment", k)
		}
	}
	for _, k := range kept {
		if awstest.NamedResourceVar(k) {
			t.Errorf("NamedResourceVar(%q) = true", k)
		}
		if !slices.Contains(env, k+"=from-the-shell") {
			t.Errorf("ChildEnv dropped %s", k)
		}
	}
	for _, kv := range []string{"LEASEHOLD_TABLE=mine", "LEASEHOLD_WORK_QUEUE_URL=http://q/mine"} {
		if !slices.Contains(env, kv) {
			t.Errorf("ChildEnv lost the extra %s", kv)
		}
	}
}
