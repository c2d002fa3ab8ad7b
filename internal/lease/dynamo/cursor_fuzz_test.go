package dynamo

import (
	"errors"
	"reflect"
	"testing"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/query"
)

// FuzzDecodeDynamoCursor feeds the store's list cursor decoder arbitrary
// strings: it never panics, refuses with ErrBadCursor whatever it cannot
// use, and what it accepts names the status asked for, known shards and
// valid ids only, and survives a round trip.
func FuzzDecodeDynamoCursor(f *testing.F) {
	seeds := []dynamoCursor{
		{Status: lease.StatusPending, After: map[string]listPos{"00": {CreatedAt: 1, ID: "a"}}},
		{Status: lease.StatusFailed, After: map[string]listPos{"15": {CreatedAt: 1 << 40, ID: "b c"}}, Done: []string{"01", "02"}},
		{Status: lease.StatusRunning, Done: []string{"07"}},
	}
	for _, c := range seeds {
		s, err := c.encode()
		if err != nil {
			f.Fatal(err)
		}
		f.Add(s, string(c.Status))
	}
	f.Add("", "PENDING")
	f.Add("e30", "PENDING") // {}
	f.Add("!!", "RUNNING")
	f.Fuzz(func(t *testing.T, s, status string) {
		st := lease.Status(status)
		c, err := decodeDynamoCursor(s, st, query.ListBy{})
		if err != nil {
			if !errors.Is(err, query.ErrBadCursor) {
				t.Fatalf("decode(%q) = %v, want ErrBadCursor", s, err)
			}
			return
		}
		if c.Status != st || len(c.After)+len(c.Done) == 0 {
			t.Fatalf("decode(%q, %s) accepted %+v", s, st, c)
		}
		shards := map[string]bool{}
		for _, sh := range lease.Shards() {
			shards[sh] = true
		}
		for sh, p := range c.After {
			if !shards[sh] || lease.CheckID(p.ID) != nil {
				t.Fatalf("decode(%q) accepted shard %q at id %q", s, sh, p.ID)
			}
		}
		for _, sh := range c.Done {
			if !shards[sh] {
				t.Fatalf("decode(%q) accepted done shard %q", s, sh)
			}
		}
		enc, err := c.encode()
		if err != nil {
			t.Fatalf("encode %+v: %v", c, err)
		}
		again, err := decodeDynamoCursor(enc, st, query.ListBy{})
		if err != nil || !reflect.DeepEqual(again, c) {
			t.Fatalf("round trip of %+v: %+v, %v", c, again, err)
		}
	})
}
