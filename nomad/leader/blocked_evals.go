package leader

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/berth-io/berth/helper"
	"github.com/berth-io/berth/nomad/state"
	"github.com/berth-io/berth/nomad/structs"
)

// blockedEvals tracks the blocked evals of one leadership term — evals
// whose placements did not fit — at most one per job, and decides when to
// retry them: when capacity may have grown since their scheduler read
// the state.
//
//	feeder sees a blocked eval ──► Track ──► capacity grew since its snapshot? ──yes──► unblock
//	                                              │ no
//	                                              ▼
//	           CapacityChanged(index) ──► every tracked eval planned before index ──► unblock
//
// Unblocking writes, in one Raft entry, the blocked eval as canceled and
// a new pending eval (TriggeredBy queued-allocs, PreviousEval the blocked
// one), which the feeder hands to the broker. A second blocked eval for a
// job cancels the older one.
//
// What counts as "capacity may have grown" is decided by the watchers
// (watchCapacity for allocs, volumes and plugins; watchNodes for nodes):
// a node that became schedulable or changed its fingerprint, an alloc
// that stopped, a volume registered or a claim freed, a plugin's health
// changed. Placements alone never unblock anything.
//
// A scheduler's snapshot index is known only for evals its worker
// created in this term (Hint); any other blocked eval (a previous
// leader's) counts as planned at index 0, so the first capacity signal —
// the watchers send one when the term starts — retries it. That costs one
// extra eval per blocked job per failover, and never misses a change.
type blockedEvals struct {
	// mu guards every field below.
	mu       sync.Mutex
	byJob    map[jobKey]*blockedEntry
	hints    map[string]uint64 // eval ID → index its scheduler planned at
	capacity uint64            // last index at which capacity may have grown
	unblock  []*structs.Evaluation
	cancel   []*structs.Evaluation // older blocked evals of a job
	notify   chan struct{}         // cap 1: work for the unblocker
}

type blockedEntry struct {
	eval      *structs.Evaluation
	snapIndex uint64
}

func newBlockedEvals() *blockedEvals {
	return &blockedEvals{
		byJob:  map[jobKey]*blockedEntry{},
		hints:  map[string]uint64{},
		notify: make(chan struct{}, 1),
	}
}

// Hint records the state index the scheduler of blocked eval evalID
// planned at. Call it before writing the eval.
func (b *blockedEvals) Hint(evalID string, snapIndex uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.hints[evalID] = snapIndex
}

// DropHint forgets a hint whose eval was never written.
func (b *blockedEvals) DropHint(evalID string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.hints, evalID)
}

// Track starts tracking a blocked eval.
func (b *blockedEvals) Track(e *structs.Evaluation) {
	b.mu.Lock()
	defer b.mu.Unlock()
	key := evalJob(e)
	snap := b.hints[e.ID]
	delete(b.hints, e.ID)
	if cur := b.byJob[key]; cur != nil {
		if cur.eval.ID == e.ID {
			return
		}
		if cur.eval.CreateIndex > e.CreateIndex {
			b.cancel = append(b.cancel, e)
			b.signalLocked()
			return
		}
		b.cancel = append(b.cancel, cur.eval)
	}
	b.byJob[key] = &blockedEntry{eval: e, snapIndex: snap}
	if b.capacity > snap {
		b.unblockLocked(key)
	}
	b.signalLocked()
}

// Untrack stops tracking e (it is no longer blocked).
func (b *blockedEvals) Untrack(e *structs.Evaluation) {
	b.mu.Lock()
	defer b.mu.Unlock()
	key := evalJob(e)
	if cur := b.byJob[key]; cur != nil && cur.eval.ID == e.ID {
		delete(b.byJob, key)
	}
}

// CapacityChanged says capacity may have grown at index: every tracked
// eval planned before it is retried.
func (b *blockedEvals) CapacityChanged(index uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.capacity = max(b.capacity, index)
	for key, entry := range b.byJob {
		if entry.snapIndex < index {
			b.unblockLocked(key)
		}
	}
	b.signalLocked()
}

func (b *blockedEvals) unblockLocked(key jobKey) {
	b.unblock = append(b.unblock, b.byJob[key].eval)
	delete(b.byJob, key)
}

func (b *blockedEvals) signalLocked() {
	if len(b.unblock) == 0 && len(b.cancel) == 0 {
		return
	}
	select {
	case b.notify <- struct{}{}:
	default:
	}
}

// take returns and clears the evals to unblock and to cancel.
func (b *blockedEvals) take() (unblock, cancel []*structs.Evaluation) {
	b.mu.Lock()
	defer b.mu.Unlock()
	unblock, cancel = b.unblock, b.cancel
	b.unblock, b.cancel = nil, nil
	return unblock, cancel
}

// Len is the number of tracked evals.
func (b *blockedEvals) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.byJob)
}

// unblockEvals writes the tracker's decisions through Raft.
func (s *server) unblockEvals(ctx context.Context, sc *Term) {
	logger := s.logger.Named("blocked_evals")
	for {
		select {
		case <-ctx.Done():
			return
		case <-sc.blocked.notify:
		}
		unblock, cancel := sc.blocked.take()
		for attempt := 0; ; attempt++ {
			err := s.writeUnblock(unblock, cancel)
			if err == nil {
				break
			}
			logger.Warn("unblocking evals failed; retrying", "error", err)
			if !retryWait(ctx, attempt) {
				return
			}
		}
	}
}

// writeUnblock cancels each blocked eval of unblock that is still blocked
// and creates its pending successor, and cancels each eval of cancel, in
// one Raft entry.
func (s *server) writeUnblock(unblock, cancel []*structs.Evaluation) error {
	snap, err := s.config.State().Snapshot()
	if err != nil {
		return err
	}
	now := time.Now().UnixNano()
	var evals []*structs.Evaluation
	stillBlocked := func(id string) (*structs.Evaluation, error) {
		e, err := snap.EvalByID(nil, id)
		if err != nil || e == nil || e.Status != structs.EvalStatusBlocked {
			return nil, err
		}
		return e, nil
	}
	for _, b := range unblock {
		cur, err := stillBlocked(b.ID)
		if err != nil {
			return err
		}
		if cur == nil {
			continue
		}
		next := &structs.Evaluation{
			ID:             helper.UUID(),
			Namespace:      cur.Namespace,
			Priority:       cur.Priority,
			Type:           cur.Type,
			TriggeredBy:    structs.EvalTriggerQueuedAllocs,
			JobID:          cur.JobID,
			JobModifyIndex: cur.JobModifyIndex,
			Status:         structs.EvalStatusPending,
			PreviousEval:   cur.ID,
			CreateTime:     now,
			ModifyTime:     now,
		}
		old := cur.Copy()
		old.Status = structs.EvalStatusCancelled
		old.StatusDescription = fmt.Sprintf("unblocked: capacity changed; retried by eval %s", helper.ShortID(next.ID))
		old.NextEval = next.ID
		old.ModifyTime = now
		evals = append(evals, old, next)
	}
	for _, c := range cancel {
		cur, err := stillBlocked(c.ID)
		if err != nil {
			return err
		}
		if cur == nil {
			continue
		}
		old := cur.Copy()
		old.Status = structs.EvalStatusCancelled
		old.StatusDescription = "replaced by a newer blocked eval of the job"
		old.ModifyTime = now
		evals = append(evals, old)
	}
	if len(evals) == 0 {
		return nil
	}
	_, err = s.raftApply(structs.EvalUpdateRequestType, &structs.EvalUpdateRequest{Evals: evals, Timestamp: now})
	return err
}

// watchCapacity tells the tracker when allocs, volumes or plugins change
// in a way that may let blocked evals place (readCapacity).
//
// Its baseline is the view Run read before any worker started
// (Term.readStart), not its own first read, which may come late: a
// placement committed in between would otherwise count as capacity and
// retry a blocked eval that this term's scheduler had just written.
// The term's start itself counts as a capacity change for evals planned
// before it, so a previous leader's blocked evals are retried once.
func (s *server) watchCapacity(ctx context.Context, sc *Term) {
	logger := s.logger.Named("capacity_watcher")
	prev := sc.startCapacity
	if prev != nil {
		sc.blocked.CapacityChanged(prev.index())
	}
	var index uint64
	for attempt := 0; ; {
		idx, err := s.waitForTables(ctx, index, state.TableAllocs, state.TableCSIVolumes, state.TableCSIPlugins)
		if ctx.Err() != nil {
			return
		}
		var cur *capacityView
		if err == nil {
			cur, err = s.capacityPass(sc, prev)
		}
		if err != nil {
			logger.Warn("reading state failed; retrying", "error", err)
			if !retryWait(ctx, attempt) {
				return
			}
			attempt++
			continue
		}
		attempt, index, prev = 0, max(idx, 1), cur
	}
}

// capacityPass reads the capacity view and, when capacity grew since prev
// (or prev is nil), tells the tracker at which index.
func (s *server) capacityPass(sc *Term, prev *capacityView) (*capacityView, error) {
	cur, grewAt, err := readCapacity(s.config.State(), prev)
	if err != nil {
		return nil, err
	}
	if grewAt > 0 {
		sc.blocked.CapacityChanged(grewAt)
	}
	return cur, nil
}

// capacityView is what watchCapacity remembers between passes: the table
// indexes and the snapshot they were read from.
type capacityView struct {
	allocs, volumes, plugins uint64 // table indexes
	snap                     *state.StateSnapshot
}

// volumeKey names a volume across namespaces.
type volumeKey struct{ ns, id string }

func (v *capacityView) index() uint64 { return max(v.allocs, v.volumes, v.plugins) }

// readCapacity reads the current view and the index at which capacity
// last grew since prev (0 when it did not). Only what changed since prev
// is compared: volumes whose ModifyIndex passed prev's volumes index (read
// through the store's ModifyIndex index, not by a scan of every volume),
// each against its version in prev's snapshot (a register of N volumes
// would otherwise cost N² over the N writes). When allocs changed it scans them
// for ones stopped since prev: linear in the allocs table, once per
// allocs write (a ModifyIndex index in the store would make it cheaper).
//
// The index is that of the growth itself — the plugins table's, a grown
// volume's, a stopped alloc's — not the latest index of the three tables:
// a pass that runs late must not date a plugin change after placements
// committed since, or it would retry blocked evals planned after the
// change. On the first pass (prev nil) nothing is known, so the view's
// index counts.
func readCapacity(store *state.StateStore, prev *capacityView) (*capacityView, uint64, error) {
	snap, err := store.Snapshot()
	if err != nil {
		return nil, 0, err
	}
	cur := &capacityView{snap: snap}
	for _, t := range []struct {
		table string
		out   *uint64
	}{{state.TableAllocs, &cur.allocs}, {state.TableCSIVolumes, &cur.volumes}, {state.TableCSIPlugins, &cur.plugins}} {
		if *t.out, err = snap.Index(t.table); err != nil {
			return nil, 0, err
		}
	}
	if prev == nil {
		return cur, cur.index(), nil
	}
	var grewAt uint64
	if cur.plugins > prev.plugins {
		grewAt = cur.plugins
	}
	if cur.volumes > prev.volumes {
		// Only the volumes written since prev: reading the whole table
		// after every volume write cost the leader O(volumes) per write.
		iter, err := snap.CSIVolumesModifiedSince(nil, prev.volumes)
		if err != nil {
			return nil, 0, err
		}
		for raw := iter.Next(); raw != nil; raw = iter.Next() {
			v := raw.(*structs.CSIVolume)
			if v.ModifyIndex <= prev.volumes || v.ModifyIndex <= grewAt {
				continue
			}
			old, err := prev.snap.CSIVolumeByID(nil, v.Namespace, v.ID)
			if err != nil {
				return nil, 0, err
			}
			if volumeGrew(old, v) || freedSince(v, prev.volumes) {
				grewAt = v.ModifyIndex
			}
		}
	}
	if cur.allocs > prev.allocs {
		iter, err := snap.Allocs(nil)
		if err != nil {
			return nil, 0, err
		}
		for raw := iter.Next(); raw != nil; raw = iter.Next() {
			a := raw.(*structs.Allocation)
			if a.ModifyIndex > prev.allocs && a.TerminalStatus() {
				grewAt = max(grewAt, a.ModifyIndex)
			}
		}
	}
	return cur, grewAt, nil
}

// freedSince reports whether a claim of v was freed after index. Comparing
// the live claims of two versions misses a claim made and freed between
// them: a reservation the plan committed and a release freed before this
// watcher's next pass (TestScheduling_SingleWriterVolumeRace, about 1 in
// 100 runs with debug logging: the losing job's eval, blocked on that
// reservation, was never retried).
func freedSince(v *structs.CSIVolume, index uint64) bool {
	for _, c := range slices.Backward(v.PastClaims) { // newest last
		if h := c.History; len(h) > 0 && h[len(h)-1].To == structs.CSIClaimFreed {
			if h[len(h)-1].Index > index {
				return true
			}
			return false
		}
	}
	return false
}

// volumeGrew reports whether volume cur offers more than its previous
// version p (nil when it is new): it appeared, became ready, changed what
// it offers, or lost a claim. Stored volumes are immutable, so the same
// pointer means an unchanged volume.
func volumeGrew(p, cur *structs.CSIVolume) bool {
	switch {
	case p == nil:
		return true
	case p == cur:
		return false
	case p.State != cur.State,
		!reflect.DeepEqual(p.RequestedCapabilities, cur.RequestedCapabilities),
		!reflect.DeepEqual(p.Topologies, cur.Topologies):
		return true
	}
	for allocID := range p.Claims {
		if cur.Claims[allocID] == nil {
			return true // freed
		}
	}
	return false
}
