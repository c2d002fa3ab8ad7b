package leaseholdtest

import "time"

// TakeSlot takes a concurrency slot of kind for holder until until, as an
// attempt on another worker would: for the tests of KindConcurrency.
func (e *Env) TakeSlot(kind, holder string, limit int, until time.Time) (bool, error) {
	return e.store.AcquireSlot(e.ctx, kind, holder, limit, until)
}

// Start is the fake clock's time when an Env is new.
var Start = start

// BlobCalls is how many calls the Env's in-memory payload bucket took.
func (e *Env) BlobCalls() int64 { return e.blobs.Calls() }

// StoredPayload and StoredResult are the task's payload and result as its
// item holds them: a reference when they are in the payload bucket.
func (e *Env) StoredPayload(id string) ([]byte, []byte, error) {
	t, err := e.store.Get(e.ctx, id)
	return t.Payload, t.Result, err
}

// StoredSteps are the task's step results as its item holds them: a
// reference when they are in the payload bucket.
func (e *Env) StoredSteps(id string) ([][]byte, error) {
	t, err := e.store.Get(e.ctx, id)
	var out [][]byte
	for _, st := range t.Steps {
		out = append(out, st.Result)
	}
	return out, err
}

// DuplicateSends makes every token sent from now on for a task that dup
// accepts arrive twice, as SQS's at-least-once delivery may.
func (e *Env) DuplicateSends(dup func(id string) bool) {
	e.queue.mu.Lock()
	defer e.queue.mu.Unlock()
	e.queue.duplicate = dup
}

// ManyReads counts the batched reads (GetMany) the Env's store has made,
// and the most ids one of them took.
func (e *Env) ManyReads() (calls, mostIDs int) {
	c := e.store.Calls()
	return c.ManyReads, c.ManyMostIDs
}

// WriteCalls counts the writes the Env's store has made.
func (e *Env) WriteCalls() int { return e.store.Calls().Writes }

// TrackSends makes the Env remember the task id of every token sent from
// now on (SentTaskID).
func (e *Env) TrackSends() {
	e.queue.mu.Lock()
	defer e.queue.mu.Unlock()
	e.queue.sent = map[string]bool{}
}

// SentTaskID reports whether a token naming task id was sent since
// TrackSends.
func (e *Env) SentTaskID(id string) bool {
	e.queue.mu.Lock()
	defer e.queue.mu.Unlock()
	return e.queue.sent[id]
}

// ExpireTask removes the finished task id, as the table's TTL does once
// its retention has passed, and reports whether it did.
func (e *Env) ExpireTask(id string) bool { return e.store.Expire(id) }

// ReplayNotifies makes every notification of a waiter that replay accepts
// land twice, the caller seeing only the second answer: a response lost
// and the SDK's retry answered (ErrNotified).
func (e *Env) ReplayNotifies(replay func(waiter string) bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.faults.replayNotify = replay
}

// FailNotifies makes the first notification of each ended id to a waiter
// that fail accepts land and answer with an error: a response lost and
// the SDK's retries given up (the caller's message comes back).
func (e *Env) FailNotifies(fail func(waiter string) bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.faults.failNotify = fail
}

// ReplayReports makes every count of a sliding map's child land twice,
// the caller seeing only the second answer (mapstate.ErrCounted).
func (e *Env) ReplayReports() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.faults.replayReport = true
}

// SlowMapCalls makes every sliding map's page, group raise or unpark call
// take d of the fake clock, and every failEvery-th of them fail with
// lease.ErrBackend before it lands (0: none).
func (e *Env) SlowMapCalls(d time.Duration, failEvery int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.faults.mapSlow, e.faults.mapFailEvery = d, failEvery
}

// MapCalls reports the sliding maps' page, raise and unpark calls so far,
// the page reads among them, and the most pages written and slots
// unparked by one run (between two suspensions).
func (e *Env) MapCalls() (calls, pageReads, mostSteps int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.faults.mapCalls, e.faults.pageReads, e.faults.mostSteps
}
