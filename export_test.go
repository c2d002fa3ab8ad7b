package leasehold

import (
	"time"

	"github.com/jonboulle/clockwork"
	"go.opentelemetry.io/otel/trace"

	"github.com/leasehold/leasehold/internal/defaults"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lifecycle"
)

// For the external tests (package leasehold_test), which may use package
// workflow: a worker and a client on an in-memory store and a queue of the
// test's.

func NewWorkerOn(store lease.Store, q lifecycle.SQSClient, cfg WorkerConfig) (*Worker, error) {
	return newWorker(store, q, cfg)
}

// ClientSQS is the SQS calls a client makes.
type ClientSQS = clientSQS

func NewClientOn(store adminStore, q ClientSQS, queueURL string, tp trace.TracerProvider, mws ...EnqueueMiddleware) *Client {
	c := &Client{store: store, sqs: q, table: "mem", queueURL: queueURL,
		opts: clientOptions{callTimeout: 5 * time.Second, maxAttempts: defaults.MaxAttempts, clock: clockwork.NewRealClock(),
			middleware: mws}}
	c.traceWith(tp)
	return c
}
