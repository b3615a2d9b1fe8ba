package scheduler

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/go-memdb"

	"github.com/berth-io/berth/helper"
	"github.com/berth-io/berth/nomad/structs"
)

// State is the read-only view of cluster state a scheduler needs; a
// *state.StateSnapshot satisfies it. Objects it returns are shared with
// the store: never mutate them. Schedulers pass a nil WatchSet.
type State interface {
	JobByID(ws memdb.WatchSet, ns, id string) (*structs.Job, error)
	AllocsByJob(ws memdb.WatchSet, ns, jobID string) ([]*structs.Allocation, error)
	AllocsByNode(ws memdb.WatchSet, nodeID string) ([]*structs.Allocation, error)
	// Nodes iterates over every node (*structs.Node).
	Nodes(ws memdb.WatchSet) (memdb.ResultIterator, error)
	CSIVolumeByID(ws memdb.WatchSet, ns, id string) (*structs.CSIVolume, error)
	// CSIVolumesByNodeID iterates over the volumes (*structs.CSIVolume)
	// with a live claim by an alloc on the node.
	CSIVolumesByNodeID(ws memdb.WatchSet, nodeID string) (memdb.ResultIterator, error)
	// CSIPluginSummary returns a plugin's counts and flags (no instance
	// maps), or nil.
	CSIPluginSummary(ws memdb.WatchSet, id string) (*structs.CSIPlugin, error)
	// LatestIndex is the Raft index of the state: plans say which state
	// they were made on (Plan.SnapshotIndex).
	LatestIndex() (uint64, error)
}

// Planner is how a scheduler changes the cluster. A scheduler calls it
// from one goroutine, one call at a time. Every call blocks until its
// Raft write is applied, or ctx ends.
type Planner interface {
	// SubmitPlan asks the plan applier to commit plan. The applier
	// re-checks every new or updated alloc against the latest state and
	// commits what still fits (and every stop) in one Raft entry. The
	// result says what was committed. The returned State, when not nil,
	// is at least as new as the commit; it must not be nil when something
	// was dropped (the scheduler plans again against it). A plan over
	// MaxPlacementsPerPlan is submitted in parts, one call each, all made
	// on the same state (Plan.SnapshotIndex). An error means nothing is
	// known to be committed: the eval is retried.
	SubmitPlan(ctx context.Context, plan *structs.Plan) (*structs.PlanResult, State, error)
	// UpdateEval writes the eval being processed, with its final status.
	UpdateEval(ctx context.Context, eval *structs.Evaluation) error
	// CreateEval writes a new eval: the blocked eval that retries failed
	// placements when capacity appears. A planner keeps one blocked eval
	// per job: creating one replaces (cancels) any older one.
	CreateEval(ctx context.Context, eval *structs.Evaluation) error
}

// Options carry a scheduler's clock, ID source and logger. Zero values
// mean time.Now, helper.UUID and a null logger.
type Options struct {
	Logger hclog.Logger
	Now    func() time.Time
	NewID  func() string
	// MaxPlacementsPerPlan, when above zero, submits a plan of more
	// allocs (new or updated) in parts of at most that many, one after
	// the other, each once the one before committed whole. One plan is
	// one Raft entry, bounded in size: 10,000 placements with their
	// claims and metrics encode to 18 MB, over the 16 MB limit, and such
	// an eval failed every attempt. The parts are cut from one planning
	// pass, not planned one by one against each commit: that re-ran the
	// reconcile and rebuilt every ranking once per part. A part the
	// applier partly rejects ends the pass; the eval plans again against
	// the state that commit produced, as after any rejection. The
	// leader's workers use DefaultMaxPlacementsPerPlan.
	MaxPlacementsPerPlan int
}

// DefaultMaxPlacementsPerPlan keeps a plan's Raft entry near 4 MB (about
// 1.8 KB per placement with one claim), well under the entry limit.
const DefaultMaxPlacementsPerPlan = 2000

// maxPlanAttempts bounds how often one eval re-plans after the plan
// applier rejected part of its plan.
const maxPlanAttempts = 5

// Scheduler processes evals of every job type. It is not safe for
// concurrent use; a worker makes one per eval.
type Scheduler struct {
	logger   hclog.Logger
	state    State
	planner  Planner
	now      func() time.Time
	newID    func() string
	maxPlace int
	// scanAll makes every placement check every candidate node instead
	// of asking a ranking: the reference TestRanking_SameAsScan compares
	// against, and the "old" side of BenchmarkPlacePerAllocClaims.
	scanAll bool
}

// New returns a scheduler reading st and writing through p.
func New(st State, p Planner, opts Options) *Scheduler {
	s := &Scheduler{state: st, planner: p, logger: opts.Logger, now: opts.Now, newID: opts.NewID, maxPlace: opts.MaxPlacementsPerPlan}
	if s.logger == nil {
		s.logger = hclog.NewNullLogger()
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.newID == nil {
		s.newID = helper.UUID
	}
	return s
}

// outcome is one planning pass: the plan, and per group the placements
// that failed (with why) and how many are still queued.
type outcome struct {
	plan   *structs.Plan
	failed map[string]*structs.AllocMetric
	queued map[string]int
}

// Process runs the scheduler for eval's job type until its plan is
// committed (re-planning after partial rejections), then writes the eval's
// final status, creating a blocked eval for placements that did not fit.
// A last plan that leaves nothing to block on carries that status
// (Plan.Final); when the planner committed it with the plan, nothing more
// is written.
// An error means the eval should be retried (nack); the eval's status is
// then left alone.
func (s *Scheduler) Process(ctx context.Context, eval *structs.Evaluation) error {
	var compute func(State, *structs.Evaluation) (*outcome, error)
	switch eval.Type {
	case structs.JobTypeService, structs.JobTypeBatch:
		compute = s.computeGeneric
	case structs.JobTypeSystem:
		compute = s.computeSystem
	default:
		return s.fail(ctx, eval, fmt.Sprintf("scheduler: unknown job type %q", eval.Type))
	}
	logger := s.logger.With("eval_id", eval.ID, "job_id", eval.JobID, "namespace", eval.Namespace)

	st := s.state
	var out *outcome
	exhausted := false
	for attempt := 1; ; attempt++ {
		var err error
		out, err = compute(st, eval)
		if err != nil {
			return fmt.Errorf("planning eval %s: %w", eval.ID, err)
		}
		if out.plan.IsNoOp() {
			break
		}
		if out.plan.SnapshotIndex, err = st.LatestIndex(); err != nil {
			return fmt.Errorf("planning eval %s: %w", eval.ID, err)
		}
		if len(out.failed) == 0 {
			// Nothing left to block on: the last part's entry can carry
			// the eval's end (Plan.Final).
			out.plan.Final = s.completed(eval, out)
		}
		var refreshed State
		full := true
		for _, part := range s.parts(out.plan) {
			var result *structs.PlanResult
			result, refreshed, err = s.planner.SubmitPlan(ctx, part)
			if err != nil {
				return fmt.Errorf("submitting plan of eval %s: %w", eval.ID, err)
			}
			if result.FinalWritten {
				return nil
			}
			var expected, actual int
			if full, expected, actual = result.FullCommit(part); !full {
				logger.Debug("plan partially rejected; planning again", "attempt", attempt, "expected", expected, "committed", actual)
				break
			}
		}
		if full {
			break
		}
		if refreshed != nil {
			st = refreshed
		}
		if attempt >= maxPlanAttempts {
			exhausted = true
			break
		}
	}
	return s.finish(ctx, eval, out, exhausted)
}

// parts cuts plan into plans of at most MaxPlacementsPerPlan allocs each
// (new or updated, node by node in ID order, with their claims), the
// first also carrying every stop and eval and the last the eval's end
// (Final); a plan within the limit is its own only part.
func (s *Scheduler) parts(plan *structs.Plan) []*structs.Plan {
	if _, n := plan.Counts(); s.maxPlace <= 0 || n <= s.maxPlace {
		return []*structs.Plan{plan}
	}
	part := func() *structs.Plan {
		return &structs.Plan{EvalID: plan.EvalID, Priority: plan.Priority, Job: plan.Job, SnapshotIndex: plan.SnapshotIndex}
	}
	cur := part()
	cur.NodeUpdate, cur.Evals = plan.NodeUpdate, plan.Evals
	out := []*structs.Plan{cur}
	count := 0
	for _, nodeID := range slices.Sorted(maps.Keys(plan.NodeAllocation)) {
		for _, a := range plan.NodeAllocation[nodeID] {
			if count == s.maxPlace {
				cur, count = part(), 0
				out = append(out, cur)
			}
			cur.AppendAlloc(a, plan.CSIClaims[a.ID])
			count++
		}
	}
	cur.Final = plan.Final // the eval ends with its last part
	return out
}

// finish writes the blocked eval (if placements failed) and the eval's
// final status.
func (s *Scheduler) finish(ctx context.Context, eval *structs.Evaluation, out *outcome, exhausted bool) error {
	e := s.completed(eval, out)
	now := e.ModifyTime
	if exhausted {
		e.Status = structs.EvalStatusFailed
		e.StatusDescription = fmt.Sprintf("plan rejected %d times in a row; retrying when capacity changes", maxPlanAttempts)
	}
	if len(out.failed) > 0 || exhausted {
		trigger := eval.TriggeredBy
		if exhausted {
			trigger = structs.EvalTriggerMaxPlans
		}
		blocked := &structs.Evaluation{
			ID:                s.newID(),
			Namespace:         eval.Namespace,
			Priority:          eval.Priority,
			Type:              eval.Type,
			TriggeredBy:       trigger,
			JobID:             eval.JobID,
			JobModifyIndex:    eval.JobModifyIndex,
			Status:            structs.EvalStatusBlocked,
			StatusDescription: "created to place remaining allocations",
			PreviousEval:      eval.ID,
			FailedTGAllocs:    copyMetrics(out.failed),
			QueuedAllocations: out.queued,
			CreateTime:        now,
			ModifyTime:        now,
		}
		if err := s.planner.CreateEval(ctx, blocked); err != nil {
			return fmt.Errorf("creating blocked eval for eval %s: %w", eval.ID, err)
		}
		e.BlockedEval = blocked.ID
	}
	if err := s.planner.UpdateEval(ctx, e); err != nil {
		return fmt.Errorf("updating eval %s: %w", eval.ID, err)
	}
	return nil
}

// completed is eval as complete after out: its placements that failed
// and the allocs still queued, per group.
func (s *Scheduler) completed(eval *structs.Evaluation, out *outcome) *structs.Evaluation {
	e := eval.Copy()
	e.Status = structs.EvalStatusComplete
	e.StatusDescription = ""
	e.FailedTGAllocs = nil
	if len(out.failed) > 0 {
		e.FailedTGAllocs = out.failed
	}
	e.QueuedAllocations = out.queued
	e.ModifyTime = s.now().UnixNano()
	return e
}

// fail marks eval failed with desc: for evals no retry can fix.
func (s *Scheduler) fail(ctx context.Context, eval *structs.Evaluation, desc string) error {
	e := eval.Copy()
	e.Status = structs.EvalStatusFailed
	e.StatusDescription = desc
	e.ModifyTime = s.now().UnixNano()
	if err := s.planner.UpdateEval(ctx, e); err != nil {
		return fmt.Errorf("updating eval %s: %w", eval.ID, err)
	}
	return nil
}

func copyMetrics(in map[string]*structs.AllocMetric) map[string]*structs.AllocMetric {
	if in == nil {
		return nil
	}
	out := make(map[string]*structs.AllocMetric, len(in))
	for k, m := range in {
		out[k] = m.Copy()
	}
	return out
}
