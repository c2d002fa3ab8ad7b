package lifecycle_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lifecycle"
	"github.com/leasehold/leasehold/internal/queues"
	"github.com/leasehold/leasehold/internal/token"
)

const imagesURL = "https://sqs.test/000000000000/images"

// namedQueues resolves "images"; every other name does not exist.
type namedQueues struct{}

func (namedQueues) URL(_ context.Context, name string) (string, error) {
	switch name {
	case "":
		return workURL, nil
	case "images":
		return imagesURL, nil
	}
	return "", fmt.Errorf("look up queue %s: %w", name, queues.ErrNotFound)
}

func TestRetriesGoToTheTasksQueue(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		body      string
		msgQueue  string // the queue the message arrived on
		wantQueue string
	}{
		{"inline token naming its queue", `{"v":1,"kind":"fails","id":"named","queue":"images"}`, "", "images"},
		{"inline token without a queue records the queue it came from", `{"v":1,"kind":"fails","id":"arrived"}`, "images", "images"},
		{"inline token on the default queue", `{"v":1,"kind":"fails","id":"default"}`, "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, func(cfg *lifecycle.Config) { cfg.Queues = namedQueues{} })
			e.handlers["fails"] = func(context.Context, lease.Task) ([]byte, error) { return nil, errors.New("once") }
			m := msg("m1", c.body)
			if c.msgQueue != "" {
				m.Queue, m.QueueURL = c.msgQueue, imagesURL
			}
			res := e.exec.Process(t.Context(), nil, m)
			if !res.Ack || res.Outcome != lifecycle.OutcomeRetried {
				t.Fatalf("result %+v, want an acknowledged retry", res)
			}
			id := map[string]string{"": "default", "images": "named"}[c.wantQueue]
			if c.msgQueue != "" {
				id = "arrived"
			}
			got := e.get(t, id)
			if got.Queue != c.wantQueue {
				t.Fatalf("stored queue %q, want %q", got.Queue, c.wantQueue)
			}
			wantURL := map[string]string{"": workURL, "images": imagesURL}[c.wantQueue]
			sent := e.sqs.sentTo(wantURL)
			if len(sent) != 1 || aws.ToString(sent[0].MessageBody) != token.Ref(id) {
				t.Fatalf("tokens to %s: %d, want the retry's reference token", wantURL, len(sent))
			}
		})
	}
}

// A task whose queue no longer exists is not lost: the release stands (the
// task is PENDING in the sweep index) and the message is acknowledged with
// the reason.
func TestRetryToAMissingQueueWaitsForTheSweep(t *testing.T) {
	t.Parallel()
	e := setup(t, func(cfg *lifecycle.Config) { cfg.Queues = namedQueues{} })
	e.handlers["fails"] = func(context.Context, lease.Task) ([]byte, error) { return nil, errors.New("once") }
	res := e.exec.Process(t.Context(), nil, msg("m1", `{"v":1,"kind":"fails","id":"lost","queue":"deleted"}`))
	got := e.get(t, "lost")
	if !res.Ack || !strings.Contains(res.Reason, "queue not found") || got.Status != lease.StatusPending || got.DispatchAt.IsZero() {
		t.Fatalf("result %+v, task %s dispatch at %s; want acknowledged, PENDING in the sweep index", res, got.Status, got.DispatchAt)
	}
}

// A queue deleted after its URL was cached: SendMessage's QueueDoesNotExist
// is treated like a failed lookup.
func TestRetryToADeletedQueueWaitsForTheSweep(t *testing.T) {
	t.Parallel()
	e := setup(t, func(cfg *lifecycle.Config) { cfg.Queues = namedQueues{} })
	e.sqs.goneURL = imagesURL
	e.handlers["fails"] = func(context.Context, lease.Task) ([]byte, error) { return nil, errors.New("once") }
	res := e.exec.Process(t.Context(), nil, msg("m1", `{"v":1,"kind":"fails","id":"orphan","queue":"images"}`))
	got := e.get(t, "orphan")
	if !res.Ack || !strings.Contains(res.Reason, "queue not found") ||
		got.Status != lease.StatusPending || got.DispatchAt.IsZero() {
		t.Fatalf("result %+v, task %s; want acknowledged with the reason, PENDING in the sweep index", res, got.Status)
	}
}

// Visibility changes and deletions go to the queue the message came from.
func TestMessageQueueGetsVisibilityChanges(t *testing.T) {
	t.Parallel()
	e := setup(t, func(cfg *lifecycle.Config) { cfg.Queues = namedQueues{} })
	if _, err := e.store.CreateClaimed(t.Context(), lease.NewTask{ID: "held", Kind: "k", MaxAttempts: 3, Queue: "images"}, "other"); err != nil {
		t.Fatal(err)
	}
	m := msg("m1", token.Ref("held"))
	m.Queue, m.QueueURL = "images", imagesURL
	res := e.exec.Process(t.Context(), nil, m)
	if res.Ack {
		t.Fatalf("result %+v, want the token kept while another worker holds the task", res)
	}
	v := e.sqs.visibilityChanges()
	if len(v) != 1 || aws.ToString(v[0].QueueUrl) != imagesURL {
		t.Fatalf("visibility changes %+v, want one on %s", v, imagesURL)
	}
}
