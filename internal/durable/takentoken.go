package durable

import (
	"context"

	"github.com/leasehold/leasehold/internal/token"
)

// TakenCallbackToken returns the callback token the handler running with
// ctx took with CallbackTokenOf, and false when it took none (or ctx is
// not a handler's). Unlike CallbackTokenOf it never draws a token, so
// calling it after the handler returned does not change what the
// attempt's AwaitCallbackError does. Package leaseholdtest reads it to
// record the tokens its handlers handed out.
func TakenCallbackToken(ctx context.Context) (string, bool) {
	w, ok := ctx.Value(workflowKey{}).(*Workflow)
	if !ok {
		return "", false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.nonce == "" {
		return "", false
	}
	return token.Callback{ID: w.held.TaskID, Fence: w.held.Fence, Attempt: w.held.Attempt, Nonce: w.nonce}.String(), true
}
