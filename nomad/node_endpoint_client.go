package nomad

import (
	"crypto/subtle"
	"fmt"
	"time"

	"github.com/hashicorp/go-memdb"

	"github.com/berth-io/berth/helper/groupcommit"
	"github.com/berth-io/berth/nomad/leader"
	"github.com/berth-io/berth/nomad/state"
	"github.com/berth-io/berth/nomad/structs"
)

// The RPCs clients call on their servers: heartbeats, watching their
// allocs, and reporting alloc status.

// UpdateStatus is the client's heartbeat: it sets the node's status
// (usually ready), resets the node's heartbeat deadline on the leader, and
// replies with the TTL within which the client must heartbeat again and
// the servers' addresses. A status change goes through Raft; a node going
// down (a client shutting down) carries one eval per job with live allocs
// on it in the same entry. An unchanged status writes nothing.
func (n *NodeEndpoint) UpdateStatus(args *structs.NodeUpdateStatusRequest, reply *structs.NodeUpdateResponse) (err error) {
	defer wire(&err)
	defer measureRPC("Node.UpdateStatus", time.Now())
	if done, err := n.srv.forward("Node.UpdateStatus", args, args, reply); done {
		return err
	}
	if args.NodeID == "" {
		return structs.NewError(structs.CodeInvalid, "node status update: missing node ID")
	}
	switch args.Status {
	case structs.NodeStatusInit, structs.NodeStatusReady, structs.NodeStatusDown:
	default:
		return structs.NewError(structs.CodeInvalid, "node %q status update: invalid status %q (want %s, %s or %s)",
			args.NodeID, args.Status, structs.NodeStatusInit, structs.NodeStatusReady, structs.NodeStatusDown)
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
		return structs.NewError(structs.CodeNotFound, "node %q is not registered; register it first", args.NodeID)
	}
	reply.Index = node.ModifyIndex
	if node.Status != args.Status {
		req := &structs.NodeUpdateStatusRequest{
			NodeID:       args.NodeID,
			Status:       args.Status,
			Description:  args.Description,
			Timestamp:    time.Now().UnixNano(),
			WriteRequest: args.WriteRequest,
		}
		if args.Status == structs.NodeStatusDown {
			if req.Evals, err = leader.LiveAllocJobEvals(snap, []string{node.ID}, structs.EvalTriggerNodeUpdate, req.Timestamp); err != nil {
				return err
			}
		}
		_, index, err := n.srv.raftApply(structs.NodeUpdateStatusRequestType, req)
		if err != nil {
			return fmt.Errorf("updating status of node %q: %w", args.NodeID, err)
		}
		reply.Index = index
		reply.EvalIDs = evalIDs(req.Evals)
	}
	if sc := n.srv.sched.Load(); sc != nil {
		if args.Status == structs.NodeStatusDown {
			sc.term.ForgetNode(args.NodeID)
		} else {
			sc.term.Heartbeat(args.NodeID)
		}
	}
	reply.HeartbeatTTL = n.srv.config.HeartbeatTTL
	reply.Servers = n.srv.serverAddrs()
	return nil
}

// serverAddrs lists the RPC addresses of the Raft servers.
func (s *Server) serverAddrs() []string {
	f := s.raft.GetConfiguration()
	if f.Error() != nil {
		return nil
	}
	var out []string
	for _, srv := range f.Configuration().Servers {
		out = append(out, string(srv.Address))
	}
	return out
}

// GetClientAllocs returns every alloc placed on the node, in full (with
// its job), to the node's own client: the request must carry the node's
// SecretID (CodePermissionDenied otherwise). It blocks, as a query with
// MinQueryIndex, until an alloc of the node changes. The reply's index is
// the highest ModifyIndex of the node's allocs, so writes to other nodes'
// allocs never wake the client.
func (n *NodeEndpoint) GetClientAllocs(args *structs.NodeSpecificRequest, reply *structs.NodeAllocsResponse) (err error) {
	defer wire(&err)
	defer measureRPC("Node.GetClientAllocs", time.Now())
	if done, err := n.srv.forward("Node.GetClientAllocs", args, args, reply); done {
		return err
	}
	if args.NodeID == "" {
		return structs.NewError(structs.CodeInvalid, "client allocs: missing node ID")
	}
	return n.srv.blockingRPC(&args.QueryOptions, &reply.QueryMeta, func(ws memdb.WatchSet, snap *state.StateSnapshot) (uint64, error) {
		node, err := snap.NodeByID(nil, args.NodeID)
		if err != nil {
			return 0, err
		}
		if node == nil {
			return 0, structs.NewError(structs.CodeNotFound, "node %q is not registered", args.NodeID)
		}
		if args.SecretID == "" || subtle.ConstantTimeCompare([]byte(node.SecretID), []byte(args.SecretID)) != 1 {
			return 0, structs.NewError(structs.CodePermissionDenied, "node %q: secret ID does not match", args.NodeID)
		}
		allocs, err := snap.AllocsByNode(ws, args.NodeID)
		if err != nil {
			return 0, err
		}
		var index uint64
		reply.Allocs, index = clientAllocs(allocs, args.MinQueryIndex)
		return index, nil
	})
}

// clientAllocs is the reply to a client that already holds what the
// servers had at index since (its last reply's index; 0 for none). An
// alloc that ended and whose server-side fields did not change since is
// sent as a stub: ID, indexes and statuses, which is all the client reads
// of it (it ignores an unknown alloc that ended, and acts on a known one
// only when AllocModifyIndex grew). The rest is a deep copy, as before.
// The stubs spare copying (and, remotely, encoding) every stopped alloc
// kept until GC at each wake, which put the node's history on the path
// of every new alloc to its client.
func clientAllocs(allocs []*structs.Allocation, since uint64) ([]*structs.Allocation, uint64) {
	out := make([]*structs.Allocation, 0, len(allocs))
	var index uint64
	for _, a := range allocs {
		index = max(index, a.ModifyIndex)
		if since > 0 && a.AllocModifyIndex <= since && a.TerminalStatus() {
			out = append(out, &structs.Allocation{
				ID: a.ID, Namespace: a.Namespace, NodeID: a.NodeID, JobID: a.JobID, Name: a.Name,
				DesiredStatus: a.DesiredStatus, ClientStatus: a.ClientStatus,
				CreateIndex: a.CreateIndex, ModifyIndex: a.ModifyIndex, AllocModifyIndex: a.AllocModifyIndex,
			})
			continue
		}
		out = append(out, a.Copy())
	}
	return out, index
}

// UpdateAlloc records what clients report about their allocs — client
// status and description, task states, TasksExited — for a batch of
// allocs in one Raft entry. Fields the servers own are ignored; unknown
// allocs are skipped. An alloc that newly failed gets its job an eval
// (alloc-failure) in the same entry, so the scheduler reschedules it per
// the group's reschedule policy; system jobs are not rescheduled.
func (n *NodeEndpoint) UpdateAlloc(args *structs.AllocUpdateRequest, reply *structs.GenericResponse) (err error) {
	defer wire(&err)
	defer measureRPC("Node.UpdateAlloc", time.Now())
	if done, err := n.srv.forward("Node.UpdateAlloc", args, args, reply); done {
		return err
	}
	if len(args.Alloc) == 0 {
		return structs.NewError(structs.CodeInvalid, "alloc update: no allocs")
	}
	snap, err := n.srv.State().Snapshot()
	if err != nil {
		return err
	}
	now := time.Now().UnixNano()
	req := &structs.AllocUpdateRequest{Timestamp: now, WriteRequest: args.WriteRequest}
	evalFor := map[jobKey]bool{}
	for _, u := range args.Alloc {
		if u == nil || u.ID == "" {
			return structs.NewError(structs.CodeInvalid, "alloc update: alloc without ID")
		}
		// Only the fields the client owns; copy them, never keep the
		// caller's objects.
		c := &structs.Allocation{
			ID:                u.ID,
			ClientStatus:      u.ClientStatus,
			ClientDescription: u.ClientDescription,
			TasksExited:       u.TasksExited,
			ModifyTime:        now,
		}
		if u.TaskStates != nil {
			c.TaskStates = make(map[string]*structs.TaskState, len(u.TaskStates))
			for name, ts := range u.TaskStates {
				c.TaskStates[name] = ts.Copy()
			}
		}
		req.Alloc = append(req.Alloc, c)

		stored, err := snap.AllocByID(nil, u.ID)
		if err != nil {
			return err
		}
		if stored == nil || u.ClientStatus != structs.AllocClientStatusFailed ||
			stored.ClientStatus == structs.AllocClientStatusFailed || stored.DesiredStatus != structs.AllocDesiredStatusRun {
			continue
		}
		key := jobKey{stored.Namespace, stored.JobID}
		if evalFor[key] {
			continue
		}
		job, err := snap.JobByID(nil, stored.Namespace, stored.JobID)
		if err != nil {
			return err
		}
		if job == nil || job.Stop || job.Type == structs.JobTypeSystem {
			continue
		}
		evalFor[key] = true
		req.Evals = append(req.Evals, newJobEval(job, stored.NodeID, structs.EvalTriggerRetryFailedAlloc, now))
	}
	r := n.srv.allocUpdates.Do(req)
	if r.Err != nil {
		return fmt.Errorf("updating %d allocs: %w", len(req.Alloc), r.Err)
	}
	reply.Index = r.Index
	return nil
}

// Bounds of one group commit of alloc updates. An update is the client's
// fields of one alloc (its task states with their last events): a few KB
// at most, so 1,024 keep an entry far below maxEntrySize.
const (
	maxAllocUpdateRequests = 512
	maxAllocUpdateAllocs   = 1024
)

// newAllocUpdates group-commits Node.UpdateAlloc: the updates of every
// node that reports while an entry is in flight go out together as the
// next entry, of the same type as one node's (every server version applies
// it), and each caller is answered once that entry committed. Each node
// sends one batch at a time, and nodes report disjoint allocs, so the
// merged entry applies what the separate ones would have, in one
// transaction: it stands or fails whole, and a caller whose entry failed
// resends, as it would have.
func newAllocUpdates(s *Server) *groupcommit.Batcher[*structs.AllocUpdateRequest] {
	return groupcommit.New(s.commitAllocUpdates,
		func(r *structs.AllocUpdateRequest) int { return len(r.Alloc) },
		groupcommit.Limits{MaxRequests: maxAllocUpdateRequests, MaxWeight: maxAllocUpdateAllocs})
}

func (s *Server) commitAllocUpdates(reqs []*structs.AllocUpdateRequest) []groupcommit.Result {
	req := reqs[0]
	if len(reqs) > 1 {
		req = &structs.AllocUpdateRequest{Timestamp: time.Now().UnixNano(), WriteRequest: reqs[0].WriteRequest}
		for _, r := range reqs {
			req.Alloc = append(req.Alloc, r.Alloc...)
			req.Evals = append(req.Evals, r.Evals...)
		}
	}
	_, index, err := s.raftApply(structs.AllocClientUpdateRequestType, req)
	out := make([]groupcommit.Result, len(reqs))
	for i := range out {
		out[i] = groupcommit.Result{Index: index, Err: err}
	}
	return out
}

// jobKey names a job across namespaces.
type jobKey struct{ ns, id string }
