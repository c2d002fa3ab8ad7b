package lifecycle

import "github.com/leasehold/leasehold/internal/lease/inbox"

// Inbox is the store's inbox side for the running handler
// (durable.Inboxer): workflow.Receive and SetEvent.
func (x *execution) Inbox() inbox.Store { return x.cfg.caps.inbox }
