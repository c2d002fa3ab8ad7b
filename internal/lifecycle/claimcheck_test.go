package lifecycle_test

import (
	"context"
	"strings"
	"testing"

	"github.com/leasehold/leasehold/internal/claimcheck"
	"github.com/leasehold/leasehold/internal/durable"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lifecycle"
	"github.com/leasehold/leasehold/internal/token"
)

// A payload kept in the payload bucket is read back before the handler
// runs; an inline token whose payload is a reference to another task's
// value (written by hand, not by a client) is never read: the handler does
// not run and the attempt fails with the reason (issue 36).
func TestPayloadReferenceIsReadOnlyForItsOwnTask(t *testing.T) {
	t.Parallel()
	blobs := claimcheck.NewMemory()
	claims := &claimcheck.Checker{Blobs: blobs}
	e := setup(t, func(c *lifecycle.Config) { c.Claims = claims })
	var seen []string
	e.handlers["echo"] = func(_ context.Context, task lease.Task) ([]byte, error) {
		seen = append(seen, task.ID)
		return []byte(`"ok"`), nil
	}
	value := []byte(`"` + strings.Repeat("v", 200<<10) + `"`)
	ref, err := claims.Stow(t.Context(), "own", claimcheck.WhatPayload, value, lease.MaxPayloadBytes)
	if err != nil {
		t.Fatal(err)
	}

	if res := e.exec.Process(t.Context(), nil, msg("m1", inline(t, "echo", "own", string(ref), 1))); res.Outcome != lifecycle.OutcomeSucceeded {
		t.Fatalf("own reference: %+v, want success", res)
	}
	calls := blobs.Calls()
	res := e.exec.Process(t.Context(), nil, msg("m2", inline(t, "echo", "thief", string(ref), 1)))
	if res.Outcome == lifecycle.OutcomeSucceeded {
		t.Fatalf("a reference to another task's payload: %+v, want no success", res)
	}
	if n := blobs.Calls() - calls; n != 0 {
		t.Errorf("%d calls to the payload bucket for another task's reference, want 0", n)
	}
	if len(seen) != 1 || seen[0] != "own" {
		t.Errorf("the handler ran for %v, want only own", seen)
	}
	if got := e.get(t, "thief"); got.Status != lease.StatusFailed || !strings.Contains(got.Error, "another task") {
		t.Errorf("thief: %s %q, want FAILED naming another task", got.Status, got.Error)
	}
}

// A continue-as-new's input over the inline payload limit: without a
// payload bucket the task fails with the limit, as an enqueue is refused;
// with one it is stowed and the next run reads it back (issue 36).
func TestContinueInputOverTheInlineLimit(t *testing.T) {
	t.Parallel()
	big := []byte(`"` + strings.Repeat("v", 200<<10) + `"`)
	for _, bucket := range []bool{false, true} {
		var claims *claimcheck.Checker
		if bucket {
			claims = &claimcheck.Checker{Blobs: claimcheck.NewMemory()}
		}
		e := setup(t, func(c *lifecycle.Config) { c.Claims = claims })
		var sizes []int
		e.handlers["grow"] = func(ctx context.Context, task lease.Task) ([]byte, error) {
			sizes = append(sizes, len(task.Payload))
			if len(task.Payload) < len(big) {
				return nil, durable.ContinueAsNewOf(ctx, big)
			}
			return []byte(`"done"`), nil
		}
		e.exec.Process(t.Context(), nil, msg("m1", inline(t, "grow", "g", `"small"`, 3)))
		got := e.get(t, "g")
		if !bucket {
			if got.Status != lease.StatusFailed || !strings.Contains(got.Error, "continue as new: payload is 204802 bytes, over the 131072-byte limit") {
				t.Errorf("without a bucket: %s %q, want FAILED with the inline limit", got.Status, got.Error)
			}
			continue
		}
		if got.Status != lease.StatusPending || !claimcheck.IsRef(got.Payload) {
			t.Fatalf("with a bucket: %s, payload %.60q; want PENDING with a reference", got.Status, got.Payload)
		}
		e.exec.Process(t.Context(), nil, msg("m2", token.Ref("g")))
		if got := e.get(t, "g"); got.Status != lease.StatusSucceeded || len(sizes) != 2 || sizes[1] != len(big) {
			t.Errorf("the next run: %s %q, payload sizes seen %v; want SUCCEEDED after reading %d bytes", got.Status, got.Error, sizes, len(big))
		}
	}
}
