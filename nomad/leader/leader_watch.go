package leader

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/go-memdb"

	"github.com/berth-io/berth/helper"
	"github.com/berth-io/berth/nomad/state"
	"github.com/berth-io/berth/nomad/structs"
)

// Leader loops watch state tables and react to changes. They all share
// one shape — wait for a table to change, take a fresh snapshot, decide
// in a pure function, write through Raft — and these helpers.

// waitForTables blocks until one of tables has a Raft index above
// minIndex, and returns the highest index of tables. With minIndex 0 it
// returns at once, so a loop passes max(index, 1) on later calls: a table
// never written has index 0. A deadline on ctx ends the wait without error (the
// caller re-reads and decides again); cancellation returns ctx.Err().
func (s *server) waitForTables(ctx context.Context, minIndex uint64, tables ...string) (uint64, error) {
	return state.BlockingQueryFunc(ctx, s.config.State, minIndex, func(ws memdb.WatchSet, snap *state.StateSnapshot) (uint64, error) {
		var index uint64
		for _, table := range tables {
			if err := watchTable(ws, snap, table); err != nil {
				return 0, err
			}
			i, err := snap.Index(table)
			if err != nil {
				return 0, err
			}
			index = max(index, i)
		}
		return index, nil
	})
}

// watchTable adds to ws a channel that closes on any write to table.
func watchTable(ws memdb.WatchSet, snap *state.StateSnapshot, table string) error {
	var err error
	switch table {
	case state.TableNodes:
		_, err = snap.Nodes(ws)
	case state.TableJobs:
		_, err = snap.Jobs(ws, structs.AllNamespaces)
	case state.TableAllocs:
		_, err = snap.Allocs(ws)
	case state.TableEvals:
		_, err = snap.Evals(ws, structs.AllNamespaces)
	case state.TableCSIVolumes:
		_, err = snap.CSIVolumes(ws, structs.AllNamespaces)
	case state.TableCSIPlugins:
		_, err = snap.CSIPlugins(ws)
	default:
		err = fmt.Errorf("watching table %q: unknown table", table)
	}
	return err
}

// snapshotMinIndex returns a snapshot of the state at index or later,
// waiting (up to RaftTimeout) for the FSM to get there.
func (s *server) snapshotMinIndex(ctx context.Context, index uint64) (*state.StateSnapshot, error) {
	if index > 0 {
		wctx, cancel := context.WithTimeout(ctx, s.config.RaftTimeout)
		defer cancel()
		_, err := s.waitForTables(wctx, index-1, state.TableNodes, state.TableJobs, state.TableAllocs,
			state.TableEvals, state.TableCSIVolumes, state.TableCSIPlugins)
		if err != nil {
			return nil, err
		}
	}
	snap, err := s.config.State().Snapshot()
	if err != nil {
		return nil, err
	}
	latest, err := snap.LatestIndex()
	if err != nil {
		return nil, err
	}
	if latest < index {
		return nil, structs.NewError(structs.CodeRetryable, "state is at index %d; timed out waiting for index %d", latest, index)
	}
	return snap, nil
}

// retryWait waits before retry attempt (0-based) of a failed leader
// write, or returns false when ctx ends first.
func retryWait(ctx context.Context, attempt int) bool {
	return helper.SleepCtx(ctx, helper.Backoff{Base: 50 * time.Millisecond, Max: 5 * time.Second}.Delay(attempt))
}

// LiveAllocJobEvals makes one pending eval per job with a live alloc on
// one of nodeIDs, jobs already purged included (their allocs still need
// stopping). Type and priority come from the job the alloc runs.
func LiveAllocJobEvals(snap *state.StateSnapshot, nodeIDs []string, trigger string, now int64) ([]*structs.Evaluation, error) {
	seen := map[jobKey]bool{}
	var evals []*structs.Evaluation
	for _, nodeID := range nodeIDs {
		allocs, err := snap.AllocsByNode(nil, nodeID)
		if err != nil {
			return nil, err
		}
		for _, a := range allocs {
			key := jobKey{a.Namespace, a.JobID}
			if a.TerminalStatus() || seen[key] || a.Job == nil {
				continue
			}
			seen[key] = true
			job := a.Job
			if stored, err := snap.JobByID(nil, a.Namespace, a.JobID); err != nil {
				return nil, err
			} else if stored != nil {
				job = stored
			}
			evals = append(evals, newJobEval(job, nodeID, trigger, now))
		}
	}
	return evals, nil
}

// newJobEval makes a pending evaluation of job; nodeID is set for
// evaluations caused by a node change.
func newJobEval(job *structs.Job, nodeID, trigger string, now int64) *structs.Evaluation {
	return structs.NewJobEval(helper.UUID(), job, nodeID, trigger, now)
}
