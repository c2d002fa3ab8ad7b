package leasehold_test

import (
	"context"
	"fmt"
	"sort"

	"github.com/leasehold/leasehold"
)

type Resize struct {
	URL   string `json:"url"`
	Width int    `json:"width"`
}

type Thumbnail struct {
	URL string `json:"url"`
}

// Register a typed handler per task kind. The payload arrives decoded from
// JSON; the result is stored as JSON.
func ExampleHandle() {
	handlers := leasehold.NewHandlers()
	leasehold.Handle(handlers, "resize", func(ctx context.Context, t *leasehold.Task[Resize]) (Thumbnail, error) {
		if t.Payload.Width <= 0 {
			return Thumbnail{}, leasehold.Fail(fmt.Errorf("width must be positive, got %d", t.Payload.Width))
		}
		// Guard downstream writes with t.Fence so a worker that lost its
		// lease cannot overwrite newer work.
		return Thumbnail{URL: fmt.Sprintf("%s?w=%d&fence=%d", t.Payload.URL, t.Payload.Width, t.Fence)}, nil
	})
	kinds := handlers.Kinds()
	sort.Strings(kinds)
	fmt.Println(kinds)
	// Output: [resize]
}
