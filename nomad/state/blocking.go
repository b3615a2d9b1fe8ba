package state

import (
	"context"
	"errors"

	"github.com/hashicorp/go-memdb"
)

// QueryFunc runs one pass of a blocking query on snap. It adds to ws the
// watch channels of everything it reads (every read method takes ws) and
// returns the index of its result, usually snap.Index of the tables read.
// It may run several times; each run must overwrite the previous result.
type QueryFunc func(ws memdb.WatchSet, snap *StateSnapshot) (index uint64, err error)

// BlockingQuery runs run on a fresh snapshot of s until its index exceeds
// minIndex, waiting between runs for a write to something run read. It
// returns the index of the last run:
//
//   - at once when minIndex is 0 or the first run is already newer;
//   - after a later run that is newer than minIndex;
//   - when ctx's deadline passes (the query's max wait): with the last
//     run's result and a nil error, as an HTTP blocking query does;
//   - when ctx is cancelled otherwise: with ctx.Err();
//   - when s is abandoned by a restore: after one last run, since s will
//     never change again. Callers that can, use BlockingQueryFunc with the
//     FSM's current store instead, so the query carries on in the new one.
//
// A run error is returned at once.
func (s *StateStore) BlockingQuery(ctx context.Context, minIndex uint64, run QueryFunc) (uint64, error) {
	return BlockingQueryFunc(ctx, func() *StateStore { return s }, minIndex, run)
}

// BlockingQueryFunc is BlockingQuery on whatever store current returns at
// each pass (e.g. FSM.State), so a query that is waiting when a snapshot
// restore swaps the store re-runs on the new one.
func BlockingQueryFunc(ctx context.Context, current func() *StateStore, minIndex uint64, run QueryFunc) (uint64, error) {
	for {
		store := current()
		snap, err := store.Snapshot()
		if err != nil {
			return 0, err
		}
		ws := memdb.NewWatchSet()
		ws.Add(store.AbandonCh())
		index, err := run(ws, snap)
		if err != nil || minIndex == 0 || index > minIndex {
			return index, err
		}
		if current() == store && isClosed(store.AbandonCh()) {
			return index, nil // abandoned and nothing replaced it: never changes again
		}
		if err := ws.WatchCtx(ctx); err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				return index, nil
			}
			return index, err
		}
	}
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
