package nomad

import (
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/go-memdb"

	"github.com/berth-io/berth/nomad/state"
	"github.com/berth-io/berth/nomad/structs"
)

// NodeEndpoint serves client nodes and node queries ("Node.*").
type NodeEndpoint struct {
	srv *Server
}

// Register registers or updates a node with its fingerprints.
func (n *NodeEndpoint) Register(args *structs.NodeRegisterRequest, reply *structs.NodeUpdateResponse) (err error) {
	defer wire(&err)
	if done, err := n.srv.forward("Node.Register", args, args, reply); done {
		return err
	}
	if args.Node == nil {
		return structs.NewError(structs.CodeInvalid, "node register: missing node")
	}
	if err := args.Node.Validate(); err != nil {
		return err
	}
	if err := n.srv.checkReregister(args.Node); err != nil {
		return err
	}
	// Copy: the caller's node (in-process callers) must not change under it.
	args.Node = args.Node.Copy()
	if args.Node.Status == "" {
		args.Node.Status = structs.NodeStatusInit
	}
	if args.Node.SchedulingEligibility == "" {
		args.Node.SchedulingEligibility = structs.NodeSchedulingEligible
	}
	args.Timestamp = time.Now().UnixNano()
	args.Node.StatusUpdatedAt = args.Timestamp
	_, index, err := n.srv.raftApply(structs.NodeRegisterRequestType, args)
	if err != nil {
		return err
	}
	reply.Index = index
	return nil
}

// GetNode reads one node.
func (n *NodeEndpoint) GetNode(args *structs.NodeSpecificRequest, reply *structs.SingleNodeResponse) (err error) {
	defer wire(&err)
	if done, err := n.srv.forward("Node.GetNode", args, args, reply); done {
		return err
	}
	return n.srv.blockingRPC(&args.QueryOptions, &reply.QueryMeta, func(ws memdb.WatchSet, snap *state.StateSnapshot) (uint64, error) {
		node, err := snap.NodeByID(ws, args.NodeID)
		if err != nil {
			return 0, err
		}
		reply.Node = nil
		if node != nil {
			reply.Node = node.Sanitize()
		}
		return snap.Index(state.TableNodes)
	})
}

// List lists nodes, optionally by ID prefix.
func (n *NodeEndpoint) List(args *structs.GenericRequest, reply *structs.NodeListResponse) (err error) {
	defer wire(&err)
	if done, err := n.srv.forward("Node.List", args, args, reply); done {
		return err
	}
	return n.srv.blockingRPC(&args.QueryOptions, &reply.QueryMeta, func(ws memdb.WatchSet, snap *state.StateSnapshot) (uint64, error) {
		var (
			iter memdb.ResultIterator
			err  error
		)
		if args.Prefix != "" {
			iter, err = snap.NodesByIDPrefix(ws, args.Prefix)
		} else {
			iter, err = snap.Nodes(ws)
		}
		if err != nil {
			return 0, err
		}
		reply.Nodes = []*structs.NodeListStub{}
		for raw := iter.Next(); raw != nil; raw = iter.Next() {
			reply.Nodes = append(reply.Nodes, raw.(*structs.Node).Stub())
		}
		return snap.Index(state.TableNodes)
	})
}

// Operator actions on nodes: drain, eligibility, and the node's allocs.

// UpdateDrain sets or clears a node's drain. The leader stamps StartedAt
// and turns the relative Deadline into ForceDeadline: a positive deadline
// forces the remaining allocs off at now+Deadline, a negative one forces
// them off at once, and zero means no deadline. Setting a drain creates an
// evaluation for every job with a live alloc on the node, so the scheduler
// moves them; making the node eligible again creates one for every system
// job, so it is placed there again.
func (n *NodeEndpoint) UpdateDrain(args *structs.NodeUpdateDrainRequest, reply *structs.NodeUpdateResponse) (err error) {
	defer wire(&err)
	defer measureRPC("Node.UpdateDrain", time.Now())
	if done, err := n.srv.forward("Node.UpdateDrain", args, args, reply); done {
		return err
	}
	if args.NodeID == "" {
		return structs.NewError(structs.CodeInvalid, "node drain: missing node ID")
	}
	snap, err := n.srv.State().Snapshot()
	if err != nil {
		return err
	}
	node, err := snap.NodeByID(nil, args.NodeID)
	if err != nil {
		return err
	}
	if node == nil {
		return structs.NotFound("node", args.NodeID)
	}
	now := time.Now()
	args.Timestamp = now.UnixNano()
	var evals []*structs.Evaluation
	if args.DrainStrategy != nil {
		args.DrainStrategy = drainStrategyAt(args.DrainStrategy, now)
		evals, err = nodeJobEvals(snap, node.ID, structs.EvalTriggerNodeDrain, args.Timestamp)
	} else if args.MarkEligible && node.SchedulingEligibility != structs.NodeSchedulingEligible {
		evals, err = systemJobEvals(snap, node.ID, args.Timestamp)
	}
	if err != nil {
		return err
	}
	args.Evals = evals
	_, index, err := n.srv.raftApply(structs.NodeUpdateDrainRequestType, args)
	if err != nil {
		return fmt.Errorf("updating drain of node %q: %w", args.NodeID, err)
	}
	reply.EvalIDs = evalIDs(evals)
	reply.Index = index
	return nil
}

// drainStrategyAt is the drain d as the leader stamps it at now: started
// now, with the relative Deadline turned into an absolute ForceDeadline
// (now+Deadline when positive, now when negative: force at once, zero
// when there is no deadline). d itself is not changed.
func drainStrategyAt(d *structs.DrainStrategy, now time.Time) *structs.DrainStrategy {
	out := *d
	out.StartedAt = now.UnixNano()
	switch {
	case d.Deadline > 0:
		out.ForceDeadline = now.Add(d.Deadline).UnixNano()
	case d.Deadline < 0:
		out.ForceDeadline = out.StartedAt
	default:
		out.ForceDeadline = 0
	}
	return &out
}

// UpdateEligibility marks a node eligible or ineligible for new allocs.
// Making it eligible creates an evaluation for every system job.
func (n *NodeEndpoint) UpdateEligibility(args *structs.NodeUpdateEligibilityRequest, reply *structs.NodeUpdateResponse) (err error) {
	defer wire(&err)
	defer measureRPC("Node.UpdateEligibility", time.Now())
	if done, err := n.srv.forward("Node.UpdateEligibility", args, args, reply); done {
		return err
	}
	var errs []string
	if args.NodeID == "" {
		errs = append(errs, "missing node ID")
	}
	switch args.Eligibility {
	case structs.NodeSchedulingEligible, structs.NodeSchedulingIneligible:
	default:
		errs = append(errs, fmt.Sprintf("eligibility %q is not valid (want %s or %s)",
			args.Eligibility, structs.NodeSchedulingEligible, structs.NodeSchedulingIneligible))
	}
	if len(errs) > 0 {
		return structs.NewError(structs.CodeInvalid, "node %q eligibility: %s", args.NodeID, strings.Join(errs, "; "))
	}
	snap, err := n.srv.State().Snapshot()
	if err != nil {
		return err
	}
	node, err := snap.NodeByID(nil, args.NodeID)
	if err != nil {
		return err
	}
	if node == nil {
		return structs.NotFound("node", args.NodeID)
	}
	args.Timestamp = time.Now().UnixNano()
	args.Evals = nil
	if args.Eligibility == structs.NodeSchedulingEligible && node.SchedulingEligibility != structs.NodeSchedulingEligible {
		if args.Evals, err = systemJobEvals(snap, node.ID, args.Timestamp); err != nil {
			return err
		}
	}
	_, index, err := n.srv.raftApply(structs.NodeUpdateEligibilityRequestType, args)
	if err != nil {
		return fmt.Errorf("updating eligibility of node %q: %w", args.NodeID, err)
	}
	reply.EvalIDs = evalIDs(args.Evals)
	reply.Index = index
	return nil
}

// GetAllocs lists the allocations placed on a node, in full with their
// jobs: Nomad's API sends them so, and callers tell system allocs apart
// by Job.Type (node drain -ignore-system).
func (n *NodeEndpoint) GetAllocs(args *structs.NodeSpecificRequest, reply *structs.NodeAllocsResponse) (err error) {
	defer wire(&err)
	defer measureRPC("Node.GetAllocs", time.Now())
	if done, err := n.srv.forward("Node.GetAllocs", args, args, reply); done {
		return err
	}
	if args.NodeID == "" {
		return structs.NewError(structs.CodeInvalid, "node allocations: missing node ID")
	}
	return n.srv.blockingRPC(&args.QueryOptions, &reply.QueryMeta, func(ws memdb.WatchSet, snap *state.StateSnapshot) (uint64, error) {
		allocs, err := snap.AllocsByNode(ws, args.NodeID)
		if err != nil {
			return 0, err
		}
		reply.Allocs, _ = copyAllocs(allocs)
		return snap.Index(state.TableAllocs)
	})
}

// copyAllocs copies stored allocs for a reply, and returns the highest
// ModifyIndex among them.
func copyAllocs(allocs []*structs.Allocation) ([]*structs.Allocation, uint64) {
	out := make([]*structs.Allocation, 0, len(allocs))
	var index uint64
	for _, a := range allocs {
		out = append(out, a.Copy())
		index = max(index, a.ModifyIndex)
	}
	return out, index
}

// nodeJobEvals makes one pending evaluation per job with a live alloc on
// nodeID.
func nodeJobEvals(snap *state.StateSnapshot, nodeID, trigger string, now int64) ([]*structs.Evaluation, error) {
	allocs, err := snap.AllocsByNode(nil, nodeID)
	if err != nil {
		return nil, err
	}
	type key struct{ ns, id string }
	seen := map[key]bool{}
	var evals []*structs.Evaluation
	for _, a := range allocs {
		k := key{a.Namespace, a.JobID}
		if a.TerminalStatus() || seen[k] {
			continue
		}
		seen[k] = true
		job, err := snap.JobByID(nil, a.Namespace, a.JobID)
		if err != nil {
			return nil, err
		}
		if job == nil {
			continue
		}
		evals = append(evals, newJobEval(job, nodeID, trigger, now))
	}
	return evals, nil
}

// systemJobEvals makes one pending evaluation per running system job, for
// a node that may now take its allocs.
func systemJobEvals(snap *state.StateSnapshot, nodeID string, now int64) ([]*structs.Evaluation, error) {
	iter, err := snap.Jobs(nil, structs.AllNamespaces)
	if err != nil {
		return nil, err
	}
	var evals []*structs.Evaluation
	for raw := iter.Next(); raw != nil; raw = iter.Next() {
		job := raw.(*structs.Job)
		if job.Type != structs.JobTypeSystem || job.Stop {
			continue
		}
		evals = append(evals, newJobEval(job, nodeID, structs.EvalTriggerNodeUpdate, now))
	}
	return evals, nil
}

func evalIDs(evals []*structs.Evaluation) []string {
	ids := make([]string, 0, len(evals))
	for _, e := range evals {
		ids = append(ids, e.ID)
	}
	return ids
}
