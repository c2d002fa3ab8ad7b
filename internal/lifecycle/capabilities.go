package lifecycle

import (
	"context"
	"time"

	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/limiter"
	"github.com/leasehold/leasehold/internal/lease/mapstate"
	"github.com/leasehold/leasehold/internal/lease/query"
)

// capabilities are the optional interfaces of Config.Store, found once, by
// type assertion, when the Config is built (withDefaults), so that no use
// site asserts the store again. A nil field is a capability the store
// lacks; each use site says what it does without it.
type capabilities struct {
	// rates keeps rate windows (Config.RateLimits; required with them).
	rates limiter.RateLimiter
	// slots keeps slot sets (Config.KindConcurrency; required with it).
	slots limiter.SlotLimiter
	// many reads many tasks in one call (readTasks; else one Get each).
	many query.ManyGetter
	// lister writes batch listing entries (listBatch; else none).
	lister query.Lister
	// cancels requests a cancel (cancelFlagged, childCanceller; else a
	// flagged task waits for its next claim and a running child runs on).
	cancels canceller
	// marker moves a dependent's sweep entry (checkRegistrations; else the
	// entry stays where the sweep put it).
	marker dispatchMarker
	// runs archives a workflow's ended run (continueAsNew; else a
	// continue-as-new fails its task, saying why).
	runs runArchiver
	// maps keeps sliding maps' groups and pages (workflow.Map; without
	// it a map fails its parent).
	maps mapstate.Store
	// beats records callback heartbeats (a heartbeat message; without it
	// one is rejected, and a wait with a heartbeat timeout fails its
	// attempt at once).
	beats beater
}

// capabilitiesOf finds the optional interfaces of store.
func capabilitiesOf(store lease.Store) capabilities {
	var c capabilities
	c.rates, _ = store.(limiter.RateLimiter)
	c.slots, _ = store.(limiter.SlotLimiter)
	c.many, _ = store.(query.ManyGetter)
	c.lister, _ = store.(query.Lister)
	c.cancels, _ = store.(canceller)
	c.marker, _ = store.(dispatchMarker)
	c.runs, _ = store.(runArchiver)
	c.maps, _ = store.(mapstate.Store)
	c.beats, _ = store.(beater)
	return c
}

// canceller is the store's cancel (query.Admin's), which the lifecycle's
// lease.Store does not declare: both stores have it.
type canceller interface {
	RequestCancel(ctx context.Context, id string) (lease.Task, error)
}

// beater is a store's heartbeat of a callback wait (rules.BeatLands): one
// conditional write that moves the wait's heartbeat deadline. Both stores
// have it (the conformance suite's CallbackHeartbeat).
type beater interface {
	BeatCallback(ctx context.Context, e lease.WaitEnd) (lease.Task, error)
}

// dispatchMarker is the part of query.Admin a registration check needs.
type dispatchMarker interface {
	MarkDispatched(ctx context.Context, id string, seen, next time.Time) (string, error)
}

// runArchiver is a store that keeps a workflow's ended runs
// (continue-as-new): ArchiveRun writes run, the task as its run ended
// (its Run, steps, payload and history), as a task of its own under
// lease.RunID(run.ID, run.Run): SUCCEEDED, with no lease, sweep entry or
// listing entry of its own, expiring with the retention (rules.ArchivedRun).
// It may be written again under the same or a later fence of l (a retried
// continue overwrites it whole); under an earlier fence it is left as it
// is. l is the lease of the task, checked by the Release that follows, not
// here. Both stores have it (the conformance suite's ContinueAsNew).
type runArchiver interface {
	ArchiveRun(ctx context.Context, l lease.Lease, run lease.Task) (string, error)
}
