package dynamo

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/rules"
)

// AbandonWait implements lease.Store: one write, conditional on the task waiting
// under a.Fence for something other than a callback, stamped with a call
// id so that the SDK's retry after a lost answer recognises its own write.
func (s *Store) AbandonWait(ctx context.Context, a lease.WaitAbandon) (lease.Task, error) {
	if err := a.Validate(); err != nil {
		return lease.Task{}, fmt.Errorf("abandon wait %s: %w", a.ID, err)
	}
	now := s.now()
	values := withCall(map[string]types.AttributeValue{
		":waiting":       avS(string(lease.StatusWaiting)),
		":callback_wait": avS(string(lease.WaitCallback)),
		":fence":         avN(a.Fence),
		":status":        avS(string(a.Status)),
		":reason":        avS(lease.Truncate(a.Error, lease.MaxErrorBytes)),
		":now":           avMillis(now),
	})
	upd := "SET #status = :status, #error = :reason, #finished_at = :now, #updated_at = :now, #last_call = :call" + s.listFailed(a.ID, a.Status, values)
	if s.opts.Retention > 0 {
		upd += ", #expires_at = :expires_at"
		values[":expires_at"] = avN(now.Add(s.opts.Retention).Unix())
	}
	upd += " REMOVE #sweep_shard, #sweep_at, #wait_until, #callback, #callback_step"
	return s.updateOld(ctx, "abandon wait", a.ID,
		"#status = :waiting AND #wait <> :callback_wait AND #fence = :fence", upd, values,
		func(old *lease.Task) error { return rules.ClassifyAbandon(a, old) })
}
