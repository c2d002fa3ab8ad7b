package lambdalog_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"github.com/aws/aws-lambda-go/lambdacontext"

	"github.com/leasehold/leasehold/internal/lambdalog"
)

func TestHandlerAddsRequestID(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := slog.New(lambdalog.Handler(slog.NewJSONHandler(&buf, nil))).With("component", "dispatch")
	ctx := lambdacontext.NewContext(context.Background(), &lambdacontext.LambdaContext{AwsRequestID: "req-1"})
	log.InfoContext(ctx, "in an invocation")
	log.InfoContext(context.Background(), "outside one")
	dec := json.NewDecoder(&buf)
	var in, out map[string]any
	if err := dec.Decode(&in); err != nil {
		t.Fatal(err)
	}
	if err := dec.Decode(&out); err != nil {
		t.Fatal(err)
	}
	if in["request_id"] != "req-1" || in["component"] != "dispatch" {
		t.Errorf("record in an invocation = %v", in)
	}
	if _, ok := out["request_id"]; ok {
		t.Errorf("record outside an invocation has a request id: %v", out)
	}
}
