package leader

import (
	"context"
	"time"

	"github.com/berth-io/berth/helper"
	"github.com/berth-io/berth/nomad/state"
	"github.com/berth-io/berth/nomad/structs"
)

// feedEvals is the only way evals enter the broker and the blocked-eval
// tracker. It watches the evals table and hands over every pending eval
// it has not handed over yet, and every blocked eval, whoever wrote it:
// an endpoint, a scheduler, a snapshot restore, or a previous leader. A
// new leader therefore picks up exactly the work its predecessor left.
//
// Per pass it diffs the table against what it handed over (feedDiff):
//
//	pending, not handed over ──► broker.Enqueue
//	blocked, not tracked     ──► blocked.Track
//	tracked, no longer blocked (or gone) ──► blocked.Untrack
//
// A pending eval stays "handed over" until the table shows it otherwise,
// so a pass that reads a snapshot older than a worker's update never
// enqueues the eval twice.
func (s *server) feedEvals(ctx context.Context, sc *Term) {
	logger := s.logger.Named("eval_feeder")
	f := newFeedState()
	var index uint64
	for attempt := 0; ; {
		idx, err := s.waitForTables(ctx, index, state.TableEvals)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			err = s.feedOnce(f, sc)
		}
		if err != nil {
			logger.Warn("reading evals failed; retrying", "error", err)
			if !retryWait(ctx, attempt) {
				return
			}
			attempt++
			continue
		}
		attempt, index = 0, max(idx, 1)
	}
}

func (s *server) feedOnce(f *feedState, sc *Term) error {
	snap, err := s.config.State().Snapshot()
	if err != nil {
		return err
	}
	iter, err := snap.Evals(nil, structs.AllNamespaces)
	if err != nil {
		return err
	}
	var evals []*structs.Evaluation
	for raw := iter.Next(); raw != nil; raw = iter.Next() {
		evals = append(evals, raw.(*structs.Evaluation))
	}
	d := f.diff(evals)
	for _, e := range d.enqueue {
		sc.broker.Enqueue(e)
	}
	for _, e := range d.track {
		sc.blocked.Track(e)
	}
	for _, e := range d.untrack {
		sc.blocked.Untrack(e)
	}
	return nil
}

// feedState is what the feeder handed over so far.
type feedState struct {
	enqueued map[string]bool                // pending evals given to the broker
	tracked  map[string]*structs.Evaluation // blocked evals given to the tracker
}

func newFeedState() *feedState {
	return &feedState{enqueued: map[string]bool{}, tracked: map[string]*structs.Evaluation{}}
}

type feedDiff struct {
	enqueue, track, untrack []*structs.Evaluation
}

// diff compares the whole evals table with what was handed over, records
// the new hand-overs, and returns them. Pure: no I/O.
func (f *feedState) diff(evals []*structs.Evaluation) feedDiff {
	var d feedDiff
	pending := make(map[string]bool, len(f.enqueued))
	blocked := make(map[string]bool, len(f.tracked))
	for _, e := range evals {
		switch e.Status {
		case structs.EvalStatusPending:
			pending[e.ID] = true
			if !f.enqueued[e.ID] {
				f.enqueued[e.ID] = true
				d.enqueue = append(d.enqueue, e)
			}
		case structs.EvalStatusBlocked:
			blocked[e.ID] = true
			if f.tracked[e.ID] == nil {
				f.tracked[e.ID] = e
				d.track = append(d.track, e)
			}
		}
	}
	for id := range f.enqueued {
		if !pending[id] {
			delete(f.enqueued, id)
		}
	}
	for id, e := range f.tracked {
		if !blocked[id] {
			delete(f.tracked, id)
			d.untrack = append(d.untrack, e)
		}
	}
	return d
}

// reapFailedEvals marks failed the evals the broker gave up on (nacked
// deliveryLimit times), and creates a follow-up eval for each that runs
// after FailedEvalFollowUpDelay, so the job is looked at again.
func (s *server) reapFailedEvals(ctx context.Context, sc *Term) {
	logger := s.logger.Named("eval_reaper")
	for {
		failed, err := sc.broker.WaitFailed(ctx)
		if err != nil {
			return
		}
		now := time.Now()
		var evals []*structs.Evaluation
		for _, e := range failed {
			followUp := &structs.Evaluation{
				ID:           helper.UUID(),
				Namespace:    e.Namespace,
				Priority:     e.Priority,
				Type:         e.Type,
				TriggeredBy:  structs.EvalTriggerFailedFollowUp,
				JobID:        e.JobID,
				Status:       structs.EvalStatusPending,
				WaitUntil:    now.Add(s.config.FailedEvalFollowUpDelay).UnixNano(),
				PreviousEval: e.ID,
				CreateTime:   now.UnixNano(),
				ModifyTime:   now.UnixNano(),
			}
			f := e.Copy()
			f.Status = structs.EvalStatusFailed
			f.StatusDescription = "scheduling failed too many times; a follow-up eval retries later"
			f.NextEval = followUp.ID
			f.ModifyTime = now.UnixNano()
			evals = append(evals, f, followUp)
			logger.Warn("eval failed after its delivery limit", "eval_id", e.ID, "job_id", e.JobID, "namespace", e.Namespace)
		}
		for attempt := 0; ; attempt++ {
			_, err := s.raftApply(structs.EvalUpdateRequestType, &structs.EvalUpdateRequest{Evals: evals, Timestamp: now.UnixNano()})
			if err == nil {
				break
			}
			logger.Warn("marking evals failed", "error", err)
			if !retryWait(ctx, attempt) {
				return
			}
		}
	}
}
