package settings_test

import (
	"reflect"
	"testing"

	"github.com/leasehold/leasehold/internal/defaults"
	"github.com/leasehold/leasehold/settings"
)

// TestDefaultMatchesInternalConstants: settings.Default publishes the
// constants of internal/defaults, which the module's code applies, so the
// two must not drift. Each field of Defaults is paired here with the
// constant of the same name; a field without a pair, a pair without a
// field, a zero field or a field that differs from its constant fails.
func TestDefaultMatchesInternalConstants(t *testing.T) {
	pairs := []struct {
		field string
		want  any
	}{
		{"CallTimeout", defaults.CallTimeout},
		{"ClientCallTimeout", defaults.ClientCallTimeout},
		{"ReceiveCallTimeout", defaults.ReceiveCallTimeout},
		{"LeaseDuration", defaults.LeaseDuration},
		{"RenewBefore", defaults.RenewBefore},
		{"ClockSkew", defaults.ClockSkew},
		{"DeadlineMargin", defaults.DeadlineMargin},
		{"VisibilityMargin", defaults.VisibilityMargin},
		{"DispatchGrace", defaults.DispatchGrace},
		{"Retention", defaults.Retention},
		{"MaxAttempts", defaults.MaxAttempts},
		{"Concurrency", defaults.Concurrency},
		{"BackoffBase", defaults.BackoffBase},
		{"BackoffMax", defaults.BackoffMax},
		{"UnknownKindBackoffMin", defaults.UnknownKindBackoffMin},
		{"UnknownKindBackoffMax", defaults.UnknownKindBackoffMax},
		{"UnknownKindLimit", defaults.UnknownKindLimit},
		{"WaitTimeout", defaults.WaitTimeout},
		{"MaxReceiveCount", defaults.MaxReceiveCount},
		{"ReplaceAtReceiveCount", defaults.ReplaceAtReceiveCount},
		{"Pollers", defaults.Pollers},
		{"BatchSize", defaults.BatchSize},
		{"LongPoll", defaults.LongPoll},
		{"InvocationTimeout", defaults.InvocationTimeout},
		{"SweepEvery", defaults.SweepEvery},
		{"EnqueueConcurrency", defaults.EnqueueConcurrency},
		{"DispatchConcurrency", defaults.DispatchConcurrency},
		{"SweepConcurrency", defaults.SweepConcurrency},
		{"SweepPageSize", defaults.SweepPageSize},
		{"ListLimit", defaults.ListLimit},
	}
	got := reflect.ValueOf(settings.Default())
	if n := got.NumField(); n != len(pairs) {
		t.Errorf("settings.Defaults has %d fields and the test pairs %d: pair each field with its constant of internal/defaults", n, len(pairs))
	}
	for _, p := range pairs {
		f := got.FieldByName(p.field)
		switch {
		case !f.IsValid():
			t.Errorf("settings.Defaults has no field %s", p.field)
		case f.IsZero():
			t.Errorf("settings.Default().%s is zero", p.field)
		case f.Interface() != p.want:
			t.Errorf("settings.Default().%s = %v (%T), internal/defaults.%s = %v (%T)", p.field, f.Interface(), f.Interface(), p.field, p.want, p.want)
		}
	}
}
