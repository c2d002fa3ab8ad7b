package ui_test

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/cli/ui"
)

// readTasks counts the tasks the listing returns to the inspector.
type readTasks struct {
	ui.Tasks
	mu   sync.Mutex
	read int
}

func (c *readTasks) List(ctx context.Context, o leasehold.ListOptions) (leasehold.Page, error) {
	p, err := c.Tasks.List(ctx, o)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.read += len(p.Tasks)
	return p, err
}

func (c *readTasks) reset() (read int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	read, c.read = c.read, 0
	return read
}

// A rare kind among 500 tasks of another: the task list filtered by it,
// with and without a status, and a bulk dry run selecting it answer in one
// page, with no link or form to go on, having read its task alone (the
// listing by kind), though each listing call is slow. Before the listing
// by kind, the filter read the status listing (all 501 tasks) and needed
// a dozen partial pages.
func TestKindFilterReadsOnlyItsKind(t *testing.T) {
	t.Parallel()
	env := bigTable(t, 500)
	tasks := &readTasks{Tasks: &slowTasks{Tasks: env.Client(), per: 20 * time.Millisecond}}
	srv, h := serveWith(t, ui.Config{Tasks: tasks, Queues: &fakeQueues{}, WorkQueueURL: workURL, PageTime: pageTime, Now: env.Clock().Now})
	for _, c := range []struct {
		target string
		found  string
	}{
		{"/tasks?kind=rare", "rare-1"},
		{"/tasks?status=PENDING&kind=rare", "rare-1"},
		{"/tasks?kind=nosuchkind", ""},
	} {
		tasks.reset()
		w := request(t, h, srv, http.MethodGet, c.target, nil)
		body := w.Body.String()
		if w.Code != http.StatusOK {
			t.Fatalf("%s: %d %s", c.target, w.Code, body)
		}
		if got := strings.Join(ids(body), ","); got != c.found {
			t.Errorf("%s: found %q, want %q", c.target, got, c.found)
		}
		if continueLink.MatchString(body) {
			t.Errorf("%s: a partial page with a link to go on; the listing by kind reads only its tasks:\n%s", c.target, body)
		}
		if read, want := tasks.reset(), len(ids(body)); read != want {
			t.Errorf("%s: the listing returned %d tasks, want only the %d of the kind", c.target, read, want)
		}
	}

	form := url.Values{"action": {"cancel"}, "status": {"PENDING"}, "kind": {"rare"}}
	w := request(t, h, srv, http.MethodPost, "/bulk", form)
	body := w.Body.String()
	if w.Code != http.StatusOK {
		t.Fatalf("dry run: %d %s", w.Code, body)
	}
	if !strings.Contains(body, "Dry run: 1 task(s)") || strings.Contains(body, `id="bulk-continue"`) {
		t.Fatalf("dry run of kind rare does not count its 1 task in one answer:\n%s", body)
	}
	if read := tasks.reset(); read != 1 {
		t.Errorf("dry run: the listing returned %d tasks, want the 1 of the kind", read)
	}
}
