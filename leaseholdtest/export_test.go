package leaseholdtest

import "time"

// TakeSlot takes a concurrency slot of kind for holder until until, as an
// attempt on another worker would: for the tests of KindConcurrency.
func (e *Env) TakeSlot(kind, holder string, limit int, until time.Time) (bool, error) {
	return e.store.AcquireSlot(e.ctx, kind, holder, limit, until)
}

// Start is the fake clock's time when an Env is new.
var Start = start
