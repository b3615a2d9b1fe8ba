package leader

import (
	"context"
	"time"

	"github.com/berth-io/berth/nomad/scheduler"
	"github.com/berth-io/berth/nomad/state"
	"github.com/berth-io/berth/nomad/structs"
)

// runDrainer moves allocs off draining nodes and ends drains, on the
// leader. Node.UpdateDrain sets the drain (with evals for the jobs on the
// node); the schedulers then refuse the node and migrate per
// scheduler.MigrateOnDrain. The drainer covers what happens later:
//
//	live alloc that must move now, and no pending eval of its job ──► eval (node-drain)
//	batch/system allocs waiting for the deadline                  ──► wake at the deadline
//	nothing left to move (scheduler.DrainComplete)                 ──► drain cleared via Raft;
//	                                                                   the node stays ineligible
//
// It re-reads nodes, allocs and evals whenever one of them changes (an
// eval that ends without moving an alloc wakes it too), so it never waits
// on a stale decision.
func (s *server) runDrainer(ctx context.Context, sc *Term) {
	logger := s.logger.Named("drainer")
	var (
		index    uint64
		deadline time.Time
	)
	for attempt := 0; ; {
		wctx, cancel := ctx, context.CancelFunc(func() {})
		if !deadline.IsZero() {
			wctx, cancel = context.WithDeadline(ctx, deadline)
		}
		idx, err := s.waitForTables(wctx, index, state.TableNodes, state.TableAllocs, state.TableEvals)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			deadline, err = s.drainOnce(time.Now())
		}
		if err != nil {
			logger.Warn("draining failed; retrying", "error", err)
			if !retryWait(ctx, attempt) {
				return
			}
			attempt++
			continue
		}
		attempt, index = 0, max(idx, 1)
	}
}

// drainOnce acts on every draining node and returns the earliest drain
// deadline still ahead (zero when none).
func (s *server) drainOnce(now time.Time) (time.Time, error) {
	snap, err := s.config.State().Snapshot()
	if err != nil {
		return time.Time{}, err
	}
	iter, err := snap.DrainingNodes(nil)
	if err != nil {
		return time.Time{}, err
	}
	var (
		next  time.Time
		done  []string
		evals []*structs.Evaluation
		seen  = map[jobKey]bool{}
	)
	for raw := iter.Next(); raw != nil; raw = iter.Next() {
		node := raw.(*structs.Node)
		if node.DrainStrategy == nil {
			continue
		}
		allocs, err := snap.AllocsByNode(nil, node.ID)
		if err != nil {
			return time.Time{}, err
		}
		step := drainStepFor(node.DrainStrategy, allocs, now)
		if step.complete {
			done = append(done, node.ID)
			continue
		}
		if !step.next.IsZero() && (next.IsZero() || step.next.Before(next)) {
			next = step.next
		}
		for _, a := range step.move {
			key := jobKey{a.Namespace, a.JobID}
			if seen[key] {
				continue
			}
			seen[key] = true
			pending, err := hasPendingEval(snap, key)
			if err != nil {
				return time.Time{}, err
			}
			if pending {
				continue // it will see the drain
			}
			job := a.Job
			if stored, err := snap.JobByID(nil, a.Namespace, a.JobID); err != nil {
				return time.Time{}, err
			} else if stored != nil {
				job = stored
			}
			evals = append(evals, newJobEval(job, node.ID, structs.EvalTriggerNodeDrain, now.UnixNano()))
		}
	}
	if len(evals) > 0 {
		if _, err := s.raftApply(structs.EvalUpdateRequestType, &structs.EvalUpdateRequest{Evals: evals, Timestamp: now.UnixNano()}); err != nil {
			return time.Time{}, err
		}
	}
	for _, id := range done {
		req := &structs.NodeUpdateDrainRequest{NodeID: id, Timestamp: now.UnixNano()}
		if _, err := s.raftApply(structs.NodeUpdateDrainRequestType, req); err != nil {
			return time.Time{}, err
		}
		s.logger.Named("drainer").Info("node drain complete", "node_id", id)
	}
	return next, nil
}

// drainStep is what to do for one draining node now.
type drainStep struct {
	// complete: nothing is left to move; clear the drain.
	complete bool
	// move holds one live alloc per job that must move now.
	move []*structs.Allocation
	// next is when allocs that may stay for now are forced off (zero when
	// none waits for a deadline).
	next time.Time
}

// drainStepFor decides the drain step of a node holding allocs. Pure.
func drainStepFor(d *structs.DrainStrategy, allocs []*structs.Allocation, now time.Time) drainStep {
	if scheduler.DrainComplete(d, allocs) {
		return drainStep{complete: true}
	}
	var step drainStep
	left := scheduler.NonSystemLeft(allocs)
	for _, a := range allocs {
		if a.TerminalStatus() {
			continue
		}
		if scheduler.MigrateOnDrain(d, scheduler.AllocJobType(a), left, now) {
			step.move = append(step.move, a)
			continue
		}
		if at, ok := scheduler.DrainDeadline(d); ok && at > now.UnixNano() {
			step.next = time.Unix(0, at)
		}
	}
	return step
}

func hasPendingEval(snap *state.StateSnapshot, key jobKey) (bool, error) {
	evals, err := snap.EvalsByJob(nil, key.ns, key.id)
	if err != nil {
		return false, err
	}
	for _, e := range evals {
		if e.Status == structs.EvalStatusPending {
			return true, nil
		}
	}
	return false, nil
}
