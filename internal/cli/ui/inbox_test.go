package ui_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/cli/ui"
	"github.com/leasehold/leasehold/leaseholdtest"
	"github.com/leasehold/leasehold/workflow"
)

// inboxFixture runs a workflow that receives one message on "approve",
// publishes it as the event "progress", and then waits on "go", which no
// one sends: it sleeps with two more approvals, an alert (whose payload is
// markup) and 25 messages of "bulk" waiting in its inbox.
func inboxFixture(t *testing.T) *fixture {
	t.Helper()
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "talk", func(ctx context.Context, _ *leasehold.Task[json.RawMessage]) (any, error) {
		got, ok, err := workflow.Receive[json.RawMessage](ctx, "approve", time.Hour)
		if err != nil || !ok {
			return nil, err
		}
		if err := workflow.SetEvent(ctx, "progress", got); err != nil {
			return nil, err
		}
		_, _, err = workflow.Receive[json.RawMessage](ctx, "go", 24*time.Hour)
		return "done", err
	})
	env := leaseholdtest.New(t, hs)
	if _, err := env.Enqueue(leasehold.Submission{Kind: "talk", ID: "talk-1"}); err != nil {
		t.Fatal(err)
	}
	send := func(topic, id string, payload any) {
		t.Helper()
		if _, err := env.Send("talk-1", topic, id, payload); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		send("approve", fmt.Sprintf("a-%d", i), map[string]int{"approval": i})
	}
	send("alert", "n-1", xss)
	for i := range 25 {
		send("bulk", fmt.Sprintf("b-%d", i), i)
	}
	if err := env.Run(); err != nil {
		t.Fatal(err)
	}
	if st, err := env.Task("talk-1"); err != nil || st.Status != leasehold.StatusPending {
		t.Fatalf("talk-1 does not sleep in its receive: %+v %v", st, err)
	}
	srv, err := ui.New(ui.Config{Tasks: env.Client(), Queues: &fakeQueues{}, WorkQueueURL: workURL, Now: env.Clock().Now})
	if err != nil {
		t.Fatal(err)
	}
	return newFixture(t, env, srv, nil)
}

// TestTaskPageShowsInboxAndEvents: a task's page counts its messages per
// topic (delivered and waiting), lists the waiting ones up to its bound
// with "more" past it, escapes their payloads, and shows its events.
func TestTaskPageShowsInboxAndEvents(t *testing.T) {
	f := inboxFixture(t)
	body := f.get(t, "/task?id=talk-1")
	rows := regexp.MustCompile(`<tr><td>([a-z]+)</td><td class="n">(\d+)</td><td class="n">(\d+)</td></tr>`).FindAllStringSubmatch(body, -1)
	var counts []string
	for _, r := range rows {
		counts = append(counts, r[1]+" "+r[2]+"/"+r[3])
	}
	if got, want := strings.Join(counts, ", "), "alert 0/1, approve 1/2, bulk 0/25"; got != want {
		t.Errorf("topics (delivered/waiting): got %q, want %q\n%s", got, want, body)
	}
	msgs := regexp.MustCompile(`(?s)<table class="list" id="inbox-messages">(.*?)</table>`).FindStringSubmatch(body)
	if msgs == nil {
		t.Fatalf("no waiting messages table:\n%s", body)
	}
	if n := strings.Count(msgs[1], "<tr><td>"); n != 20 {
		t.Errorf("the page lists %d waiting messages, want its bound, 20", n)
	}
	for _, want := range []string{
		`<td>approve</td><td class="n">2</td><td>a-1</td>`, // the first waiting approval: number 2
		`id="inbox-more"`,
		`id="inbox-receiving">go<`,
		`<td>progress</td>`,
		"&#34;approval&#34;: 0", // the event's value: the approval received
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the task page lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, xss) || !strings.Contains(msgs[1], "&lt;script&gt;") {
		t.Errorf("the alert's payload is not shown escaped:\n%s", msgs[1])
	}
	// A live refresh reads the task only.
	if live := f.get(t, "/task?id=talk-1&live=1"); strings.Contains(live, "inbox") {
		t.Errorf("the live refresh shows the inbox:\n%s", live)
	}
}

// TestInboxOfATaskWithoutMessages: a task that never had a message or an
// event says so, rather than failing its page.
func TestInboxOfATaskWithoutMessages(t *testing.T) {
	f := setup(t, 50)
	body := f.get(t, "/task?id=ok-1")
	for _, want := range []string{`id="inbox-none"`, `id="events-none"`} {
		if !strings.Contains(body, want) {
			t.Errorf("the page of a task with no inbox lacks %s:\n%s", want, body)
		}
	}
}
