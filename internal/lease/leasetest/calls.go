package leasetest

import (
	"context"
	"maps"
	"sync"

	"github.com/aws/smithy-go/middleware"
)

// CallCounter counts the AWS API operations a client makes, by operation
// name ("PutItem", "SendMessage", ...). Add it to a client with
//
//	dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
//		o.APIOptions = append(o.APIOptions, counter.APIOption())
//	})
//
// It counts once per operation call, on the Initialize step: retries of
// the same call are not counted again. The zero value is ready to use and it
// is safe for concurrent use.
type CallCounter struct {
	mu     sync.Mutex
	counts map[string]int
}

// APIOption returns the stack mutator that installs the counter.
func (c *CallCounter) APIOption() func(*middleware.Stack) error {
	return func(stack *middleware.Stack) error {
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("leasetest.CallCounter",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				c.add(middleware.GetOperationName(ctx))
				return next.HandleInitialize(ctx, in)
			}), middleware.Before)
	}
}

func (c *CallCounter) add(op string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.counts == nil {
		c.counts = map[string]int{}
	}
	c.counts[op]++
}

// Count returns how many calls of op were made.
func (c *CallCounter) Count(op string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.counts[op]
}

// Snapshot returns a copy of every count so far.
func (c *CallCounter) Snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := maps.Clone(c.counts)
	if out == nil {
		out = map[string]int{}
	}
	return out
}

// Reset forgets every count.
func (c *CallCounter) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	clear(c.counts)
}
