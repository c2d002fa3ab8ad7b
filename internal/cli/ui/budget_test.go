package ui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/cli/ui"
	"github.com/leasehold/leasehold/leaseholdtest"
)

// slowTasks makes each List call of a status in slow take per, as a
// listing call on a big table does.
type slowTasks struct {
	ui.Tasks
	per  time.Duration
	slow map[leasehold.Status]bool // nil: every status
}

func (s *slowTasks) List(ctx context.Context, o leasehold.ListOptions) (leasehold.Page, error) {
	if s.slow == nil || s.slow[o.Status] {
		select {
		case <-time.After(s.per):
		case <-ctx.Done():
			return leasehold.Page{}, ctx.Err()
		}
	}
	return s.Tasks.List(ctx, o)
}

// bigTable is an environment with n PENDING tasks of kind "common" and,
// older than all of them, one of kind "rare" (id rare-1).
func bigTable(t *testing.T, n int) *leaseholdtest.Env {
	t.Helper()
	hs := leasehold.NewHandlers()
	for _, kind := range []string{"rare", "common"} {
		leasehold.Handle(hs, kind, func(context.Context, *leasehold.Task[json.RawMessage]) (any, error) { return nil, nil })
	}
	env := leaseholdtest.New(t, hs)
	if _, err := env.Enqueue(leasehold.Submission{Kind: "rare", ID: "rare-1"}); err != nil {
		t.Fatal(err)
	}
	env.Clock().Advance(time.Second)
	for i := range n {
		if _, err := env.Enqueue(leasehold.Submission{Kind: "common", ID: fmt.Sprintf("common-%04d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	return env
}

// pageTime is the test's page budget: a listing of the 501 tasks at 20 ms
// a call of 50 needs 11 calls, more than fit in it.
const pageTime = 100 * time.Millisecond

var continueLink = regexp.MustCompile(`href="([^"]+)" id="continue"`)

// Every filter of the task list that reads the listing (an id prefix)
// answers within its budget on a table whose reading takes longer: a
// partial page saying how many tasks it read, with a link that goes on,
// never an error; following the links finds the rare task. A kind filter
// reads the listing of its kind, only its own tasks: one page
// (TestKindFilterReadsOnlyItsKind).
func TestTaskListAnswersWithinItsBudget(t *testing.T) {
	t.Parallel()
	env := bigTable(t, 500)
	tasks := &slowTasks{Tasks: env.Client(), per: 20 * time.Millisecond}
	srv, h := serveWith(t, ui.Config{Tasks: tasks, Queues: &fakeQueues{}, WorkQueueURL: workURL, PageTime: pageTime, Now: env.Clock().Now})
	for _, c := range []struct {
		target string
		found  string // the task the pages find at last; "" none
	}{
		{"/tasks?prefix=rare", "rare-1"},
		{"/tasks?status=PENDING&prefix=rare", "rare-1"},
		{"/tasks?prefix=zzzz", ""},
	} {
		target, pages, partial := c.target, 0, 0
		var found []string
		for target != "" {
			if pages++; pages > 30 {
				t.Fatalf("%s: the continue links do not end", c.target)
			}
			w := request(t, h, srv, http.MethodGet, target, nil)
			body := w.Body.String()
			if w.Code != http.StatusOK {
				t.Fatalf("%s: %d %s", target, w.Code, body)
			}
			found = append(found, ids(body)...)
			target = ""
			if m := continueLink.FindStringSubmatch(body); m != nil {
				partial++
				if !regexp.MustCompile(`Read \d+ task\(s\) in this page's 100ms`).MatchString(body) {
					t.Errorf("%s: a partial page that does not say what it read:\n%s", c.target, body)
				}
				target = strings.TrimPrefix(strings.ReplaceAll(m[1], "&amp;", "&"), srv.Base())
			}
		}
		if partial == 0 {
			t.Errorf("%s: read all 501 tasks in one page, past its %s", c.target, pageTime)
		}
		if strings.Join(found, ",") != c.found {
			t.Errorf("%s: found %v, want %q", c.target, found, c.found)
		}
	}
}

// The overview reads each status with its own budget: a status whose
// listing is slow is counted as far as its time goes ("at least N, still
// counting"), and the others are counted whole.
func TestOverviewStatusesHaveTheirOwnBudget(t *testing.T) {
	t.Parallel()
	env := bigTable(t, 500)
	tasks := &slowTasks{Tasks: env.Client(), per: 20 * time.Millisecond, slow: map[leasehold.Status]bool{leasehold.StatusPending: true}}
	srv, h := serveWith(t, ui.Config{Tasks: tasks, Queues: &fakeQueues{}, WorkQueueURL: workURL, Scan: 6000, PageTime: pageTime, Now: env.Clock().Now})
	w := request(t, h, srv, http.MethodGet, "/", nil)
	body := w.Body.String()
	if w.Code != http.StatusOK {
		t.Fatalf("overview: %d %s", w.Code, body)
	}
	m := regexp.MustCompile(`(?s)>PENDING</span></a></td><td class="n"><span class="counting">at least (\d+), still counting</span>`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("PENDING is not shown as still counting:\n%s", body)
	}
	if m[1] == "501" {
		t.Errorf("PENDING counted whole (%s) past its budget", m[1])
	}
	for _, st := range leasehold.Statuses()[1:] {
		if !regexp.MustCompile(`>` + string(st) + `</span></a></td><td class="n">0</td>`).MatchString(body) {
			t.Errorf("%s is not counted exactly (0):\n%s", st, body)
		}
	}
}

// A bulk dry run whose filter matches nothing (an id prefix: the listing
// is read) answers within its budget with what it read and a form that
// goes on; going on reaches the end.
func TestBulkDryRunAnswersWithinItsBudget(t *testing.T) {
	t.Parallel()
	env := bigTable(t, 500)
	tasks := &slowTasks{Tasks: env.Client(), per: 20 * time.Millisecond}
	srv, h := serveWith(t, ui.Config{Tasks: tasks, Queues: &fakeQueues{}, WorkQueueURL: workURL, PageTime: pageTime, Now: env.Clock().Now})
	cursorField := regexp.MustCompile(`(?s)id="bulk-continue">.*?name="cursor" value="([^"]*)"`)
	form := url.Values{"action": {"cancel"}, "status": {"PENDING"}, "prefix": {"zzzz"}}
	parts := 0
	for {
		if parts++; parts > 30 {
			t.Fatal("the dry run's continue forms do not end")
		}
		w := request(t, h, srv, http.MethodPost, "/bulk", form)
		body := w.Body.String()
		if w.Code != http.StatusOK {
			t.Fatalf("dry run: %d %s", w.Code, body)
		}
		if !strings.Contains(body, "Dry run: 0 task(s)") {
			t.Fatalf("dry run does not count 0:\n%s", body)
		}
		m := cursorField.FindStringSubmatch(body)
		if m == nil {
			break
		}
		form.Set("cursor", strings.ReplaceAll(m[1], "&#43;", "+"))
	}
	if parts < 2 {
		t.Errorf("the dry run read all 501 tasks in one answer, past its %s", pageTime)
	}
}

// A listing read that does not answer within the page's time (a table so
// slow that even the first read outlasts it) is cut off a little later:
// the task list and the dry run answer with what they have and a way on,
// not with an HTTP error.
func TestSlowReadIsCutOff(t *testing.T) {
	t.Parallel()
	env := bigTable(t, 1)
	tasks := &countingTasks{Tasks: env.Client(), block: true}
	srv, h := serveWith(t, ui.Config{Tasks: tasks, Queues: &fakeQueues{}, WorkQueueURL: workURL, PageTime: pageTime, RequestTimeout: 5 * time.Second, Now: env.Clock().Now})
	w := request(t, h, srv, http.MethodGet, "/tasks?kind=rare", nil)
	if body := w.Body.String(); w.Code != http.StatusOK || !strings.Contains(body, "was cut off") || continueLink.FindStringSubmatch(body) == nil {
		t.Errorf("task list with a read that does not answer: %d, want a partial page that says so:\n%s", w.Code, body)
	}
	w = request(t, h, srv, http.MethodPost, "/bulk", url.Values{"action": {"cancel"}, "kind": {"rare"}})
	if body := w.Body.String(); w.Code != http.StatusOK || !strings.Contains(body, "was cut off") || !strings.Contains(body, `id="bulk-continue"`) {
		t.Errorf("dry run with a read that does not answer: %d, want a partial answer that says so:\n%s", w.Code, body)
	}
}
