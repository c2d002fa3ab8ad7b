package leasehold_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/internal/awstest"
	"github.com/leasehold/leasehold/internal/bench"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/workflow"
)

// padded is a map child's result in TestMapOutcomesOnTheStack: its index
// and some padding.
type padded struct {
	I   int    `json:"i"`
	Pad string `json:"pad"`
}

// batchGets records the BatchGetItem calls whose first key starts with
// prefix: the keys each asked for, and the read units each consumed
// (strongly consistent: 1 per 4 KB of each item returned, at least 1 a
// key, as DynamoDB prices them).
type batchGets struct {
	prefix string
	mu     sync.Mutex
	keys   []int
	units  float64
}

func (b *batchGets) apiOption() func(*middleware.Stack) error {
	return func(stack *middleware.Stack) error {
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("fanin.batchGets",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				out, md, err := next.HandleInitialize(ctx, in)
				req, ok := in.Parameters.(*dynamodb.BatchGetItemInput)
				if !ok || err != nil {
					return out, md, err
				}
				keys, ours := 0, false
				for _, ka := range req.RequestItems {
					for _, k := range ka.Keys {
						if id, ok := k["id"].(*types.AttributeValueMemberS); ok && strings.HasPrefix(id.Value, b.prefix) {
							ours = true
						}
						keys++
					}
				}
				if !ours {
					return out, md, err
				}
				units := float64(keys)
				if res, ok := out.Result.(*dynamodb.BatchGetItemOutput); ok {
					for _, items := range res.Responses {
						for _, item := range items {
							units += math.Ceil(bench.ItemSize(item)/4096) - 1
						}
					}
				}
				b.mu.Lock()
				b.keys = append(b.keys, keys)
				b.units += units
				b.mu.Unlock()
				return out, md, err
			}), middleware.After)
	}
}

// TestMapOutcomesOnTheStack (issue 36, point 1): a map of 300 children on
// DynamoDB, read back by its parent through MapResult.Outcomes, child 0
// first: 3 BatchGetItem calls of 100 keys, about 100 read units each for
// children of under 4 KB.
func TestMapOutcomesOnTheStack(t *testing.T) {
	t.Parallel()
	const n = 300
	e := setupStack(t)
	gets := &batchGets{prefix: "fan-1/parts/"}
	e.cfg.APIOptions = append(e.cfg.APIOptions, gets.apiOption())
	c := newClientOn(t, e)
	var (
		mu                sync.Mutex
		sum, read, calls0 int
		inOrder           bool
	)
	hs := leasehold.NewHandlers()
	leasehold.Handle(hs, "part", func(ctx context.Context, task *leasehold.Task[int]) (padded, error) {
		return padded{I: task.Payload, Pad: strings.Repeat("x", 100)}, nil
	})
	leasehold.Handle(hs, "fanin", func(ctx context.Context, task *leasehold.Task[int]) (int, error) {
		res, err := workflow.Map(ctx, "parts", n, func(i int) workflow.Child {
			return workflow.Child{Kind: "part", Payload: i}
		}, workflow.MapOptions{MaxConcurrency: 50})
		if err != nil {
			return 0, err
		}
		gets.mu.Lock()
		first := len(gets.keys)
		gets.mu.Unlock()
		s, k, ordered := 0, 0, true
		for o, err := range res.Outcomes(ctx) {
			if err != nil {
				return 0, err
			}
			var p padded
			if o.Status != leasehold.StatusSucceeded || json.Unmarshal(o.Result, &p) != nil || p.I != k {
				ordered = false
			}
			s += p.I
			k++
		}
		mu.Lock()
		sum, read, calls0, inOrder = s, k, first, ordered
		mu.Unlock()
		return s, nil
	})
	w := e.worker(t, leasehold.WorkerConfig{Handlers: hs})
	ctx, cancel := context.WithTimeout(t.Context(), awstest.Scale(5*time.Minute))
	defer cancel()
	if _, err := c.Enqueue(ctx, leasehold.Submission{Kind: "fanin", ID: "fan-1", MaxAttempts: 3}); err != nil {
		t.Fatal(err)
	}
	e.pump(t, w, 4*time.Minute, func() bool { return e.status(t, "fan-1").Terminal() })
	got := e.get(t, "fan-1")
	if want := fmt.Sprint(n * (n - 1) / 2); got.Status != lease.StatusSucceeded || string(got.Result) != want {
		t.Fatalf("fan-1: %s %s (%q), want SUCCEEDED %s", got.Status, got.Result, got.Error, want)
	}
	mu.Lock()
	defer mu.Unlock()
	gets.mu.Lock()
	defer gets.mu.Unlock()
	if read != n || sum != n*(n-1)/2 || !inOrder {
		t.Errorf("read %d outcomes (in order, all SUCCEEDED: %v) summing to %d, want %d", read, inOrder, sum, n)
	}
	// The last run's reads: 3 pages of 100 keys (an earlier run that read
	// and then lost its finish's answer read the same pages before them).
	pages := gets.keys[calls0:]
	if len(pages) < 3 || fmt.Sprint(pages[:3]) != "[100 100 100]" {
		t.Errorf("the outcomes were read in BatchGetItem calls of %v keys, want [100 100 100]", pages)
	}
	keys := 0
	for _, k := range gets.keys {
		keys += k
	}
	t.Logf("%d children's outcomes in %d BatchGetItem calls of %v keys: %.0f read units, %.1f per 100 children",
		n, len(gets.keys), gets.keys, gets.units, gets.units*100/float64(keys))
}
