//go:build !leasehold_demo

package main

import "github.com/leasehold/leasehold"

// registerKinds registers the task kinds this worker runs. Add yours here
// with leasehold.Handle, for example:
//
//	leasehold.Handle(h, "resize", resize)
//
// The deployed worker serves nothing else: the example kinds are compiled in
// only with the leasehold_demo build tag (kinds_demo.go).
func registerKinds(h *leasehold.Handlers) {}
