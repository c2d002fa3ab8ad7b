package replay

import (
	"context"
	"errors"
	"fmt"

	"github.com/leasehold/leasehold/internal/claimcheck"
	"github.com/leasehold/leasehold/settings"
)

// A history whose payload or steps are in the payload bucket keeps the
// references, as the task's item does, and carries the values they stand
// for in History.Blobs: the export reads them (one GET each, nothing
// written), and the replay answers the handler's reads from them, so the
// file replays the same anywhere, without the bucket or credentials.

// Resolve reads into h.Blobs every value in the payload bucket that h's
// payload and steps refer to (children's results inside their recorded
// outcomes included), through c: read-only, one Get per value not held
// yet. Without a bucket (c nil or without Blobs) it reads nothing and
// leaves the references for the replay to report.
func (h *History) Resolve(ctx context.Context, c *claimcheck.Checker) error {
	if !c.Enabled() {
		return nil
	}
	refs := claimcheck.RefsIn(h.Payload)
	for _, st := range h.Steps {
		refs = append(refs, claimcheck.RefsIn(st.Result)...)
		refs = append(refs, claimcheck.RefsIn(st.Bytes)...)
	}
	for _, ref := range refs {
		r, _ := claimcheck.ParseRef(ref)
		if _, held := h.Blobs[r.Key]; held {
			continue
		}
		v, err := c.Fetch(ctx, ref)
		if err != nil {
			return fmt.Errorf("history of %s: %w", h.ID, err)
		}
		if h.Blobs == nil {
			h.Blobs = map[string][]byte{}
		}
		h.Blobs[r.Key] = v
	}
	return nil
}

// errNoBlob is a reference whose value the history does not carry.
var errNoBlob = errors.New("the history holds no value for a reference to the payload bucket: export it with " +
	settings.EnvPayloadBucket + " set (leasehold replay), or from the Env that ran it (Env.History)")

// fileBlobs are a history's Blobs as a read-only claimcheck.Blobs.
type fileBlobs map[string][]byte

func (b fileBlobs) Get(_ context.Context, key string) ([]byte, error) {
	v, ok := b[key]
	if !ok {
		return nil, fmt.Errorf("%w (%s)", errNoBlob, key)
	}
	return v, nil
}

func (fileBlobs) Put(context.Context, string, []byte) error { return errWrites }
func (fileBlobs) Delete(context.Context, string) error      { return errWrites }
