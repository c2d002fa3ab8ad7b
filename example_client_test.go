package leasehold_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/config"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/examples"
)

// A handler is a plain function: test it by calling it, no AWS needed.
func ExampleHandlerFunc() {
	var h leasehold.HandlerFunc[examples.Upper, string] = func(_ context.Context, t *leasehold.Task[examples.Upper]) (string, error) {
		return strings.ToUpper(t.Payload.Text), nil
	}
	out, err := h(context.Background(), &leasehold.Task[examples.Upper]{
		ID: "t-1", Kind: "upper", Attempt: 1, MaxAttempts: 5,
		Payload: examples.Upper{Text: "hello"},
	})
	fmt.Println(out, err)
	// Output: HELLO <nil>
}

// Status names are accepted in any case, as the CLI's --status does.
func ExampleParseStatus() {
	s, err := leasehold.ParseStatus("failed")
	fmt.Println(s, s.Terminal(), err)
	_, err = leasehold.ParseStatus("done")
	fmt.Println(errors.Is(err, leasehold.ErrInvalid))
	// Output:
	// FAILED true <nil>
	// true
}

// Result reports a task that ended without a result as a *TaskError, whose
// Status says how it ended.
func ExampleTaskError() {
	var err error = &leasehold.TaskError{ID: "greet-1", Status: leasehold.StatusFailed, Message: "name is required"}
	fmt.Println(err)
	var te *leasehold.TaskError
	fmt.Println(errors.As(err, &te) && te.Status == leasehold.StatusFailed, te.Status == leasehold.StatusCancelled)
	// Output:
	// task greet-1 ended FAILED: name is required
	// true false
}

// The JSON form of a task, as `leasehold status --json` prints it: times
// that have not happened yet are left out.
func ExampleTaskInfo() {
	created := time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC)
	info := leasehold.TaskInfo{
		ID: "greet-ada", Kind: "greet", Status: leasehold.StatusSucceeded, Attempt: 1, MaxAttempts: 5,
		Payload:   json.RawMessage(`{"name":"ada"}`),
		Result:    json.RawMessage(`"hello, ada"`),
		CreatedAt: created, FinishedAt: created.Add(time.Second),
	}
	b, _ := json.Marshal(info)
	fmt.Println(string(b))
	// Output: {"id":"greet-ada","kind":"greet","status":"SUCCEEDED","attempt":1,"max_attempts":5,"payload":{"name":"ada"},"result":"hello, ada","created_at":"2026-03-14T15:09:26Z","finished_at":"2026-03-14T15:09:27Z"}
}

// Enqueue a task, wait for it and decode its result. (Needs a stack: this
// example is compiled, not run.)
func ExampleClient() {
	ctx := context.Background()
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	c, err := leasehold.NewClient(leasehold.ClientConfig{AWS: awsCfg, Table: "leasehold-tasks", QueueName: "leasehold-work"})
	if err != nil {
		log.Fatal(err)
	}
	task, err := c.Enqueue(ctx, leasehold.Submission{
		Kind:        "greet",
		Payload:     examples.Greeting{Name: "ada"},
		ID:          "greet-ada",
		MaxAttempts: 3,
	})
	if err != nil && !errors.Is(err, leasehold.ErrAlreadyExists) { // enqueueing an id twice is a no-op
		log.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	greeting, err := leasehold.Result[string](wctx, c, task.ID)
	var te *leasehold.TaskError
	switch {
	case errors.As(err, &te) && te.Status == leasehold.StatusFailed:
		log.Printf("failed: %v", err)
	case err != nil:
		log.Fatal(err)
	default:
		fmt.Println(greeting)
	}
}

// Enqueue thousands of tasks in one call, with progress. (Compiled, not
// run.)
func ExampleClient_EnqueueMany() {
	ctx := context.Background()
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	c, err := leasehold.NewClient(leasehold.ClientConfig{AWS: awsCfg, Table: "leasehold-tasks", QueueName: "leasehold-work"})
	if err != nil {
		log.Fatal(err)
	}
	subs := make([]leasehold.Submission, 5000)
	for i := range subs {
		subs[i] = leasehold.Submission{Kind: "greet", ID: fmt.Sprintf("greet-%d", i), Payload: examples.Greeting{Name: fmt.Sprint(i)}}
	}
	results, err := c.EnqueueMany(ctx, subs, leasehold.OnProgress(func(done, total int) {
		log.Printf("%d/%d", done, total)
	}))
	if err != nil {
		log.Fatal(err) // nothing could be done, e.g. the stack is unreachable
	}
	for i, r := range results {
		if r.Err != nil && !errors.Is(r.Err, leasehold.ErrAlreadyExists) {
			log.Printf("submission %d: %v", i, r.Err)
		}
	}
}

// Page through the failed tasks and retry each. (Compiled, not run.)
func ExampleClient_List() {
	ctx := context.Background()
	awsCfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		log.Fatal(err)
	}
	c, err := leasehold.NewClient(leasehold.ClientConfig{AWS: awsCfg, Table: "leasehold-tasks", QueueName: "leasehold-work"})
	if err != nil {
		log.Fatal(err)
	}
	o := leasehold.ListOptions{Status: leasehold.StatusFailed, Limit: 100}
	for {
		page, err := c.List(ctx, o)
		if err != nil {
			log.Fatal(err)
		}
		for _, t := range page.Tasks {
			if _, err := c.Retry(ctx, t.ID, 2); err != nil {
				log.Printf("retry %s: %v", t.ID, err)
			}
		}
		if page.Next == "" {
			break
		}
		o.Cursor = page.Next
	}
}
