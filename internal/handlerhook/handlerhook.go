// Package handlerhook lets package leaseholdtest run a handler registered
// with leasehold.Handle through the very adapter the worker calls (payload
// decoding, result encoding), without a public method on leasehold.Handlers
// for it. The root package sets Lookup in an init function; nothing else
// may set it.
package handlerhook

import "github.com/leasehold/leasehold/internal/lifecycle"

// Lookup returns the adapted handler registered for kind in handlers, a
// *leasehold.Handlers (typed any: this package cannot import its importer).
var Lookup func(handlers any, kind string) (lifecycle.Handler, bool)
