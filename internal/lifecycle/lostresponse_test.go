package lifecycle_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/jonboulle/clockwork"

	"github.com/leasehold/leasehold/internal/awstest"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lifecycle"
	"github.com/leasehold/leasehold/internal/token"
)

// losingHTTP lets a matching request reach the emulator, then drops its
// response once and answers 500 in its place, as a connection lost after the
// write landed would look to the SDK, which then retries the same request.
type losingHTTP struct {
	next aws.HTTPClient

	mu      sync.Mutex
	target  string // X-Amz-Target of the request to lose, e.g. DynamoDB_20120810.UpdateItem
	marker  string // and a string its body contains
	dropped int
}

func (l *losingHTTP) Do(r *http.Request) (*http.Response, error) {
	lose := false
	if r.Header.Get("X-Amz-Target") != "" && r.Body != nil {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		l.mu.Lock()
		if l.target != "" && r.Header.Get("X-Amz-Target") == l.target && strings.Contains(string(body), l.marker) {
			lose, l.target = true, ""
			l.dropped++
		}
		l.mu.Unlock()
	}
	resp, err := l.next.Do(r)
	if !lose || err != nil {
		return resp, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return &http.Response{
		StatusCode: http.StatusInternalServerError,
		Status:     "500 Internal Server Error",
		Header:     http.Header{"Content-Type": []string{"application/x-amz-json-1.0"}},
		Body:       io.NopCloser(strings.NewReader(`{"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"response lost in test"}`)),
		Request:    r,
	}, nil
}

func (l *losingHTTP) droppedCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.dropped
}

// Against DynamoDB (the local stack), a write whose response is lost after
// it landed is retried by the SDK; the retry fails its condition, and the
// worker must read the item it sees as its own write, not another worker's.
func TestLostResponseOfOwnWriteOnDynamoDB(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, target, marker string
		ref, fail            bool
		outcome              lifecycle.Outcome
		status               lease.Status
	}{
		{"create", "DynamoDB_20120810.PutItem", `"RUNNING"`, false, false, lifecycle.OutcomeSucceeded, lease.StatusSucceeded},
		{"claim", "DynamoDB_20120810.UpdateItem", "#fence = #fence + :one", true, false, lifecycle.OutcomeSucceeded, lease.StatusSucceeded},
		{"finish", "DynamoDB_20120810.UpdateItem", `"SUCCEEDED"`, false, false, lifecycle.OutcomeSucceeded, lease.StatusSucceeded},
		{"release", "DynamoDB_20120810.UpdateItem", "#run_at = :run_at", false, true, lifecycle.OutcomeRetried, lease.StatusPending},
	}
	cfg := awstest.Config(t)
	table := awstest.NewTable(t, cfg)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			losing := &losingHTTP{next: cfg.HTTPClient}
			if losing.next == nil {
				losing.next = http.DefaultClient
			}
			dcfg := cfg.Copy()
			dcfg.HTTPClient = losing
			clock := clockwork.NewFakeClockAt(epoch)
			store := lease.NewDynamoStore(dynamodb.NewFromConfig(dcfg), table, lease.Options{Clock: clock})
			id := "lost-" + c.name + "-" + t.Name()
			if c.ref {
				if _, err := store.Create(t.Context(), lease.NewTask{ID: id, Kind: "k", Payload: []byte(`{}`), MaxAttempts: 3}); err != nil {
					t.Fatal(err)
				}
			}
			runs := 0
			fake := newFakeSQS()
			exec, err := lifecycle.New(lifecycle.Config{
				Store: store, SQS: fake, QueueURL: workURL, Owner: "w1", Clock: clock,
				Logger: slog.New(slog.DiscardHandler), CallTimeout: 30 * time.Second,
				Handlers: func(string) (lifecycle.Handler, bool) {
					return func(context.Context, lease.Task) ([]byte, error) {
						runs++
						if c.fail {
							return nil, errors.New("transient")
						}
						return []byte(`"ok"`), nil
					}, true
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			body := inline(t, "k", id, `{}`, 3)
			if c.ref {
				body = token.Ref(id)
			}
			losing.mu.Lock()
			losing.target, losing.marker = c.target, c.marker
			losing.mu.Unlock()

			res := exec.Process(t.Context(), nil, msg("m1", body))
			if n := losing.droppedCount(); n != 1 {
				t.Fatalf("%d responses dropped, want 1: the test did not hit the write", n)
			}
			got, err := store.Get(t.Context(), id)
			if err != nil {
				t.Fatal(err)
			}
			if !res.Ack || res.Outcome != c.outcome || runs != 1 || got.Status != c.status || got.Attempt != 1 || got.Fence != 1 {
				t.Fatalf("result %+v, runs %d, stored %s attempt %d fence %d; want acked %s after one run, %s at attempt 1, fence 1",
					res, runs, got.Status, got.Attempt, got.Fence, c.outcome, c.status)
			}
			if v := fake.visibilityChanges(); len(v) != 0 {
				t.Fatalf("message hidden as if leased elsewhere: %+v", v)
			}
		})
	}
}
