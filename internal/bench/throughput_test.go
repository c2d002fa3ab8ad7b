package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/leasehold/leasehold/internal/awstest"
	"github.com/leasehold/leasehold/internal/token"
)

// consumer processes one received batch and says which messages to delete.
type consumer struct {
	name    string
	process func(ctx context.Context, msgs []sqstypes.Message) []sqstypes.Message
}

// throughput runs each consumer over n messages, in rounds of ten (send ten,
// receive, process, delete: the backlog stays bounded), in the orders A B C,
// B C A, C A B, and returns each consumer's tasks/s per order.
func (h *harness) throughput(t *testing.T, n int, cs []consumer) map[string][]float64 {
	out := map[string][]float64{}
	for rot := range len(cs) {
		for i := range cs {
			c := cs[(rot+i)%len(cs)]
			start := time.Now()
			for done := 0; done < n; done += 10 {
				ids := make([]string, min(10, n-done))
				for j := range ids {
					ids[j] = nextID("tp-" + c.name)
				}
				h.sendInline("echo", 1)(ids)
				h.consume(t, len(ids), c)
			}
			out[c.name] = append(out[c.name], float64(n)/time.Since(start).Seconds())
		}
	}
	return out
}

// consume receives and processes until want messages were deleted.
func (h *harness) consume(t *testing.T, want int, c consumer) {
	deadline := time.Now().Add(awstest.Scale(60 * time.Second))
	for acked := 0; acked < want; {
		if time.Now().After(deadline) {
			t.Fatalf("%s: %d of %d messages acknowledged", c.name, acked, want)
		}
		n, _ := h.poll(c.process)
		acked += n
	}
}

// consumers are the three compared: a bare SQS consumer (receive, delete),
// a naive idempotent one (a conditional PutItem and an UpdateItem per
// message, ten at once) and leasehold's worker.
func (h *harness) consumers(t *testing.T, ddb *dynamodb.Client, table string) []consumer {
	bare := consumer{name: "bare SQS", process: func(_ context.Context, msgs []sqstypes.Message) []sqstypes.Message { return msgs }}
	naive := consumer{name: "naive idempotent", process: func(ctx context.Context, msgs []sqstypes.Message) []sqstypes.Message {
		var wg sync.WaitGroup
		ok := make([]bool, len(msgs))
		for i, m := range msgs {
			wg.Go(func() {
				tok, err := token.Decode(aws.ToString(m.Body))
				if err != nil {
					return
				}
				key := map[string]ddbtypes.AttributeValue{"id": &ddbtypes.AttributeValueMemberS{Value: "naive-" + tok.ID}}
				item := map[string]ddbtypes.AttributeValue{"id": key["id"], "status": &ddbtypes.AttributeValueMemberS{Value: "RUNNING"}}
				if _, err := ddb.PutItem(ctx, &dynamodb.PutItemInput{TableName: &table, Item: item, ConditionExpression: aws.String("attribute_not_exists(id)")}); err != nil {
					return
				}
				if _, err := ddb.UpdateItem(ctx, &dynamodb.UpdateItemInput{
					TableName: &table, Key: key, UpdateExpression: aws.String("SET #s = :d"),
					ExpressionAttributeNames:  map[string]string{"#s": "status"},
					ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":d": &ddbtypes.AttributeValueMemberS{Value: "SUCCEEDED"}},
				}); err != nil {
					return
				}
				ok[i] = true
			})
		}
		wg.Wait()
		var del []sqstypes.Message
		for i, m := range msgs {
			if ok[i] {
				del = append(del, m)
			}
		}
		return del
	}}
	lh := consumer{name: "leasehold", process: h.viaWorker(h.plain, t.Errorf)}
	return []consumer{bare, naive, lh}
}

// renderThroughput reports tasks/s and the ratio to the bare consumer of the
// same order, min and median.
func renderThroughput(n int, rates map[string][]float64, names []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\nThroughput on the local stack, %d tasks per run, one poller, rounds of ten; runs interleaved A B C, B C A, C A B:\n\n| consumer | tasks/s (min, median) | ratio to bare SQS (min, median) |\n|---|---|---|\n", n)
	bare := rates[names[0]]
	for _, name := range names {
		rs := rates[name]
		ratios := make([]float64, len(rs))
		for i := range rs {
			ratios[i] = rs[i] / bare[i]
		}
		fmt.Fprintf(&b, "| %s | %.0f, %.0f | %.2f, %.2f |\n", name, slices.Min(rs), median(rs), slices.Min(ratios), median(ratios))
	}
	b.WriteString("\nThe emulators serialise requests (moto behind a serialising front, shared with other users of the stack), so the ratios say how many calls each consumer makes per task, and how much index upkeep moto does per write, more than how AWS would scale; a run that stalls behind other traffic shows in the minimum, hence the median.\n")
	return b.String()
}

func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
