package structs

// Plan is what a scheduler asks the plan applier to commit for one eval:
// allocs to stop, allocs to create or update (each new alloc with the CSI
// claims it reserves), and evals that ride along. The applier re-checks
// it against the latest state, drops what no longer fits, and commits the
// rest in one Raft entry (an ApplyPlanResultsRequest).
type Plan struct {
	// EvalID is the eval that produced the plan.
	EvalID   string
	Priority int
	// Job is the job version the placements run; nil when the job is gone.
	Job *Job

	// NodeUpdate stops allocs, keyed by the node they are on. Stops are
	// never rejected.
	NodeUpdate map[string][]*AllocStopUpdate
	// NodeAllocation creates allocs (placements) or updates existing ones
	// (in-place updates, follow-up eval IDs), keyed by node.
	NodeAllocation map[string][]*Allocation
	// CSIClaims are the claims a new alloc reserves, keyed by alloc ID.
	// They commit together with their alloc or not at all.
	CSIClaims map[string][]*CSIVolumeClaimUpdate
	// Evals created with the plan: follow-up evals for delayed reschedules.
	Evals []*Evaluation
	// Final is the eval's final record should the plan commit whole (nil:
	// the scheduler writes it afterwards). The applier then writes it in
	// the plan's own Raft entry, with the job's other blocked evals
	// cancelled as Planner.UpdateEval does, and says so in
	// PlanResult.FinalWritten: one entry per eval instead of two, and no
	// eval write queued in Raft right behind the placement, where the new
	// alloc's Claim would wait for it (issue 20's K=1 trace).
	Final *Evaluation
	// SnapshotIndex is the index of the state the scheduler made the plan
	// on: a blocked eval for what it could not place is dated by it.
	SnapshotIndex uint64
}

// AppendStop adds a stop of an alloc on nodeID.
func (p *Plan) AppendStop(nodeID string, u *AllocStopUpdate) {
	if p.NodeUpdate == nil {
		p.NodeUpdate = map[string][]*AllocStopUpdate{}
	}
	p.NodeUpdate[nodeID] = append(p.NodeUpdate[nodeID], u)
}

// AppendAlloc adds a new or updated alloc and the claims it reserves.
func (p *Plan) AppendAlloc(a *Allocation, claims []*CSIVolumeClaimUpdate) {
	if p.NodeAllocation == nil {
		p.NodeAllocation = map[string][]*Allocation{}
	}
	p.NodeAllocation[a.NodeID] = append(p.NodeAllocation[a.NodeID], a)
	if len(claims) > 0 {
		if p.CSIClaims == nil {
			p.CSIClaims = map[string][]*CSIVolumeClaimUpdate{}
		}
		p.CSIClaims[a.ID] = append(p.CSIClaims[a.ID], claims...)
	}
}

// IsNoOp reports whether the plan changes nothing.
func (p *Plan) IsNoOp() bool {
	return len(p.NodeUpdate) == 0 && len(p.NodeAllocation) == 0 && len(p.Evals) == 0
}

// Counts returns how many stops and allocs (new or updated) the plan holds.
func (p *Plan) Counts() (stops, allocs int) {
	for _, us := range p.NodeUpdate {
		stops += len(us)
	}
	for _, as := range p.NodeAllocation {
		allocs += len(as)
	}
	return stops, allocs
}

// PlanResult is what the plan applier committed of a plan.
type PlanResult struct {
	// NodeUpdate, NodeAllocation and CSIClaims are the committed parts.
	NodeUpdate     map[string][]*AllocStopUpdate
	NodeAllocation map[string][]*Allocation
	CSIClaims      map[string][]*CSIVolumeClaimUpdate

	// Rejected says, by alloc ID, why an alloc of the plan was dropped.
	Rejected map[string]string

	// RefreshIndex is set when something was dropped: the scheduler must
	// plan again against state at least this new.
	RefreshIndex uint64
	// AllocIndex is the Raft index of the commit; zero when nothing was
	// committed.
	AllocIndex uint64
	// FinalWritten: the plan's Final eval was committed with it (only
	// when nothing was rejected).
	FinalWritten bool
}

// FullCommit reports whether everything in plan was committed, with the
// number of stops plus allocs expected and committed.
func (r *PlanResult) FullCommit(plan *Plan) (full bool, expected, actual int) {
	es, ea := plan.Counts()
	as, aa := (&Plan{NodeUpdate: r.NodeUpdate, NodeAllocation: r.NodeAllocation}).Counts()
	return es+ea == as+aa, es + ea, as + aa
}

// EvalTriggerFailedFollowUp marks the eval that retries, after a delay,
// the job of an eval the leader gave up on (nacked too often).
const EvalTriggerFailedFollowUp = "failed-eval-follow-up"
