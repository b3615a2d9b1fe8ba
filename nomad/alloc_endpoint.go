package nomad

import (
	"context"
	"fmt"
	"time"

	"github.com/hashicorp/go-memdb"

	"github.com/berth-io/berth/nomad/acl"
	"github.com/berth-io/berth/nomad/state"
	"github.com/berth-io/berth/nomad/structs"
)

// AllocEndpoint reads allocations ("Alloc.*"). Clients update theirs
// through Node.UpdateAlloc.
type AllocEndpoint struct {
	srv *Server
}

// GetAlloc reads one allocation by ID or unique ID prefix (in any
// namespace: alloc IDs are UUIDs); reply.Alloc is nil when there is none.
func (a *AllocEndpoint) GetAlloc(args *structs.AllocSpecificRequest, reply *structs.SingleAllocResponse) (err error) {
	defer wire(&err)
	defer measureRPC("Alloc.GetAlloc", time.Now())
	if done, err := a.srv.forward("Alloc.GetAlloc", args, args, reply); done {
		return err
	}
	if args.AllocID == "" {
		return structs.NewError(structs.CodeInvalid, "alloc read: missing alloc ID")
	}
	return a.srv.blockingRPC(&args.QueryOptions, &reply.QueryMeta, func(ws memdb.WatchSet, snap *state.StateSnapshot) (uint64, error) {
		alloc, err := lookupExact("alloc", args.AllocID,
			func() (*structs.Allocation, error) { return snap.AllocByID(ws, args.AllocID) },
			func() (memdb.ResultIterator, error) {
				return snap.AllocsByIDPrefix(ws, structs.AllNamespaces, args.AllocID)
			},
			func(a *structs.Allocation) string { return a.ID })
		if err == nil && alloc != nil {
			err = a.srv.readableIn(&args.QueryOptions, acl.CapReadJob, alloc.Namespace)
		}
		if err != nil {
			return 0, err
		}
		reply.Alloc = alloc.Copy()
		if alloc != nil {
			return alloc.ModifyIndex, nil
		}
		return snap.Index(state.TableAllocs)
	})
}

// List lists the allocations of a namespace ("*" for all), by ID prefix,
// one page at a time, filtered over the list stubs.
func (a *AllocEndpoint) List(args *structs.GenericRequest, reply *structs.AllocListResponse) (err error) {
	defer wire(&err)
	defer measureRPC("Alloc.List", time.Now())
	if done, err := a.srv.forward("Alloc.List", args, args, reply); done {
		return err
	}
	ns := args.RequestNamespace()
	return a.srv.blockingRPC(&args.QueryOptions, &reply.QueryMeta, func(ws memdb.WatchSet, snap *state.StateSnapshot) (uint64, error) {
		iter, err := snap.AllocsByIDPrefix(ws, ns, args.Prefix)
		if err == nil {
			iter, err = visible(a.srv, &args.QueryOptions, acl.CapReadJob, iter, func(a *structs.Allocation) string { return a.Namespace })
		}
		if err != nil {
			return 0, err
		}
		p, err := paginate(iter, &args.QueryOptions,
			func(a *structs.Allocation) pageKey { return idKey(a.ID) },
			(*structs.Allocation).Stub)
		if err != nil {
			return 0, err
		}
		reply.Allocations, reply.NextToken = p.Items, p.NextToken
		return snap.Index(state.TableAllocs)
	})
}

// Lifecycle: stop, restart and signal. Each needs alloc-lifecycle in the
// namespace of the alloc itself (looked up by exact ID), whatever
// namespace the request names.
//
//	Stop     Raft: the alloc desired-stopped plus an eval of its job, in
//	         one entry; the scheduler places a replacement
//	Restart  ┐ the leader calls the alloc's client over its node session
//	Signal   ┘ (ClientAlloc.*); the client trusts only that session

// lifecycleTimeout bounds a restart or signal call to the client.
const lifecycleTimeout = 30 * time.Second

// lifecycleAlloc finds the alloc a lifecycle request names and checks the
// caller's alloc-lifecycle in its namespace.
func (a *AllocEndpoint) lifecycleAlloc(op, id string, w *structs.WriteRequest) (*structs.Allocation, error) {
	if id == "" {
		return nil, structs.NewError(structs.CodeInvalid, "%s: missing alloc ID", op)
	}
	alloc, err := a.srv.State().AllocByID(nil, id)
	if err != nil {
		return nil, err
	}
	if alloc == nil {
		return nil, structs.NotFound("alloc", id)
	}
	q := &structs.QueryOptions{AuthToken: w.AuthToken}
	if err := a.srv.readableIn(q, acl.CapAllocLifecycle, alloc.Namespace); err != nil {
		return nil, err
	}
	return alloc, nil
}

// Stop stops an alloc and has the scheduler replace it.
func (a *AllocEndpoint) Stop(args *structs.AllocStopRequest, reply *structs.AllocStopResponse) (err error) {
	defer wire(&err)
	defer measureRPC(structs.MethodAllocStop, time.Now())
	if done, err := a.srv.forward(structs.MethodAllocStop, args, args, reply); done {
		return err
	}
	alloc, err := a.lifecycleAlloc("alloc stop", args.AllocID, &args.WriteRequest)
	if err != nil {
		return err
	}
	if alloc.Job == nil {
		return structs.NewError(structs.CodeInternal, "alloc stop: alloc %s carries no job", alloc.ID)
	}
	if alloc.TerminalStatus() {
		return structs.NewError(structs.CodeConflict,
			"alloc %s is already stopped or done (desired %s, client %s): nothing to stop", alloc.ID, alloc.DesiredStatus, alloc.ClientStatus)
	}
	now := time.Now().UnixNano()
	eval := newJobEval(alloc.Job, "", structs.EvalTriggerAllocStop, now)
	args.Eval, args.Timestamp = eval, now
	_, index, err := a.srv.raftApply(structs.AllocStopRequestType, args)
	if err != nil {
		return fmt.Errorf("stopping alloc %s: %w", alloc.ID, err)
	}
	reply.EvalID, reply.Index = eval.ID, index
	return nil
}

// Restart restarts tasks of a running alloc through its client.
func (a *AllocEndpoint) Restart(args *structs.AllocRestartRequest, reply *structs.GenericResponse) (err error) {
	defer wire(&err)
	defer measureRPC(structs.MethodAllocRestart, time.Now())
	if done, err := a.srv.forward(structs.MethodAllocRestart, args, args, reply); done {
		return err
	}
	alloc, err := a.lifecycleAlloc("alloc restart", args.AllocID, &args.WriteRequest)
	if err != nil {
		return err
	}
	if err := lifecycleRunning("restart", alloc); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), lifecycleTimeout)
	defer cancel()
	return a.srv.nodeRPC(ctx, alloc.NodeID, structs.MethodClientAllocRestart, args, reply)
}

// Signal signals tasks of a running alloc through its client.
func (a *AllocEndpoint) Signal(args *structs.AllocSignalRequest, reply *structs.GenericResponse) (err error) {
	defer wire(&err)
	defer measureRPC(structs.MethodAllocSignal, time.Now())
	if done, err := a.srv.forward(structs.MethodAllocSignal, args, args, reply); done {
		return err
	}
	alloc, err := a.lifecycleAlloc("alloc signal", args.AllocID, &args.WriteRequest)
	if err != nil {
		return err
	}
	if err := lifecycleRunning("signal", alloc); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), lifecycleTimeout)
	defer cancel()
	return a.srv.nodeRPC(ctx, alloc.NodeID, structs.MethodClientAllocSignal, args, reply)
}

// lifecycleRunning refuses a restart or signal of an alloc that ended.
func lifecycleRunning(op string, alloc *structs.Allocation) error {
	if alloc.TerminalStatus() {
		return structs.NewError(structs.CodeConflict,
			"cannot %s alloc %s: it is stopped or done (desired %s, client %s)", op, alloc.ID, alloc.DesiredStatus, alloc.ClientStatus)
	}
	return nil
}

// FS reads an alloc's directory through its client's node session, for an
// agent that does not run the alloc itself (alloc fs asked of a server).
// It needs read-fs in the alloc's namespace.
func (a *AllocEndpoint) FS(args *structs.AllocFSRequest, reply *structs.AllocFSResponse) (err error) {
	defer wire(&err)
	defer measureRPC(structs.MethodAllocFS, time.Now())
	// Only the leader holds node sessions: never answer from a follower.
	args.AllowStale = false
	if done, err := a.srv.forward(structs.MethodAllocFS, args, args, reply); done {
		return err
	}
	if args.AllocID == "" {
		return structs.NewError(structs.CodeInvalid, "alloc fs: missing alloc ID")
	}
	alloc, err := a.srv.State().AllocByID(nil, args.AllocID)
	if err != nil {
		return err
	}
	if alloc == nil {
		return structs.NotFound("alloc", args.AllocID)
	}
	if err := a.srv.readableIn(&args.QueryOptions, acl.CapReadFS, alloc.Namespace); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), lifecycleTimeout)
	defer cancel()
	return a.srv.nodeRPC(ctx, alloc.NodeID, structs.MethodClientAllocFS, args, reply)
}
