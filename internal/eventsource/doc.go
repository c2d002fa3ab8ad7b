// Package eventsource runs a Lambda SQS handler outside Lambda. It stands in
// for Lambda's SQS event source mapping so that the same handler code can run
// as a long-lived process (ECS, EC2, a laptop, `make demo`) against any SQS
// endpoint the SDK is configured for.
//
// A [Runner] polls one queue, builds [events.SQSEvent] values exactly as
// Lambda would, calls a [Handler] (the signature lambda.Start accepts for an
// SQS function with ReportBatchItemFailures enabled) and deletes the messages
// the handler processed.
//
// # Batches
//
// Each poller receives up to 10 messages per ReceiveMessage, long-polling for
// WaitTime, and asks for all system attributes (ApproximateReceiveCount,
// SentTimestamp, SenderId, MessageGroupId, ...) and all message attributes.
// With BatchWindow zero the first non-empty receive is the batch. With a
// window, the poller keeps receiving after the first message arrives until it
// holds BatchSize messages or the window has passed, like
// MaximumBatchingWindowInSeconds; as in Lambda, a window is what allows a
// BatchSize above 10 (standard queues only, up to 10000).
//
// Every record carries MessageId, ReceiptHandle, Body, Md5OfBody,
// Md5OfMessageAttributes, Attributes, MessageAttributes, EventSource
// ("aws:sqs"), EventSourceARN and AWSRegion. The ARN and region come from
// the queue's QueueArn attribute, read once when Run starts, so they are right
// for any endpoint without parsing queue URLs.
//
// # Invocations
//
// The handler's context has a deadline InvocationTimeout away (the function
// timeout) and a [lambdacontext.LambdaContext] with a fresh AwsRequestID, so
// code that budgets from ctx.Deadline() or logs the request ID behaves as in
// Lambda. Values of the context given to Run are passed through; its
// cancellation is not (see Shutdown).
//
// # Deleting
//
// After the handler returns, the outcome is decided as Lambda decides it for
// a function whose FunctionResponseTypes include ReportBatchItemFailures:
//
//   - an error, a panic (recovered and logged with its stack), or a return
//     after the invocation deadline (Lambda would have stopped the function)
//     fails the whole batch: nothing more is deleted, and every message not
//     acknowledged on the way (see Ack below) comes back
//     after its visibility timeout with a higher receive count;
//   - a BatchItemFailures entry whose ItemIdentifier is empty or is not a
//     MessageId of the batch also fails the whole batch;
//   - otherwise every message not listed in BatchItemFailures is deleted with
//     DeleteMessageBatch, ten per call (see below). A message whose delete fails is
//     logged and will simply be delivered again; handlers must be idempotent,
//     as they must be under Lambda.
//
// Failed messages are not touched: their visibility timeout, the queue's
// redrive policy and dead-letter queue apply as they would under Lambda.
//
// One departure from Lambda: a handler may call Ack(ctx, messageID) as soon
// as a message is done with, and the runner deletes it within 200ms
// (deleteWindow), before the batch ends and whatever the batch's outcome.
// Deletes are batched across batches and pollers: a call goes out as soon
// as ten messages wait, the rest at the end of the window, so Run makes
// about one DeleteMessageBatch per ten messages, as Lambda's event source
// mapping does per batch, and no poller waits for a delete before it
// receives again (BenchmarkRunDeletes reports the calls per message). The
// calls go out concurrently, two a poller in flight at most (at least 4,
// at most 128), and the messages waiting for one are bounded: when the
// deletes fall behind, a batch waits before it ends until its messages can
// be queued, which holds its poller's receiving, so a handled message is
// not left waiting until its visibility timeout runs out. Messages
// acknowledged so are no longer delivered again
// when a later message of the batch crashes it or times it out; under
// Lambda, where nobody listens, Ack does nothing.
//
// # Concurrency
//
// Pollers goroutines each gather a batch, invoke the handler and delete,
// up to InFlight batches at a time (one unless set), so at most Pollers ×
// InFlight handler calls run at once (with InFlight 1, Lambda's
// MaximumConcurrency). Every SQS call has a CallTimeout. A failing
// ReceiveMessage is retried after a jittered exponential backoff (200ms
// doubling to 20s) that ends early when Run's context is done.
//
// # Shutdown
//
// Wire SIGTERM and SIGINT with signal.NotifyContext and pass that context to
// Run. When it is done, Run starts no new receive (one in flight is let
// finish, at most WaitTime, because SQS may hand messages to a poll whose
// caller gave up and they would stay hidden until the visibility timeout),
// hands any messages a poller holds to the handler, waits
// for every running handler, deletes what they processed, and returns nil.
// Handler contexts are detached from Run's with context.WithoutCancel: a
// shutdown does not cancel them, only their own deadline does, so a batch in
// flight finishes as it would have in Lambda.
//
// Run never abandons a running handler, so shutdown can take up to
// InvocationTimeout plus a few SQS calls, longer if a handler ignores its
// context. Bounding that is the caller's business: a second signal (call the
// stop function returned by signal.NotifyContext once the first arrives, so
// the next one kills the process) or the orchestrator's kill deadline (ECS
// stopTimeout, which should exceed InvocationTimeout). Messages of a killed
// batch are not lost; they reappear after their visibility timeout.
//
// # Differences from Lambda
//
//   - VisibilityTimeout can override the queue's value on receive, so tests
//     and demos can watch redelivery quickly; Lambda always uses the queue's.
//   - Lambda refuses a mapping whose queue visibility timeout is shorter
//     than the function timeout; Run logs a warning instead, because a
//     handler that extends visibility itself (as the leasehold worker does)
//     can live with it.
//   - Pollers is fixed; Lambda scales its pollers with the backlog.
//   - There is no 6 MB payload cap on a batch.
//   - With a window, the last long poll is rounded down to whole seconds, so
//     a batch that does not fill up may be handed over up to a second before
//     the window ends; it is never handed over later.
//   - For FIFO queues SQS itself keeps a message group in order while a
//     batch holds some of its messages; as under Lambda, a handler that fails
//     a message should also report the later messages of its group.
//   - The LambdaContext has no InvokedFunctionArn, and the lambdacontext
//     package variables (FunctionName, ...) are whatever the environment says.
package eventsource
