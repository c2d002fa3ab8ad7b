package awstest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/leasehold/leasehold/internal/awstest"
)

// TestStackConditionalWritesAreAtomic races conditional writes on one item
// against the stack's DynamoDB endpoint and requires exactly one winner per
// race. Every "exactly one wins" test of the suite (claims, sweeps) rests on
// this: moto on its own lets two racers win about once in 150 races; the
// stack's front (localstack/moto_dynamodb.py) applies DynamoDB requests one
// at a time, as DynamoDB serialises the writes to an item.
//
// LEASEHOLD_RACE_TRIALS sets the number of races (default 1000).
func TestStackConditionalWritesAreAtomic(t *testing.T) {
	t.Parallel()
	trials := 1000
	if v := os.Getenv("LEASEHOLD_RACE_TRIALS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("LEASEHOLD_RACE_TRIALS=%q: want a positive integer", v)
		}
		trials = n
	}
	const racers = 8

	cfg := awstest.Config(t)
	// The SDK's retries stay on: under load an HTTP exchange now and then
	// fails after the emulator applied the write, and the SDK sends it
	// again. The condition therefore also accepts the racer's own earlier
	// write, so a retried win is still one win, and a racer that lost
	// stays lost; two racers can only both succeed if both writes landed.
	client := dynamodb.NewFromConfig(cfg)
	table := awstest.NewTable(t, cfg)

	type outcome struct {
		won bool
		err error
	}
	for trial := range trials {
		id := fmt.Sprintf("race-%d", trial)
		var (
			start sync.WaitGroup
			done  sync.WaitGroup
		)
		start.Add(1)
		results := make([]outcome, racers)
		for r := range racers {
			done.Go(func() {
				start.Wait()
				ctx, cancel := callCtxFrom(t)
				defer cancel()
				_, err := client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
					TableName:                 aws.String(table),
					Key:                       map[string]ddbtypes.AttributeValue{"id": &ddbtypes.AttributeValueMemberS{Value: id}},
					ConditionExpression:       aws.String("attribute_not_exists(winner) OR winner = :me"),
					UpdateExpression:          aws.String("SET winner = :me"),
					ExpressionAttributeValues: map[string]ddbtypes.AttributeValue{":me": &ddbtypes.AttributeValueMemberN{Value: strconv.Itoa(r)}},
				})
				var lost *ddbtypes.ConditionalCheckFailedException
				switch {
				case err == nil:
					results[r] = outcome{won: true}
				case errors.As(err, &lost):
				default:
					results[r] = outcome{err: err}
				}
			})
		}
		start.Done()
		done.Wait()

		var winners []int
		for r, o := range results {
			if o.err != nil {
				t.Fatalf("race %d: racer %d: %v", trial, r, o.err)
			}
			if o.won {
				winners = append(winners, r)
			}
		}
		if len(winners) != 1 {
			t.Fatalf("race %d of %d: %d winners %v, want exactly 1: the stack's DynamoDB does not apply conditional writes atomically", trial, trials, len(winners), winners)
		}
	}
	t.Logf("%d races of %d conditional writes each: exactly one winner every time", trials, racers)
}

// callCtxFrom bounds one call by callTimeout; safe from any goroutine.
func callCtxFrom(t *testing.T) (context.Context, context.CancelFunc) {
	return context.WithTimeout(t.Context(), callTimeout)
}
