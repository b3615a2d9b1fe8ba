package nomad

import (
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
