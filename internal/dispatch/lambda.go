package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/aws/aws-lambda-go/events"
)

// ErrUnknownEvent: Handle was invoked with an event that is neither an SQS
// batch nor a scheduled event.
var ErrUnknownEvent = errors.New("unknown event")

// eventProbe reads just enough of an invocation's event to route it.
type eventProbe struct {
	Records []struct {
		EventSource string `json:"eventSource"`
	} `json:"Records"`
	Source     string `json:"source"`
	DetailType string `json:"detail-type"`
}

// Event sources and detail types Handle recognises.
const (
	sqsEventSource     = "aws:sqs"
	scheduledEventType = "Scheduled Event"
)

// Handle is the dispatch function's Lambda handler. It routes by the shape
// of the event: an SQS batch from the intake queue goes to HandleIntake and
// answers with an events.SQSEventResponse; an EventBridge scheduled event
// runs Sweep at the current time and answers with its SweepStats.
func (d *Dispatcher) Handle(ctx context.Context, raw json.RawMessage) (any, error) {
	var probe eventProbe
	if err := json.Unmarshal(raw, &probe); err != nil {
		return nil, fmt.Errorf("%w: not a JSON object", ErrUnknownEvent)
	}
	switch {
	case len(probe.Records) > 0:
		for _, r := range probe.Records {
			if r.EventSource != sqsEventSource {
				return nil, fmt.Errorf("%w: a record from %q; only SQS batches are handled", ErrUnknownEvent, r.EventSource)
			}
		}
		var ev events.SQSEvent
		if err := json.Unmarshal(raw, &ev); err != nil {
			return nil, fmt.Errorf("%w: SQS event does not decode: %w", ErrUnknownEvent, err)
		}
		return d.HandleIntake(ctx, ev)
	case probe.DetailType == scheduledEventType:
		return d.Sweep(ctx, d.cfg.Clock.Now())
	}
	return nil, fmt.Errorf("%w: neither an SQS batch nor a scheduled event (source %q, detail-type %q)", ErrUnknownEvent, probe.Source, probe.DetailType)
}
