package lifecycle

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/leasehold/leasehold/internal/durable"
	"github.com/leasehold/leasehold/internal/lease"
	"github.com/leasehold/leasehold/internal/lease/mapstate"
	"github.com/leasehold/leasehold/internal/metadata"
	"github.com/leasehold/leasehold/internal/token"
)

// A sliding map (docs/workflows.md, "Sliding"), the worker's side: the
// parent's run writes the items its handler produced, raises the groups,
// starts the children of idle slots and waits for its wake id; a child
// that ends counts itself in its group and starts the next child of its
// slot, or wakes the parent. The parent's handler side is durable.MapOf.

// mapGroupsLife is how long a sliding map's groups and pages are kept
// (the table's TTL): longer than any map runs.
const mapGroupsLife = 400 * 24 * time.Hour

// MapGroups reads a sliding map's groups for the running handler
// (durable.Attempt).
func (x *execution) MapGroups(ctx context.Context, ids []string) ([]mapstate.Group, error) {
	ms := x.cfg.caps.maps
	if ms == nil {
		return nil, fmt.Errorf("%w: the store keeps no sliding maps", lease.ErrInvalid)
	}
	out := make([]mapstate.Group, 0, len(ids))
	for _, id := range ids {
		cctx, cancel := context.WithTimeout(ctx, x.cfg.CallTimeout)
		g, err := ms.GetGroup(cctx, id)
		cancel()
		if err != nil {
			return out, err
		}
		out = append(out, g)
	}
	return out, nil
}

// slideSpawn does what a sliding map's parent asked (ac.Slide) and
// suspends it until a child wakes it, or, when the run stopped at its
// budget (slidework.go), until its own wake brings it back at once.
func (x *execution) slideSpawn(ctx context.Context, ac *durable.AwaitChildrenError) State {
	s, ms := ac.Slide, x.cfg.caps.maps
	if ms == nil {
		return x.failClaimed(ctx, "workflow.Map: the store keeps no sliding maps")
	}
	expires := x.cfg.Clock.Now().Add(mapGroupsLife)
	wake, err := x.slideWrite(ctx, ms, s, expires)
	if err != nil {
		return x.retryOrFail(ctx, fmt.Sprintf("workflow.Map %q: %v", s.Name, err), x.cfg.Backoff(x.task.Attempt), OutcomeRetried)
	}
	until := x.cfg.Clock.Now().Add(MaxWaitTimeout)
	x.flow.wait = &lease.Wait{Mode: lease.WaitChildren, For: []string{wake}, Until: until, Note: durable.SlideNote(s.Name, s.Shape)}
	return StateAwaitingChildren
}

// slideWrite writes s's pages, then creates or raises the groups (and
// stops them), then starts each idle slot's next child and unparks it;
// if every group is then done, it tells the parent's wake id itself, so
// that its suspension wakes it at once. Each write is idempotent: a run
// that stops half-way is done again by the next. Past the run's budget
// (slideBudget) it stops at the next page or start: the groups are raised
// to the pages written, and the parent's wake id (that of the items
// produced so far, which it returns) told, so that the next run goes on.
// Each page is read at most once per run, and not at all when this run
// wrote it.
func (x *execution) slideWrite(ctx context.Context, ms mapstate.Store, s *durable.Slide, expires time.Time) (string, error) {
	parent := x.task.ID
	maxAttempts := x.cfg.DefaultMaxAttempts
	over := x.cfg.Clock.Now().Add(x.slideBudget())
	steps, cut := 0, false
	spent := func() bool { return steps > 0 && !x.cfg.Clock.Now().Before(over) }
	pages := map[int][][]byte{}
	produced := s.Produced
	var page [][]byte
	for i, c := range s.Items {
		b, err := json.Marshal(durable.MapItem{Kind: c.Kind, Payload: c.Payload, MaxAttempts: cmp.Or(c.MaxAttempts, maxAttempts), Queue: cmp.Or(c.Queue, x.task.Queue)})
		if err != nil {
			return "", fmt.Errorf("item %d: %w", s.From+i, err)
		}
		page = append(page, b)
		if idx := s.From + i; len(page) == mapstate.PageItems || i == len(s.Items)-1 {
			p := idx / mapstate.PageItems
			if spent() {
				// The items before this page are produced; the next run
				// produces the rest again.
				produced, cut = p*mapstate.PageItems, true
				break
			}
			err := x.slideTry(func(cctx context.Context) error {
				return ms.PutPage(cctx, mapstate.PageID(parent, s.Name, p), page, expires)
			})
			if err != nil {
				return "", fmt.Errorf("items to %d: %w", idx, err)
			}
			pages[p], page = page, nil
			steps++
		}
	}
	wake := durable.WakeID(parent, s.Name, produced)
	done := true
	for gi := range mapstate.Groups(s.C) {
		id := mapstate.GroupID(parent, s.Name, gi)
		g, err := x.slideGroup(s, gi, id, produced, expires)
		if err != nil {
			return "", err
		}
		for _, slot := range g.Idle {
			next := g.Next(slot)
			if g.Stopped != "" || next >= g.N || next >= g.Produced {
				continue
			}
			if cut = cut || spent(); cut {
				break
			}
			if err := x.slideStart(ctx, ms, parent, s.Name, s.C, next, x.carry(x.task.Metadata), pages); err != nil {
				return "", err
			}
			steps++
			seq := g.Seq[slot-g.First]
			err := x.slideTry(func(cctx context.Context) error {
				got, err := ms.Unpark(cctx, id, slot, seq)
				if err == nil || errors.Is(err, mapstate.ErrCounted) && got.ID != "" {
					g = got
				}
				if errors.Is(err, mapstate.ErrCounted) {
					err = nil
				}
				return err
			})
			if err != nil {
				return "", fmt.Errorf("unpark slot %d: %w", slot, err)
			}
		}
		done = done && g.Done()
	}
	if cut {
		x.log.info("sliding map: the run's bookkeeping budget is spent; it suspends and goes on at once", "map", s.Name, "steps", steps, "produced", produced)
	}
	if done || cut {
		// Nothing runs any more (the parent's next run sums the map), or
		// the run stopped at its budget (its next run goes on).
		return wake, x.slideWake(parent, wake)
	}
	return wake, nil
}

// slideGroup creates group gi of s (every slot idle) or raises it to
// produced, stops it if s says so, and returns it as written.
func (x *execution) slideGroup(s *durable.Slide, gi int, id string, produced int, expires time.Time) (mapstate.Group, error) {
	ms := x.cfg.caps.maps
	var g mapstate.Group
	err := x.slideTry(func(cctx context.Context) error {
		var err error
		if s.Create {
			g = mapstate.NewGroup(id, s.Shape, s.N, s.C, gi, produced, expires)
			g.Min, g.Tolerate = s.Min, s.Tolerate
			for j := range g.Seq {
				if g.First+j < s.N {
					g.Idle = append(g.Idle, g.First+j)
				}
			}
			g, err = ms.CreateGroup(cctx, g)
			if errors.Is(err, lease.ErrAlreadyExists) {
				err = nil
			}
		}
		if err == nil && g.Produced < produced {
			g, err = ms.Raise(cctx, id, produced)
		}
		if err == nil && s.Stop != "" && g.Stopped == "" {
			g, err = ms.Stop(cctx, id, s.Stop)
		}
		return err
	})
	if err != nil {
		return g, fmt.Errorf("group %d: %w", gi, err)
	}
	return g, nil
}

// slideStart sends the token of child index of the map name of parent,
// its item read from its page (from pages when it holds it, which it
// then gets: a parent's run reads each page once): its worker creates and
// claims it in one write. md is the metadata it gets (with the map's
// slots).
func (x *execution) slideStart(ctx context.Context, ms mapstate.Store, parent, name string, c, index int, md map[string]string, pages map[int][][]byte) error {
	p := index / mapstate.PageItems
	items, ok := pages[p]
	if !ok {
		err := x.slideTry(func(cctx context.Context) error {
			var err error
			items, err = ms.GetPage(cctx, mapstate.PageID(parent, name, p))
			return err
		})
		if err != nil {
			return fmt.Errorf("the page of child %d: %w", index, err)
		}
		if pages != nil {
			pages[p] = items
		}
	}
	k := index % mapstate.PageItems
	if k >= len(items) {
		return fmt.Errorf("the page of child %d: %w: it holds %d items", index, lease.ErrBackend, len(items))
	}
	var it durable.MapItem
	if err := json.Unmarshal(items[k], &it); err != nil {
		return fmt.Errorf("the item of child %d: %w", index, err)
	}
	md = maps.Clone(md)
	if md == nil {
		md = map[string]string{}
	}
	md[metadata.MapSlots] = strconv.Itoa(c)
	body, err := token.Token{ID: durable.ChildIDIn(parent, name, index), Kind: it.Kind, Payload: it.Payload, MaxAttempts: it.MaxAttempts,
		Queue: it.Queue, Parent: parent, Metadata: md}.Encode()
	if err != nil {
		return fmt.Errorf("child %d: %w", index, err)
	}
	return x.slideTry(func(context.Context) error {
		if err := x.sendTo(ctx, it.Queue, body, 0); err != nil {
			return &slideSendError{err: err}
		}
		return nil
	})
}

// slideWake tells the waiting parent of a sliding map its wake id, and
// wakes it if that was what it waited for. A parent that runs (it reads
// the groups before it waits again), or that ended, needs nothing. One
// that heard it already is woken again if its wait is over: the
// notification that told it may be this one's own, landed with its answer
// lost (the SDK's retry then meets it), and then no wake was sent; a
// second wake of a parent already woken is claimed by nobody.
func (x *execution) slideWake(parent, wake string) error {
	var got lease.Task
	err := x.slideTry(func(cctx context.Context) error {
		var err error
		got, err = x.cfg.Store.Notify(cctx, lease.Waiter{ID: parent, Mode: lease.WaitChildren}, lease.Task{ID: wake, Status: lease.StatusSucceeded})
		return err
	})
	var fin *lease.FinishedError
	switch {
	case err == nil, errors.Is(err, lease.ErrNotified):
	case errors.As(err, &fin), errors.Is(err, lease.ErrNotFound), errors.Is(err, lease.ErrNotWaiting):
		return nil
	default:
		return fmt.Errorf("wake map parent %s: %w", parent, err)
	}
	if lease.Complete(got) {
		return x.wake(x.detached, got)
	}
	return nil
}

// mapChild reports whether t is a child of a sliding map (its metadata
// names the map's slots) and, if so, its map's name, its index and the
// map's slots.
func mapChild(t lease.Task) (name string, index, c int, ok bool) {
	v, has := t.Metadata[metadata.MapSlots]
	if !has || t.Parent == "" {
		return "", 0, 0, false
	}
	c, err := strconv.Atoi(v)
	if err != nil || c < 1 || c > mapstate.MaxSlots {
		return "", 0, 0, false
	}
	name = durable.AwaitNameOf(t.Parent, t.ID)
	rest, found := strings.CutPrefix(t.ID, t.Parent+"/"+name+"/")
	index, err = strconv.Atoi(rest)
	if name == "" || !found || err != nil || index < 0 {
		return "", 0, 0, false
	}
	return name, index, c, true
}

// slideEnded counts t, an ended child of a sliding map, in its group and
// starts the next child of its slot first: the group is read, the next
// child's token sent (while the map runs and its item is produced), then
// the end counted, so that a crash between the two sends again and a
// delivery after the count finds the child counted and does nothing. It
// wakes the parent when the slot waits for items, when the map stops, when
// its group is done, and when the items produced run low.
func (x *execution) slideEnded(ctx context.Context, t lease.Task, name string, index, c int) error {
	ms := x.cfg.caps.maps
	if ms == nil {
		return nil
	}
	gid := mapstate.GroupID(t.Parent, name, (index%c)/mapstate.SlotsPerGroup)
	cctx, cancel := x.call()
	g, err := ms.GetGroup(cctx, gid)
	cancel()
	switch {
	case errors.Is(err, lease.ErrNotFound):
		return nil // the map's groups expired
	case err != nil:
		return fmt.Errorf("read map group of child %d: %w", index, err)
	}
	slot, rank := index%c, index/c
	next := index + c
	if j := slot - g.First; j < 0 || j >= len(g.Seq) || g.C != c {
		return nil // not this map's child (its metadata was changed)
	} else if g.Seq[j] > rank {
		// Counted already, by an earlier delivery of this end whose
		// stop or wake may have failed after the count (the message
		// came back for it): what the group makes due is done again.
		return x.slideCounted(ctx, ms, g, t.Parent, name, slot, next, false)
	} else if g.Seq[j] < rank {
		// The slot's child before it has not been counted yet (its end
		// started this one before counting itself): this message comes
		// back to count after it.
		return fmt.Errorf("map child %d ended before its slot's previous child was counted", index)
	}
	started := next >= g.N
	if !started && g.Stopped == "" && next < g.Produced {
		if err := x.slideStart(ctx, ms, t.Parent, name, c, next, t.Metadata, nil); err != nil {
			return err
		}
		started = true
	}
	r := mapstate.ReportOf(gid, index, c, t.Status == lease.StatusSucceeded, started)
	cctx, cancel = x.call()
	g, err = ms.Report(cctx, r)
	cancel()
	switch {
	case errors.Is(err, mapstate.ErrCounted):
		// Counted meanwhile: by another delivery of this end, or by this
		// very write, landed with its answer lost (the SDK's retry met
		// it). Either may not have stopped or woken anything yet.
		cctx, cancel = x.call()
		g, err = ms.GetGroup(cctx, gid)
		cancel()
		if err != nil {
			return fmt.Errorf("read map group of child %d: %w", index, err)
		}
		return x.slideCounted(ctx, ms, g, t.Parent, name, slot, next, false)
	case err != nil:
		return fmt.Errorf("count map child %d: %w", index, err)
	}
	return x.slideCounted(ctx, ms, g, t.Parent, name, slot, next, r.OK)
}

// slideCounted stops the map and wakes its parent as g, the group of
// slot with a child's end counted, makes due; next is that child's
// slot's next child and ok whether it succeeded (false when not known:
// the other groups are read to decide). It is idempotent: a later
// delivery of the same end calls it again with the group as it then
// stands, and a wake more than needed costs the parent one run.
func (x *execution) slideCounted(ctx context.Context, ms mapstate.Store, g mapstate.Group, parent, name string, slot, next int, ok bool) error {
	// Idle (the parent starts its next child), or done, or stopped by
	// this end: the parent is told.
	wake := g.IsIdle(slot) || g.Done()
	if stop := x.slideDecide(ctx, ms, g, ok); stop != "" && g.Stopped == "" {
		cctx, cancel := x.call()
		stopped, err := ms.Stop(cctx, g.ID, stop)
		cancel()
		if err != nil {
			return fmt.Errorf("stop map %q: %w", name, err)
		}
		g, wake = stopped, true
	}
	// The items run low: the child whose next child is exactly Ahead
	// short of the items produced wakes the parent to produce more.
	wake = wake || (g.Produced < g.N && next == g.Produced-mapstate.Ahead(g.C))
	if wake {
		return x.slideWake(parent, durable.WakeID(parent, name, g.Produced))
	}
	return nil
}

// slideDecide is why the map must stop after g's report ("" to go on): its
// own counts decide when the map has one group; with more, a failure (or a
// success of a map with MinSuccessful) reads the others.
func (x *execution) slideDecide(ctx context.Context, ms mapstate.Store, g mapstate.Group, ok bool) string {
	groups := mapstate.Groups(g.C)
	if groups == 1 || (ok && g.Min == 0) {
		return g.Decide(g.OK, g.Failed)
	}
	sumOK, sumFailed := g.OK, g.Failed
	gi := g.First / mapstate.SlotsPerGroup
	prefix := strings.TrimSuffix(g.ID, "g"+strconv.Itoa(gi))
	for other := range groups {
		if other == gi {
			continue
		}
		cctx, cancel := x.call()
		o, err := ms.GetGroup(cctx, prefix+"g"+strconv.Itoa(other))
		cancel()
		if err != nil {
			continue // decided by the groups read; the parent sums them all
		}
		sumOK, sumFailed = sumOK+o.OK, sumFailed+o.Failed
	}
	return g.Decide(sumOK, sumFailed)
}
