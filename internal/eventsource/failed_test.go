package eventsource

import (
	"errors"
	"reflect"
	"testing"

	"github.com/aws/aws-lambda-go/events"
)

func TestFailedMessages(t *testing.T) {
	t.Parallel()
	ev := events.SQSEvent{Records: []events.SQSMessage{{MessageId: "a"}, {MessageId: "b"}, {MessageId: "c"}}}
	failures := func(ids ...string) events.SQSEventResponse {
		var r events.SQSEventResponse
		for _, id := range ids {
			r.BatchItemFailures = append(r.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: id})
		}
		return r
	}
	tests := []struct {
		name    string
		resp    events.SQSEventResponse
		want    map[string]bool
		wantErr bool
	}{
		{name: "none", resp: failures(), want: map[string]bool{}},
		{name: "some", resp: failures("a", "c"), want: map[string]bool{"a": true, "c": true}},
		{name: "repeated", resp: failures("b", "b"), want: map[string]bool{"b": true}},
		{name: "all", resp: failures("a", "b", "c"), want: map[string]bool{"a": true, "b": true, "c": true}},
		{name: "unknown id", resp: failures("a", "zzz"), wantErr: true},
		{name: "empty id", resp: failures(""), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := failedMessages(ev, tt.resp)
			if tt.wantErr {
				if !errors.Is(err, errInvalidBatchItemFailure) {
					t.Fatalf("error = %v, want errInvalidBatchItemFailure", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("failed = %v, want %v", got, tt.want)
			}
		})
	}
}
