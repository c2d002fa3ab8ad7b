// Package wiring holds what the root package leasehold and the test kit
// leaseholdtest must share to build the same client and the same worker:
// the configuration types (WorkerConfig, ClientConfig), the handler
// registry (Handlers) and the middleware types, which the root re-exports
// as type aliases, and the one function that turns a WorkerConfig into the
// executor's lifecycle.Config (LifecycleConfig).
//
// It replaces the init-time hooks the test kit once reached the root
// through (issue 34): defining these types here, below both importers,
// lets leaseholdtest look a registered handler up, set a client's
// in-memory backend and build a worker's executor with ordinary calls,
// while the root's public surface stays as it was. Nothing here is public
// API: the names users see are the root's aliases.
package wiring
