package leasehold

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/leasehold/leasehold/internal/dispatch"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/queues"
	"github.com/leasehold/leasehold/internal/token"
	"github.com/leasehold/leasehold/internal/wiring"
)

// clientSQS lists the SQS calls a client makes, with the SDK's signatures.
type clientSQS = wiring.ClientSQS

// workQueue returns the work queue's URL, looking it up by name on first
// use. A failed lookup is not remembered.
func (c *Client) workQueue(ctx context.Context) (string, error) {
	c.mu.Lock()
	url := c.queueURL
	c.mu.Unlock()
	if url != "" {
		return url, nil
	}
	if c.queueName == "" {
		return "", fmt.Errorf("%w: no work queue: set ClientConfig.QueueURL or QueueName", ErrConfig)
	}
	cctx, cancel := context.WithTimeout(ctx, c.opts.callTimeout)
	defer cancel()
	out, err := c.sqs.GetQueueUrl(cctx, &sqs.GetQueueUrlInput{QueueName: aws.String(c.queueName)})
	if err != nil {
		if t := c.translate(ctx, err); t != err {
			return "", t
		}
		return "", fmt.Errorf("look up work queue %s: %w: %w", c.queueName, ErrBackend, err)
	}
	url = aws.ToString(out.QueueUrl)
	c.mu.Lock()
	c.queueURL = url
	c.mu.Unlock()
	return url, nil
}

// clientQueues is the client's dispatch.QueueResolver: the empty name is the
// default work queue, any other is looked up once and cached.
type clientQueues struct{ c *Client }

func (q clientQueues) URL(ctx context.Context, name string) (string, error) {
	return q.c.queueOf(ctx, name)
}

// queueOf returns the URL of the queue named name ("" is the default work
// queue).
func (c *Client) queueOf(ctx context.Context, name string) (string, error) {
	if name == "" {
		return c.workQueue(ctx)
	}
	u, err := c.named.URL(ctx, name)
	switch {
	case err == nil:
		return u, nil
	case errors.Is(err, queues.ErrNotFound):
		return "", &MissingResourceError{Service: "SQS", Resource: name, Region: c.region, Endpoint: c.endpoints["SQS"], Err: err}
	case errors.Is(err, queues.ErrInvalidName):
		return "", err
	}
	if t := c.translate(ctx, err); t != err {
		return "", t
	}
	return "", fmt.Errorf("%w: %w", ErrBackend, err)
}

// checkQueues resolves the queue every task names, once per queue, and
// takes the tasks whose queue cannot be found out of the batch, with the
// reason in their results. It returns the tasks left and their indexes.
func (c *Client) checkQueues(ctx context.Context, tasks []lease.NewTask, index []int, results []EnqueueResult) ([]lease.NewTask, []int) {
	problem := map[string]error{}
	keptTasks, keptIndex := tasks[:0:0], index[:0:0]
	for j, t := range tasks {
		if t.Queue != "" {
			err, seen := problem[t.Queue]
			if !seen {
				_, err = c.queueOf(ctx, t.Queue)
				problem[t.Queue] = err
			}
			if err != nil {
				// Nothing was stored: name the queue, not an id that may
				// have been generated for a task that does not exist.
				results[index[j]].Err = fmt.Errorf("not enqueued: %w", err)
				continue
			}
		}
		keptTasks = append(keptTasks, t)
		keptIndex = append(keptIndex, index[j])
	}
	return keptTasks, keptIndex
}

// sendRef puts a reference token for a stored task on the work queue.
func (c *Client) sendRef(ctx context.Context, queueURL, id string) error {
	ctx, cancel := context.WithTimeout(ctx, c.opts.callTimeout)
	defer cancel()
	_, err := c.sqs.SendMessage(ctx, &sqs.SendMessageInput{
		QueueUrl:    aws.String(queueURL),
		MessageBody: aws.String(token.RefWith(id, c.traceRef(ctx))),
	})
	if err != nil {
		return fmt.Errorf("send dispatch token for %s: %w: %w", id, ErrBackend, err)
	}
	return nil
}

// dispatch stores tasks and sends their tokens; out[i] is the outcome of
// tasks[i]. The error is set only when the dispatcher could not start.
func (c *Client) dispatch(ctx context.Context, queueURL string, tasks []lease.NewTask) ([]EnqueueResult, error) {
	res, err := dispatch.Enqueue(ctx, c.store, c.sqs, queueURL, tasks, func(cfg *dispatch.Config) {
		cfg.CallTimeout = c.opts.callTimeout
		cfg.Clock = c.opts.clock
		cfg.DefaultMaxAttempts = c.opts.maxAttempts
		cfg.Queues = clientQueues{c}
		cfg.CreateWait = c.opts.createWait
		if c.opts.concurrency > 0 {
			cfg.Concurrency = c.opts.concurrency
		}
	})
	if err != nil && !errors.Is(err, dispatch.ErrIncomplete) {
		return nil, err
	}
	out := make([]EnqueueResult, len(tasks))
	for i, r := range res {
		out[i].ID = tasks[i].ID
		if r.Task.ID != "" {
			out[i].Task = c.view(r.Task)
		}
		var conflict *lease.ConflictError
		switch {
		case errors.As(r.Err, &conflict):
			out[i].Err = &ConflictError{TaskID: conflict.TaskID, Field: conflict.Field, Status: Status(conflict.Status)}
		case errors.Is(r.Err, dispatch.ErrSend):
			out[i].Err = &NotSentError{ID: tasks[i].ID, Err: c.translate(ctx, r.Err)}
		case r.Err != nil:
			out[i].Err = c.translate(ctx, r.Err)
		case r.Duplicate:
			out[i].Err = fmt.Errorf("task %s: %w", tasks[i].ID, ErrAlreadyExists)
		}
	}
	return out, nil
}
