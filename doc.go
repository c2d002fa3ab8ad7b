// Package leasehold runs tasks on SQS and DynamoDB: a Client enqueues them,
// a Worker claims each one under a lease with a fencing token, runs the
// handler registered for its kind while renewing the lease and the
// message's visibility, and records the outcome with a write that lands
// only while the lease is held. Failures are retried with backoff up to a
// task's max attempts, then kept as FAILED.
//
// # Roles
//
// The package has what three kinds of code need, and nothing else:
//
//   - a handler: HandlerFunc, Task (the attempt it runs, with its Fence),
//     and the errors that steer the task: Fail, Cancel, Snooze; any other
//     error is retried. The handler's context ends with ErrLeaseLost,
//     ErrDeadline or ErrCancelRequested (read context.Cause).
//   - a worker: Handlers, Handle, Worker and its WorkerConfig.
//     Worker.HandleSQS is the Lambda handler; Worker.Run polls the queues as
//     a long-lived process. NewWorkerFromEnv reads every LEASEHOLD_*
//     setting (package settings and docs/worker.md list them, with their
//     defaults).
//   - a client: Client and its ClientConfig, with Enqueue and its options,
//     Get, List, Wait and Result, Cancel, Retry, and the callback calls.
//     Its errors match the Err* values with errors.Is.
//
// Handlers that are workflows (steps, fan-out and fan-in, callbacks) use
// package github.com/leasehold/leasehold/workflow. Package
// github.com/leasehold/leasehold/serve runs a worker of your own off
// Lambda; package github.com/leasehold/leasehold/leaseholdtest runs
// handlers in unit tests; package github.com/leasehold/leasehold/admin is
// what the leasehold command uses to operate a deployment.
//
// # A minimal worker and client
//
//	hs := leasehold.NewHandlers()
//	leasehold.Handle(hs, "resize", func(ctx context.Context, t *leasehold.Task[Image]) (Thumb, error) {
//		return resize(ctx, t.Payload)
//	})
//	w, err := leasehold.NewWorkerFromEnv(ctx, leasehold.WorkerConfig{AWS: awsCfg, Handlers: hs})
//	// on Lambda: lambda.Start(w.HandleSQS); elsewhere: w.Run(ctx)
//
//	c, err := leasehold.NewClient(leasehold.ClientConfig{AWS: awsCfg, Table: table, QueueURL: queueURL})
//	info, err := c.Enqueue(ctx, leasehold.Submission{Kind: "resize", Payload: Image{Key: "a.png"}})
//
// The repository's README and docs/ (worker.md, enqueue.md, states.md,
// workflows.md, performance.md) say the rest: the states and their writes,
// the timing rules, the limits, and what each task costs.
package leasehold
