package cli

import (
	"bytes"
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
)

// A deadline that cuts a --all round in the middle reports the last round
// that counted every status, not the statuses the cut round had reached.
func TestWatchAllTimeoutReportsLastFullRound(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	a := newApp(Streams{Out: &out, Err: &errOut})
	var round atomic.Int32
	list := func(ctx context.Context, o leasehold.ListOptions) (leasehold.Page, error) {
		if o.Status == leasehold.StatusPending && round.Add(1) > 1 {
			// Second round: more pending tasks, then the next status hangs
			// until the deadline.
			return leasehold.Page{Tasks: make([]leasehold.TaskInfo, 5)}, nil
		}
		if round.Load() > 1 {
			<-ctx.Done()
			return leasehold.Page{}, ctx.Err()
		}
		switch o.Status {
		case leasehold.StatusPending:
			return leasehold.Page{Tasks: make([]leasehold.TaskInfo, 2)}, nil
		case leasehold.StatusRunning:
			return leasehold.Page{Tasks: make([]leasehold.TaskInfo, 1)}, nil
		}
		return leasehold.Page{}, nil
	}
	w := &watcher{app: a, list: list, all: true, status: map[string]leasehold.TaskInfo{}}
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	err := w.run(ctx, watchFlags{all: true, interval: time.Millisecond, timeout: 300 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "3 of 3 tasks have not finished") {
		t.Errorf("error %v, want a timeout naming the 3 unfinished tasks of the full round", err)
	}
	want := counts{leasehold.StatusPending: 2, leasehold.StatusRunning: 1}.String() + "\n"
	if out.String() != want {
		t.Errorf("stdout %q, want the full round's counts %q", out.String(), want)
	}
	if round.Load() < 2 {
		t.Errorf("the deadline came before the second round: the test proved nothing")
	}
}

// A deadline before any full round prints no counts at all.
func TestWatchAllTimeoutBeforeAnyFullRound(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	a := newApp(Streams{Out: &out, Err: &errOut})
	list := func(ctx context.Context, o leasehold.ListOptions) (leasehold.Page, error) {
		if o.Status == leasehold.StatusPending {
			return leasehold.Page{Tasks: make([]leasehold.TaskInfo, 4)}, nil
		}
		<-ctx.Done()
		return leasehold.Page{}, ctx.Err()
	}
	w := &watcher{app: a, list: list, all: true, status: map[string]leasehold.TaskInfo{}}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	err := w.run(ctx, watchFlags{all: true, interval: time.Millisecond, timeout: 50 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "before the first count") {
		t.Errorf("error %v, want a timeout before the first count", err)
	}
	if out.Len() != 0 {
		t.Errorf("stdout %q, want nothing: no status was counted in full", out.String())
	}
}
