//go:build leasehold_demo

package main

import (
	"github.com/leasehold/leasehold"
	"github.com/leasehold/leasehold/examples"
)

// registerKinds registers the example kinds (greet, sleep, flaky, upper).
// Only a build with the leasehold_demo tag has them: the Runtime Interface
// Emulator test and a demo deployment (docs/operations.md).
func registerKinds(h *leasehold.Handlers) { examples.Register(h) }
