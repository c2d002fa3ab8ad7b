package ui_test

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/cli/ui"
	"github.com/leasehold/leasehold/leaseholdtest"
)

// The default work queue is one queue whatever a task was recorded with:
// "" (the client's tasks) or its name (a raw inline token sent with
// SendMessage, a redriven message). The client lists both as "", and the
// inspector's "By queue", queue table and queues page show it once, with
// one pause form.
func TestWorkQueueIsOneQueue(t *testing.T) {
	t.Parallel()
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "k", func(context.Context, *leasehold.Task[json.RawMessage]) (any, error) { return nil, nil })
	env := leaseholdtest.New(t, hs)
	// The environment's work queue is called "work" (workURL's last part).
	for _, s := range []leasehold.Submission{
		{Kind: "k", ID: "by-client"},
		{Kind: "k", ID: "by-name", Queue: "work"},
		{Kind: "k", ID: "elsewhere", Queue: "images"},
	} {
		if _, err := env.Enqueue(s); err != nil {
			t.Fatal(err)
		}
	}
	page, err := env.Client().List(t.Context(), leasehold.ListOptions{Status: leasehold.StatusPending})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, task := range page.Tasks {
		got[task.ID] = task.Queue
	}
	if got["by-client"] != "" || got["by-name"] != "" || got["elsewhere"] != "images" {
		t.Errorf("listed queues %v, want by-client and by-name in the work queue (\"\"), elsewhere in images", got)
	}
	if info, err := env.Client().Get(t.Context(), "by-name"); err != nil || info.Queue != "" {
		t.Errorf("Get by-name: queue %q (%v), want the work queue's \"\"", info.Queue, err)
	}

	srv, h := serveWith(t, ui.Config{Tasks: env.Client(), Queues: &fakeQueues{}, WorkQueueURL: workURL, Now: env.Clock().Now})
	w := request(t, h, srv, http.MethodGet, "/", nil)
	body := w.Body.String()
	if w.Code != http.StatusOK {
		t.Fatalf("overview: %d %s", w.Code, body)
	}
	byQueue := regexp.MustCompile(`(?s)<table id="by-queue">(.*?)</table>`).FindStringSubmatch(body)
	if byQueue == nil || !strings.Contains(byQueue[1], `<td>(work queue)</td><td class="n">2</td>`) || strings.Contains(byQueue[1], "<td>work</td>") {
		t.Errorf("By queue does not show the work queue once, with 2 tasks:\n%s", byQueue)
	}
	for _, page := range []string{"/", "/queues"} {
		body := request(t, h, srv, http.MethodGet, page, nil).Body.String()
		table := regexp.MustCompile(`(?s)<table class="list" id="queues">(.*?)</table>`).FindStringSubmatch(body)
		if table == nil {
			t.Fatalf("%s: no queue table:\n%s", page, body)
		}
		if n := strings.Count(table[1], "<tr>") - 1; n != 2 || strings.Contains(table[1], "<td>work</td>") {
			t.Errorf("%s: the queue table has %d queue rows, want 2 (the work queue once, images):\n%s", page, n, table[1])
		}
	}
	if n := strings.Count(request(t, h, srv, http.MethodGet, "/queues", nil).Body.String(), `<form method="post" action="/`+strings.Trim(srv.Base(), "/")+`/action/pause"`); n != 2 {
		t.Errorf("the queues page has %d pause forms, want 2 (the work queue once, images)", n)
	}
	// The work queue's name as a filter picks its tasks, both of them.
	if got := ids(request(t, h, srv, http.MethodGet, "/tasks?queue=work", nil).Body.String()); len(got) != 2 {
		t.Errorf("/tasks?queue=work: %v, want by-client and by-name", got)
	}
}
