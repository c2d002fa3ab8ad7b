package awsenv_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/leasehold/leasehold/internal/awsenv"
	"github.com/leasehold/leasehold/internal/awsenv/racetest"
)

// TestAnswerSurvivesTheSDKClosingTheRequestBody replays, step by step, how
// the stack lost ReceiveMessage answers under load ("use of closed network
// connection" while reading the response body; the steps are in
// racetest's package comment). Unguarded the answer is lost; through
// awsenv.GuardHTTP it arrives.
func TestAnswerSurvivesTheSDKClosingTheRequestBody(t *testing.T) {
	for _, tc := range []struct {
		name  string
		guard bool
	}{{"unguarded", false}, {"guarded", true}} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := receiveThroughRace(t, tc.guard)
			switch {
			case tc.guard && err != nil:
				t.Fatalf("ReceiveMessage through awsenv.GuardHTTP: %v", err)
			case !tc.guard && err == nil:
				t.Fatal("the unguarded SDK client kept the answer: the SDK no longer loses it this way, and awsenv.GuardHTTP may be unneeded")
			case !tc.guard && !strings.Contains(err.Error(), "use of closed network connection"):
				t.Fatalf("unguarded: got %v, want the answer lost with 'use of closed network connection'", err)
			}
		})
	}
}

// receiveThroughRace makes one ReceiveMessage call (no SDK retries) against
// racetest's one-answer server.
func receiveThroughRace(t *testing.T, guard bool) (*sqs.ReceiveMessageOutput, error) {
	t.Helper()
	const body = `{"Messages":[{"MessageId":"m-1","ReceiptHandle":"r-1","Body":"hello","MD5OfBody":"5d41402abc4b2a76b9719d911017c592"}]}`
	cfg := racetest.Config(t, body)
	if guard {
		cfg.HTTPClient = awsenv.GuardHTTP(cfg.HTTPClient)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	out, err := sqs.NewFromConfig(cfg).ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(aws.ToString(cfg.BaseEndpoint) + "/000000000000/q")})
	if err == nil && (len(out.Messages) != 1 || aws.ToString(out.Messages[0].Body) != "hello") {
		t.Fatalf("ReceiveMessage answered %+v, want the one message", out.Messages)
	}
	return out, err
}

// GuardHTTP does not wrap a guarded client again, and Guarded tells the
// two apart.
func TestGuardHTTPWrapsOnce(t *testing.T) {
	t.Parallel()
	if awsenv.Guarded(nil) {
		t.Error("Guarded(nil) = true")
	}
	g := awsenv.GuardHTTP(nil)
	if !awsenv.Guarded(g) {
		t.Fatalf("GuardHTTP(nil) = %T, not guarded", g)
	}
	if again := awsenv.GuardHTTP(g); again != g {
		t.Errorf("GuardHTTP of a guarded client wrapped it again: %#v, want %#v", again, g)
	}
}
