package leader

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/hashicorp/go-memdb"
	metrics "github.com/hashicorp/go-metrics"

	"github.com/berth-io/berth/nomad/structs"
)

// The plan applier is the single writer of scheduling decisions: one
// goroutine on the leader takes plans from every worker, one at a time,
// re-checks each against the latest state, and commits what still holds
// in one Raft entry. Serial application is what makes optimistic,
// concurrent scheduling safe: two workers may plan the same node or the
// same volume, but only the first plan to reach the applier gets it.
//
// Partial-result semantics, per alloc of the plan:
//
//	stop                                          ──► always committed
//	new alloc on a node that is gone or not ready
//	  (down, ineligible, draining)                ──► rejected
//	update of a live alloc whose node is gone     ──► rejected
//	alloc that no longer fits the node's CPU or memory
//	  (counting the plan's own stops and earlier allocs) ──► rejected
//	new alloc whose CSI claim is taken (ClaimConflict counting the
//	  claims reserved earlier in the same plan), whose volume is gone,
//	  or whose node plugin is gone or unhealthy   ──► rejected, with its claims
//	anything else                                 ──► committed, with its claims
//
// A plan with rejections still commits the rest; the result names every
// rejected alloc and why, and carries RefreshIndex so the worker re-plans
// against state that includes the commit.

// planQueue hands plans from workers to the applier.
type planQueue struct {
	ch chan *pendingPlan
}

type pendingPlan struct {
	plan      *structs.Plan
	reply     chan planReply // buffered: the applier never blocks on it
	submitted time.Time
}

type planReply struct {
	result *structs.PlanResult
	err    error
}

func newPlanQueue() *planQueue { return &planQueue{ch: make(chan *pendingPlan)} }

// submit waits for the applier to take and apply plan, or for ctx.
func (q *planQueue) submit(ctx context.Context, plan *structs.Plan) (*structs.PlanResult, error) {
	p := &pendingPlan{plan: plan, reply: make(chan planReply, 1), submitted: time.Now()}
	select {
	case q.ch <- p:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	select {
	case r := <-p.reply:
		return r.result, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// applyPlans runs the applier until ctx ends.
func (s *server) applyPlans(ctx context.Context, sc *Term) {
	for {
		select {
		case <-ctx.Done():
			return
		case p := <-sc.plans.ch:
			metrics.MeasureSince([]string{"plan", "queue_wait"}, p.submitted)
			result, err := s.applyPlan(p.plan)
			p.reply <- planReply{result, err}
		}
	}
}

// maxApplyAttempts bounds re-evaluations of one plan whose Raft entry the
// FSM refused because a claim was taken between the check and the apply
// (by a client claim or the volumewatcher, which write claims too).
const maxApplyAttempts = 3

// applyPlan evaluates plan against the latest state and commits it.
func (s *server) applyPlan(plan *structs.Plan) (*structs.PlanResult, error) {
	for attempt := 1; ; attempt++ {
		snap, err := s.config.State().Snapshot()
		if err != nil {
			return nil, err
		}
		start := time.Now()
		result, req, err := evaluatePlan(snap, plan, start.UnixNano())
		metrics.MeasureSince([]string{"plan", "evaluate"}, start)
		if err != nil {
			return nil, fmt.Errorf("evaluating plan of eval %s: %w", plan.EvalID, err)
		}
		if len(req.AllocsStopped) == 0 && len(req.AllocsUpdated) == 0 && len(req.Evals) == 0 {
			result.RefreshIndex, err = snap.LatestIndex()
			return result, err
		}
		start = time.Now()
		index, err := s.raftApply(structs.ApplyPlanResultsRequestType, req)
		metrics.MeasureSince([]string{"plan", "apply"}, start)
		if structs.CodeOf(err) == structs.CodeNotReady && attempt < maxApplyAttempts {
			continue // a claim changed under us: check again
		}
		if err != nil {
			return nil, fmt.Errorf("applying plan of eval %s: %w", plan.EvalID, err)
		}
		result.AllocIndex = index
		if len(result.Rejected) > 0 {
			result.RefreshIndex = index
		}
		return result, nil
	}
}

// planState is what evaluatePlan reads; a state snapshot satisfies it.
type planState interface {
	NodeByID(ws memdb.WatchSet, id string) (*structs.Node, error)
	AllocByID(ws memdb.WatchSet, id string) (*structs.Allocation, error)
	AllocsByNode(ws memdb.WatchSet, nodeID string) ([]*structs.Allocation, error)
	JobByID(ws memdb.WatchSet, ns, id string) (*structs.Job, error)
	CSIVolumeByID(ws memdb.WatchSet, ns, id string) (*structs.CSIVolume, error)
	evalsOfJob
}

// evaluatePlan decides what of plan still holds against st (see the
// semantics above) and builds the Raft request that commits it, stamped
// with the leader's time now. It does no I/O beyond reading st.
func evaluatePlan(st planState, plan *structs.Plan, now int64) (*structs.PlanResult, *structs.ApplyPlanResultsRequest, error) {
	result := &structs.PlanResult{
		NodeUpdate:     map[string][]*structs.AllocStopUpdate{},
		NodeAllocation: map[string][]*structs.Allocation{},
		CSIClaims:      map[string][]*structs.CSIVolumeClaimUpdate{},
		Rejected:       map[string]string{},
	}
	req := &structs.ApplyPlanResultsRequest{EvalID: plan.EvalID, Timestamp: now, Evals: plan.Evals}

	stopped := map[string]bool{}
	for _, nodeID := range slices.Sorted(maps.Keys(plan.NodeUpdate)) {
		stops := plan.NodeUpdate[nodeID]
		result.NodeUpdate[nodeID] = stops
		req.AllocsStopped = append(req.AllocsStopped, stops...)
		for _, u := range stops {
			stopped[u.AllocID] = true
		}
	}

	var storedJob *structs.Job
	if plan.Job != nil {
		var err error
		if storedJob, err = st.JobByID(nil, plan.Job.Namespace, plan.Job.ID); err != nil {
			return nil, nil, err
		}
	}
	vols := &planVolumes{st: st, vols: map[volumeKey]*structs.CSIVolume{}, own: map[volumeKey]bool{}}

	for _, nodeID := range slices.Sorted(maps.Keys(plan.NodeAllocation)) {
		allocs := plan.NodeAllocation[nodeID]
		node, err := st.NodeByID(nil, nodeID)
		if err != nil {
			return nil, nil, err
		}
		existing, err := st.AllocsByNode(nil, nodeID)
		if err != nil {
			return nil, nil, err
		}
		inPlan := map[string]bool{}
		for _, a := range allocs {
			inPlan[a.ID] = true
		}
		var cpu, mem int64
		for _, a := range existing {
			if !a.TerminalStatus() && !stopped[a.ID] && !inPlan[a.ID] {
				cpu, mem = cpu+resCPU(a), mem+resMem(a)
			}
		}
		// Updates of existing allocs first: they hold their room already.
		var updates, placements []*structs.Allocation
		for _, a := range allocs {
			prev, err := st.AllocByID(nil, a.ID)
			if err != nil {
				return nil, nil, err
			}
			if prev != nil {
				updates = append(updates, a)
			} else {
				placements = append(placements, a)
			}
		}
		reject := func(a *structs.Allocation, why string) { result.Rejected[a.ID] = why }
		for i, a := range append(updates, placements...) {
			isNew := i >= len(updates)
			switch {
			case node == nil && (isNew || !a.TerminalStatus()):
				reject(a, fmt.Sprintf("node %s no longer exists", nodeID))
				continue
			case isNew && !node.Ready():
				reject(a, fmt.Sprintf("node %s is not ready for new allocs (status %s, eligibility %s, draining %v)",
					nodeID, node.Status, node.SchedulingEligibility, node.DrainStrategy != nil))
				continue
			}
			var claims []*structs.CSIVolumeClaimUpdate
			if isNew {
				var why string
				claims, why, err = vols.check(node, plan.CSIClaims[a.ID])
				if err != nil {
					return nil, nil, err
				}
				if why != "" {
					reject(a, why)
					continue
				}
			}
			if !a.TerminalStatus() {
				if dim := exceeds(node, cpu+resCPU(a), mem+resMem(a)); dim != "" {
					reject(a, fmt.Sprintf("node %s has no room: %s exhausted", nodeID, dim))
					continue
				}
				cpu, mem = cpu+resCPU(a), mem+resMem(a)
			}
			vols.reserve(claims)
			result.NodeAllocation[nodeID] = append(result.NodeAllocation[nodeID], a)
			if len(claims) > 0 {
				result.CSIClaims[a.ID] = claims
				req.CSIClaims = append(req.CSIClaims, claims...)
			}
			req.AllocsUpdated = append(req.AllocsUpdated, stripJob(a, storedJob))
		}
	}
	if plan.Final != nil && len(result.Rejected) == 0 {
		// The eval ends with this entry, as UpdateEval would have ended
		// it in the next one.
		evals := append(slices.Clip(req.Evals), plan.Final)
		if plan.Final.Status == structs.EvalStatusComplete && plan.Final.BlockedEval == "" {
			stale, err := blockedEvalsOfJob(st, plan.Final, descPlacedAll, now)
			if err != nil {
				return nil, nil, err
			}
			evals = append(evals, stale...)
		}
		req.Evals = evals
		result.FinalWritten = true
	}
	return result, req, nil
}

// stripJob drops the job from an alloc that runs the stored version, so
// the Raft entry carries the job once (the store attaches it) instead of
// once per alloc.
func stripJob(a *structs.Allocation, stored *structs.Job) *structs.Allocation {
	if a.Job == nil || stored == nil || a.Job.ID != stored.ID || a.Job.Namespace != stored.Namespace ||
		a.Job.Version != stored.Version || a.Job.JobModifyIndex != stored.JobModifyIndex {
		return a
	}
	c := *a
	c.Job = nil
	return &c
}

func resCPU(a *structs.Allocation) int64 {
	if a.Resources == nil {
		return 0
	}
	return a.Resources.CPU
}

func resMem(a *structs.Allocation) int64 {
	if a.Resources == nil {
		return 0
	}
	return a.Resources.MemoryMB
}

// exceeds names the dimension usage cpu/mem would exceed on node, or "".
func exceeds(node *structs.Node, cpu, mem int64) string {
	var capCPU, capMem int64
	if r := node.NodeResources; r != nil {
		capCPU, capMem = r.CPU, r.MemoryMB
	}
	switch {
	case cpu > capCPU:
		return "cpu"
	case mem > capMem:
		return "memory"
	}
	return ""
}

// planVolumes is the volumes as the plan so far would leave them.
type planVolumes struct {
	st   planState
	vols map[volumeKey]*structs.CSIVolume // proposed volumes (nil: not found)
	own  map[volumeKey]bool               // vols entries that are our copies
}

func (v *planVolumes) get(ns, id string) (*structs.CSIVolume, error) {
	key := volumeKey{ns, id}
	if vol, ok := v.vols[key]; ok {
		return vol, nil
	}
	vol, err := v.st.CSIVolumeByID(nil, ns, id)
	if err != nil {
		return nil, err
	}
	v.vols[key] = vol
	return vol, nil
}

// check says why the claims of one new alloc on node cannot be reserved
// now, or "".
func (v *planVolumes) check(node *structs.Node, claims []*structs.CSIVolumeClaimUpdate) ([]*structs.CSIVolumeClaimUpdate, string, error) {
	for _, u := range claims {
		ns := u.Namespace
		if ns == "" {
			ns = structs.DefaultNamespace
		}
		vol, err := v.get(ns, u.VolumeID)
		if err != nil {
			return nil, "", err
		}
		if vol == nil {
			return nil, fmt.Sprintf("volume %q: not found in namespace %q", u.VolumeID, ns), nil
		}
		if plug := node.CSINodePlugins[vol.PluginID]; plug == nil || !plug.Healthy {
			return nil, fmt.Sprintf("volume %q: CSI plugin %q is not running healthy on node %s", u.VolumeID, vol.PluginID, node.ID), nil
		}
		c := u.Claim
		if cerr := vol.ClaimConflict(c.AllocID, c.NodeID, c.Mode, c.AccessMode); cerr != nil {
			return nil, cerr.Msg, nil
		}
	}
	return claims, "", nil
}

// reserve adds committed claims to the proposed volumes.
func (v *planVolumes) reserve(claims []*structs.CSIVolumeClaimUpdate) {
	for _, u := range claims {
		ns := u.Namespace
		if ns == "" {
			ns = structs.DefaultNamespace
		}
		key := volumeKey{ns, u.VolumeID}
		vol := v.vols[key]
		if !v.own[key] {
			vol = vol.Copy() // stored volumes are shared: copy once
			v.own[key] = true
		}
		if vol.Claims == nil {
			vol.Claims = map[string]*structs.CSIVolumeClaim{}
		}
		vol.Claims[u.Claim.AllocID] = u.Claim
		if vol.AccessMode == "" {
			vol.AccessMode, vol.AttachmentMode = u.Claim.AccessMode, u.Claim.AttachmentMode
		}
		v.vols[key] = vol
	}
}
