//go:build !leasehold_demo

package main

import (
	"testing"

	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/examples"
)

// The worker built without the leasehold_demo tag, as sam build builds it,
// serves none of the example kinds.
func TestDefaultBuildServesNoExampleKinds(t *testing.T) {
	h := leasehold.NewHandlers()
	registerKinds(h)
	demo := leasehold.NewHandlers()
	examples.Register(demo)
	if len(demo.Kinds()) == 0 {
		t.Fatal("examples.Register registered no kinds: this test would prove nothing")
	}
	for _, k := range h.Kinds() {
		for _, d := range demo.Kinds() {
			if k == d {
				t.Errorf("the default worker serves the example kind %q", k)
			}
		}
	}
}
