package leasehold_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/token"
)

// Worker.Run writes its metrics per flush, not per batch or per task: a
// hundred inline tasks, run in batches of up to ten, cost at most 50 bytes
// of metrics a task (issue 38, point 4), and every success is counted once
// Run has returned (its flusher writes what is pending as it stops).
func TestRunWritesMetricsPerFlush(t *testing.T) {
	t.Parallel()
	e := setupStack(t)
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "echo", func(_ context.Context, task *leasehold.Task[map[string]int]) (map[string]int, error) {
		return task.Payload, nil
	})
	out := &syncBuffer{}
	w := e.worker(t, leasehold.WorkerConfig{
		Handlers: hs, Metrics: out, LongPoll: time.Second, InvocationTimeout: time.Minute, SweepEvery: -1,
	})
	const tasks = 100
	ids := make([]string, tasks)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-%d", t.Name(), i)
	}
	for i := 0; i < tasks; i += 10 {
		var entries []sqstypes.SendMessageBatchRequestEntry
		for j, id := range ids[i : i+10] {
			body, err := token.Inline("echo", id, []byte(`{"n":1}`), 3)
			if err != nil {
				t.Fatal(err)
			}
			entries = append(entries, sqstypes.SendMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(j)), MessageBody: aws.String(body)})
		}
		ctx, cancel := call(t)
		res, err := e.sqs.SendMessageBatch(ctx, &sqs.SendMessageBatchInput{QueueUrl: &e.queues.Work, Entries: entries})
		cancel()
		if err != nil || len(res.Failed) > 0 {
			t.Fatalf("send: %v %v", err, res)
		}
	}
	ctx, stop := context.WithCancel(context.WithoutCancel(t.Context()))
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	next := 0
	waitFor(t, 60*time.Second, func() bool {
		for ; next < tasks && e.status(t, ids[next]) == lease.StatusSucceeded; next++ {
		}
		return next == tasks
	})
	stop()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}

	out.mu.Lock()
	text := out.b.String()
	out.mu.Unlock()
	succeeded, docs := 0.0, 0
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		var doc map[string]any
		if err := json.Unmarshal(sc.Bytes(), &doc); err != nil {
			t.Fatalf("not JSON: %q: %v", sc.Text(), err)
		}
		docs++
		n, _ := doc["TasksSucceeded"].(float64)
		succeeded += n
	}
	per := float64(len(text)) / tasks
	t.Logf("%d documents, %d bytes, %.1f a task", docs, len(text), per)
	// A redelivery whose answer the SDK lost may count a success twice;
	// never fewer than the tasks.
	if succeeded < tasks {
		t.Errorf("TasksSucceeded adds up to %v, want %d: the metrics pending at shutdown were not written", succeeded, tasks)
	}
	if per > 50 {
		t.Errorf("%.1f bytes of metrics a task over %d tasks, want at most 50", per, tasks)
	}
}
