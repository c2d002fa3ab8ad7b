package awstest

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/leasehold/leasehold/internal/lease/dynamo"
	"github.com/leasehold/leasehold/internal/lease/limiter"
)

// RateWindows reads every rate window item of table (consistent reads):
// its id and its count of starts.
func RateWindows(t testing.TB, client *dynamodb.Client, table string) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), Scale(30*time.Second))
	defer cancel()
	out := map[string]int{}
	p := dynamodb.NewScanPaginator(client, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatalf("scan %s: %v", table, err)
		}
		for _, item := range page.Items {
			id, _ := item[dynamo.AttrID].(*types.AttributeValueMemberS)
			if id == nil || !limiter.IsRateWindowID(id.Value) {
				continue
			}
			n, _ := item[limiter.AttrStarts].(*types.AttributeValueMemberN)
			if n == nil {
				t.Fatalf("rate window %q has no count", id.Value)
			}
			starts, err := strconv.Atoi(n.Value)
			if err != nil {
				t.Fatal(err)
			}
			out[id.Value] = starts
		}
	}
	return out
}
