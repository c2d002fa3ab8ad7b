package lifecycle

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"log/slog"
	"sync"

	"github.com/leasehold/leasehold/internal/lease/query"
)

// Executor processes the messages of SQS batches.
type Executor struct {
	cfg Config
	// timers holds the timers executions wait for their handlers with
	// (clockwork.Timer, stopped), reused from one message to the next.
	timers sync.Pool
	// listings are the batch listing entries later batches are added to
	// (listBatch), one per kind and queue.
	listingMu sync.Mutex
	listings  map[query.ListBy]*openListing
}

// New validates cfg and returns an Executor.
func New(cfg Config) (*Executor, error) {
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	c.fullWindows = newFullWindows(c.RateLimits)
	return &Executor{cfg: c}, nil
}

// Config returns the configuration in force, defaults applied.
func (e *Executor) Config() Config { return e.cfg }

// Process carries one message through its lifecycle and says whether it may
// be deleted. It returns only when every goroutine it started has stopped,
// except a handler that ignored its cancelled context past the deadline.
func (e *Executor) Process(ctx context.Context, log *slog.Logger, m Message) Result {
	return e.process(ctx, log, m, nil, nil)
}

// process is Process; vis, when not nil, extends m's visibility together
// with the other running messages of its batch; pre, when not nil, is m's
// token as its batch decoded it, with the batch listing entry of the task
// it creates.
func (e *Executor) process(ctx context.Context, log *slog.Logger, m Message, vis *batchVisibility, pre *received) Result {
	if log == nil {
		log = e.cfg.Logger
	}
	var nonce [4]byte
	_, _ = rand.Read(nonce[:]) // never fails (crypto/rand)
	var nonceHex [2 * len(nonce)]byte
	hex.Encode(nonceHex[:], nonce[:])
	x := &execution{
		cfg: &e.cfg, log: taskLog{base: log, messageID: m.ID}, msg: m,
		claimed: claimRecord{ownerName: e.cfg.Owner + "/" + m.ID + "/" + string(nonceHex[:])},
		running: runRecord{vis: vis, timers: &e.timers}, in: intake{pre: pre},
	}
	return x.run(ctx)
}

// ProcessBatch processes msgs concurrently, at most Concurrency at a time,
// and returns one Result per message, in order. It returns once all are
// done. The running messages of a batch of more than one extend their
// visibility together, with ChangeMessageVisibilityBatch.
func (e *Executor) ProcessBatch(ctx context.Context, log *slog.Logger, msgs []Message) []Result {
	return e.ProcessBatchEach(ctx, log, msgs, nil)
}

// ProcessBatchEach is ProcessBatch that also calls done (when not nil) with
// each message's index and Result as soon as that message is done, from the
// goroutine that processed it, so an acknowledged message can be deleted
// before the rest of its batch ends.
func (e *Executor) ProcessBatchEach(ctx context.Context, log *slog.Logger, msgs []Message, done func(i int, r Result)) []Result {
	return e.processBatch(ctx, log, msgs, e.listBatch(ctx, log, msgs), done)
}

// processBatch is ProcessBatchEach with the batch's tokens decoded and
// listed already (pre; nil: each message decodes its own).
func (e *Executor) processBatch(ctx context.Context, log *slog.Logger, msgs []Message, pre []received, done func(i int, r Result)) []Result {
	results := make([]Result, len(msgs))
	var vis *batchVisibility
	if len(msgs) > 1 {
		vis = newBatchVisibility(&e.cfg)
	}
	sem := make(chan struct{}, e.cfg.Concurrency)
	var wg sync.WaitGroup
	for i, m := range msgs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			var p *received
			if pre != nil {
				p = &pre[i]
			}
			results[i] = e.process(ctx, log, m, vis, p)
			if done != nil {
				done(i, results[i])
			}
		})
	}
	wg.Wait()
	return results
}
