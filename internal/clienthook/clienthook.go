// Package clienthook lets package leaseholdtest build a leasehold.Client on
// its in-memory store and queues, without a public constructor for it. The
// root package sets New in an init function; nothing else may set it.
package clienthook

import "github.com/jonboulle/clockwork"

// New returns a *leasehold.Client (typed any: this package cannot import
// its importer) on store, a lease store with List (the in-memory one), and
// q, an SQS client with the calls a leasehold.Client makes; queueURL is its
// default work queue.
var New func(store, q any, queueURL string, clock clockwork.Clock) any
