package leader

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-memdb"
	metrics "github.com/hashicorp/go-metrics"

	"github.com/berth-io/berth/nomad/scheduler"
	"github.com/berth-io/berth/nomad/structs"
)

// runWorker takes evals from the broker and runs the scheduler for each,
// until ctx ends:
//
//	Dequeue ──► snapshot at least as new as the eval ──► eval still pending? ──no──► Ack
//	                                                        │ yes
//	                                                        ▼
//	                scheduler.Process (plans through the applier, writes evals)
//	                        │ ok ──► Ack        │ error ──► Nack (redelivered, or failed past the limit)
func (s *server) runWorker(ctx context.Context, sc *Term, id int) {
	w := &worker{srv: s, sc: sc, logger: s.logger.Named("worker").With("worker", id)}
	for {
		eval, token, err := sc.broker.Dequeue(ctx)
		if err != nil {
			return
		}
		metrics.MeasureSince([]string{"eval", "wait"}, time.Unix(0, eval.CreateTime))
		if err := w.process(ctx, eval); err != nil {
			if ctx.Err() != nil {
				return // the term is over; the next leader picks the eval up
			}
			w.logger.Warn("processing eval failed; it will be retried", "eval_id", eval.ID, "job_id", eval.JobID, "error", err)
			if err := sc.broker.Nack(eval.ID, token); err != nil {
				w.logger.Warn("nack failed", "eval_id", eval.ID, "error", err)
			}
			continue
		}
		if err := sc.broker.Ack(eval.ID, token); err != nil {
			w.logger.Warn("ack failed", "eval_id", eval.ID, "error", err)
		}
	}
}

type worker struct {
	srv    *server
	sc     *Term
	logger hclog.Logger
}

func (w *worker) process(ctx context.Context, eval *structs.Evaluation) error {
	snap, err := w.srv.snapshotMinIndex(ctx, eval.ModifyIndex)
	if err != nil {
		return fmt.Errorf("waiting for state of eval %s: %w", eval.ID, err)
	}
	cur, err := snap.EvalByID(nil, eval.ID)
	if err != nil {
		return err
	}
	if cur == nil || cur.Status != structs.EvalStatusPending {
		return nil // already processed, or garbage collected
	}
	index, err := snap.LatestIndex()
	if err != nil {
		return err
	}
	start := time.Now()
	p := &workerPlanner{w: w, plannedAt: index, passStart: start}
	err = scheduler.New(snap, p, scheduler.Options{Logger: w.logger.Named("scheduler"), MaxPlacementsPerPlan: scheduler.DefaultMaxPlacementsPerPlan}).Process(ctx, cur)
	w.logger.Debug("eval processed", "eval_id", cur.ID, "job_id", cur.JobID, "type", cur.Type,
		"trigger", cur.TriggeredBy, "duration", time.Since(start), "error", err)
	return err
}

// workerPlanner is the scheduler's Planner on the leader: plans go to the
// plan applier, evals straight to Raft.
type workerPlanner struct {
	w *worker
	// plannedAt is the index of the state the scheduler's last plan was
	// made on (Plan.SnapshotIndex; the worker's first state until a plan
	// is submitted). A blocked eval is hinted with it, not with the
	// state a commit returned: a scheduler whose plan committed whole
	// does not plan again, so the placements that failed were judged on
	// the older state, and a claim freed while the plan was committing
	// (seed 1384: a job's second alloc left blocked on a freed claim)
	// would be dated before the hint and never retry it. The parts of a
	// plan cut at MaxPlacementsPerPlan all carry the state of the one
	// pass they were cut from. After a plan partly rejected and planned
	// again to no new placements, the hint is that newer pass's state.
	plannedAt uint64
	// passStart is when the scheduler got a state to plan on, and zero
	// once its plan was submitted: the time to the next SubmitPlan is one
	// planning pass (plan.compute).
	passStart time.Time
}

var _ scheduler.Planner = (*workerPlanner)(nil)

func (p *workerPlanner) SubmitPlan(ctx context.Context, plan *structs.Plan) (*structs.PlanResult, scheduler.State, error) {
	p.plannedAt = plan.SnapshotIndex
	if !p.passStart.IsZero() {
		metrics.MeasureSince([]string{"plan", "compute"}, p.passStart)
		p.passStart = time.Time{}
	}
	submitted := time.Now()
	result, err := p.w.sc.plans.submit(ctx, plan)
	metrics.MeasureSince([]string{"plan", "submit"}, submitted)
	if err != nil {
		return nil, nil, err
	}
	if len(result.Rejected) == 0 {
		return result, nil, nil // committed whole: the scheduler needs no newer state
	}
	for id, why := range result.Rejected {
		p.w.logger.Debug("plan applier rejected an alloc", "eval_id", plan.EvalID, "alloc_id", id, "reason", why)
	}
	// A state as new as the commit, which the scheduler plans again on.
	// The applier has applied the commit, so this does not wait.
	snap, err := p.w.srv.snapshotMinIndex(ctx, max(result.RefreshIndex, result.AllocIndex))
	if err != nil {
		return nil, nil, err
	}
	p.passStart = time.Now()
	return result, snap, nil
}

// UpdateEval writes the eval's final status. An eval that completed with
// everything placed makes any blocked eval of its job stale: those are
// canceled in the same entry.
func (p *workerPlanner) UpdateEval(_ context.Context, e *structs.Evaluation) error {
	evals := []*structs.Evaluation{e}
	if e.Status == structs.EvalStatusComplete && e.BlockedEval == "" {
		stale, err := p.blockedOfJob(e, descPlacedAll)
		if err != nil {
			return err
		}
		evals = append(evals, stale...)
	}
	_, err := p.w.srv.raftApply(structs.EvalUpdateRequestType, &structs.EvalUpdateRequest{Evals: evals, Timestamp: time.Now().UnixNano()})
	return err
}

// CreateEval writes a new eval. A blocked eval replaces (cancels) older
// blocked evals of its job, and the tracker learns which state its
// scheduler saw, so a change it missed still unblocks it.
func (p *workerPlanner) CreateEval(_ context.Context, e *structs.Evaluation) error {
	evals := []*structs.Evaluation{e}
	if e.Status == structs.EvalStatusBlocked {
		older, err := p.blockedOfJob(e, "replaced by a newer blocked eval of the job")
		if err != nil {
			return err
		}
		evals = append(evals, older...)
		p.w.sc.blocked.Hint(e.ID, p.plannedAt)
	}
	_, err := p.w.srv.raftApply(structs.EvalUpdateRequestType, &structs.EvalUpdateRequest{Evals: evals, Timestamp: time.Now().UnixNano()})
	if err != nil && e.Status == structs.EvalStatusBlocked {
		p.w.sc.blocked.DropHint(e.ID)
	}
	return err
}

// blockedOfJob returns, canceled with desc, the blocked evals of e's job
// other than e.
func (p *workerPlanner) blockedOfJob(e *structs.Evaluation, desc string) ([]*structs.Evaluation, error) {
	return blockedEvalsOfJob(p.w.srv.config.State(), e, desc, time.Now().UnixNano())
}

// descPlacedAll says why a completed eval that placed everything cancels
// its job's blocked evals (UpdateEval, or the plan applier for a plan
// carrying the eval's end).
const descPlacedAll = "canceled: a later eval placed every alloc of the job"

// evalsOfJob reads a job's evals: a state store or snapshot.
type evalsOfJob interface {
	EvalsByJob(ws memdb.WatchSet, ns, jobID string) ([]*structs.Evaluation, error)
}

func blockedEvalsOfJob(st evalsOfJob, e *structs.Evaluation, desc string, now int64) ([]*structs.Evaluation, error) {
	evals, err := st.EvalsByJob(nil, e.Namespace, e.JobID)
	if err != nil {
		return nil, err
	}
	var out []*structs.Evaluation
	for _, b := range evals {
		if b.ID == e.ID || b.Status != structs.EvalStatusBlocked {
			continue
		}
		c := b.Copy()
		c.Status = structs.EvalStatusCancelled
		c.StatusDescription = desc
		c.ModifyTime = now
		out = append(out, c)
	}
	return out, nil
}
