package workflow

import (
	"context"
	"fmt"

	"github.com/leasehold/leasehold"
)

// ChildFailedError is the error of an Invoke whose child did not succeed
// (it FAILED, was CANCELLED, or its record EXPIRED): it names the child
// and carries its end. Invoke returns it as a permanent failure
// (leasehold.Fail): the child's end is recorded, and a retry of the
// parent would find the same one. A handler that can carry on (a
// compensation, a fallback) matches it with errors.As.
type ChildFailedError struct {
	// Name is the Invoke's name; ID the child's task id.
	Name, ID string
	// Status is how the child ended, and Reason its error.
	Status leasehold.Status
	Reason string
}

func (e *ChildFailedError) Error() string {
	return fmt.Sprintf("invoke %q: child %s ended %s: %s", e.Name, e.ID, e.Status, e.Reason)
}

// Invoke runs child as a task of its own, a child of the handler's task,
// and returns its result decoded into T once it has ended: today's child
// task (All with one child), typed. Until the child ends, Invoke returns
// an error the handler must return: the task waits, holding no lease,
// and its handler runs again when the child ends; the child's outcome is
// recorded as the step "children:"+name, so every later run replays it.
//
//	label, err := workflow.Invoke[Label](ctx, "label", workflow.Child{Kind: "print-label", Payload: order})
//	if err != nil {
//		return nil, err // waiting, or *ChildFailedError
//	}
//
// The child gets the id ChildIDIn(parent, name, 0), runs on its own
// attempts (Child.MaxAttempts) and queue, and is cancelled with its
// parent (Client.Cancel of the parent cancels every child not ended). A
// child that does not succeed is a *ChildFailedError, returned with
// leasehold.Fail. The wait lasts at most the worker's WaitTimeout, as
// All's; name follows All's rules. Inside a branch or child context the
// child's id holds the space's path ("PARENT/@a~NAME/0" in the space
// "a"), so the same name in two spaces makes two children.
func Invoke[T any](ctx context.Context, name string, child Child) (T, error) {
	return InvokeAsync[T](ctx, name, child).Get(ctx)
}
