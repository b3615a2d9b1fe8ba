package nomad

import (
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
