package leaseholdtest_test

import (
	"context"
	"fmt"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/leaseholdtest"
)

func ExampleRun() {
	thumbnail := func(_ context.Context, t *leasehold.Task[resize]) (string, error) {
		return fmt.Sprintf("%s?w=%d (attempt %d)", t.Payload.URL, t.Payload.Width, t.Attempt), nil
	}
	got, err := leaseholdtest.Run(context.Background(), thumbnail, leaseholdtest.Task[resize]{
		Attempt: 2,
		Payload: resize{URL: "s3://pics/cat.png", Width: 64},
	})
	fmt.Println(got, err)
	// Output: s3://pics/cat.png?w=64 (attempt 2) <nil>
}
