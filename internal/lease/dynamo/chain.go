package dynamo

import (
	"encoding/json"
	"fmt"

	"github.com/leasehold/leasehold/internal/lease"
)

// encodeThen is the stored form of Task.Then: a JSON array.
func encodeThen(then []lease.Link) string {
	if len(then) == 0 {
		return ""
	}
	b, err := json.Marshal(then)
	if err != nil { // CheckThen let in only valid JSON payloads
		panic(fmt.Sprintf("lease: encode chain links: %v", err))
	}
	return string(b)
}

func decodeThen(s string) ([]lease.Link, error) {
	if s == "" {
		return nil, nil
	}
	var then []lease.Link
	if err := json.Unmarshal([]byte(s), &then); err != nil {
		return nil, fmt.Errorf("chain links: %w", err)
	}
	return then, nil
}
