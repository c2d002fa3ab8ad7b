// Package schedule starts tasks on a schedule: EventBridge Scheduler's
// rate(...) and cron(...) expressions, the inline token each slot sends to
// the work queue, and a firer that sends those tokens itself where there is
// no EventBridge (`leasehold run` on a local stack).
//
// # The id rule
//
// The task a slot starts is named by the schedule and the slot's time,
// sched:NAME:2026-12-03T10:15:00Z (TaskID). On AWS the schedule's target
// Input is the inline token with the id sched:NAME:<aws.scheduler.scheduled-time>,
// which EventBridge Scheduler fills in for every slot (Spec.Input); the
// firer sends the same bytes (Spec.Body). A slot delivered twice, by a
// retry, by two runners or by both EventBridge and a runner, therefore names
// one task, and the worker's conditional create runs it once.
//
// # Catch-up
//
// A slot found more than a tolerance (a minute) after its time was missed:
// the runner was stopped or stalled. The policy (CatchUp) fires none of the
// missed slots, only the latest (the default), or all of them up to a limit,
// never one older than its maximum age (an hour by default). Spec.Due makes
// the decision; it is a pure function of the previous decision's time and
// now, so it is tested with a fake clock. A restarted runner looks back one
// maximum age: slots that already ran are sent again and start nothing.
package schedule
