package admin

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/leasehold/leasehold/internal/queues"
)

// mappingsAPI lists the Lambda calls that pause a queue's event source
// mappings; *lambda.Client satisfies it.
type mappingsAPI interface {
	ListEventSourceMappings(ctx context.Context, params *lambda.ListEventSourceMappingsInput, optFns ...func(*lambda.Options)) (*lambda.ListEventSourceMappingsOutput, error)
	UpdateEventSourceMapping(ctx context.Context, params *lambda.UpdateEventSourceMappingInput, optFns ...func(*lambda.Options)) (*lambda.UpdateEventSourceMappingOutput, error)
}

// PauseReport is what Pause did.
type PauseReport struct {
	QueueURL string
	// Paused is the queue's state now; Since when it was paused.
	Paused bool
	Since  time.Time
	// Mappings are the UUIDs of the event source mappings (of Lambda
	// functions on the queue) whose state Pause changed, with Lambda.
	Mappings []string
}

// Pause pauses (paused) or resumes the queue at url: it sets or removes
// the queue's pause tag (queues.PausedTag), which Worker.Run reads before
// it receives (at most 2 s old), so a paused queue's messages stay queued,
// nothing lost, and its running tasks finish. With lambda it also disables
// (or enables) every Lambda event source mapping whose source is the
// queue, so deployed workers stop receiving too; that needs
// lambda:ListEventSourceMappings and lambda:UpdateEventSourceMapping.
func (a *Admin) Pause(ctx context.Context, url string, paused, lambda bool) (PauseReport, error) {
	r := PauseReport{QueueURL: url}
	now := time.Now().UTC()
	if lambda {
		arn, err := a.QueueARN(ctx, url)
		if err != nil {
			return r, err
		}
		if r.Mappings, err = a.setMappings(ctx, arn, !paused); err != nil {
			return r, err
		}
	}
	cctx, cancel := context.WithTimeout(ctx, a.callTimeout)
	err := queues.SetPaused(cctx, a.sqs, url, paused, now)
	cancel()
	if err != nil {
		return r, a.queueErr(err, url, "pause")
	}
	r.Paused, r.Since = a.Paused(ctx, url)
	return r, nil
}

// Paused reports whether the queue at url is paused, and since when; a
// queue whose tags cannot be read reads as not paused.
func (a *Admin) Paused(ctx context.Context, url string) (bool, time.Time) {
	cctx, cancel := context.WithTimeout(ctx, a.callTimeout)
	defer cancel()
	p, since, err := queues.PausedSince(cctx, a.sqs, url)
	return p && err == nil, since
}

// setMappings enables or disables the event source mappings of the queue
// with ARN arn, and returns the UUIDs it changed.
func (a *Admin) setMappings(ctx context.Context, arn string, enabled bool) ([]string, error) {
	var changed []string
	in := &lambda.ListEventSourceMappingsInput{EventSourceArn: aws.String(arn)}
	for {
		cctx, cancel := context.WithTimeout(ctx, a.callTimeout)
		out, err := a.mappings.ListEventSourceMappings(cctx, in)
		cancel()
		if err != nil {
			return changed, fmt.Errorf("list the event source mappings of %s: %w", arn, err)
		}
		for _, m := range out.EventSourceMappings {
			cctx, cancel := context.WithTimeout(ctx, a.callTimeout)
			_, err := a.mappings.UpdateEventSourceMapping(cctx, &lambda.UpdateEventSourceMappingInput{UUID: m.UUID, Enabled: aws.Bool(enabled)})
			cancel()
			if err != nil {
				return changed, fmt.Errorf("set event source mapping %s enabled=%t: %w", aws.ToString(m.UUID), enabled, err)
			}
			changed = append(changed, aws.ToString(m.UUID))
		}
		if out.NextMarker == nil {
			return changed, nil
		}
		in.Marker = out.NextMarker
	}
}
