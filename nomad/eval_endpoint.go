package nomad

import (
	"time"

	"github.com/hashicorp/go-memdb"

	"github.com/berth-io/berth/nomad/acl"
	"github.com/berth-io/berth/nomad/state"
	"github.com/berth-io/berth/nomad/structs"
)

// EvalEndpoint reads evaluations ("Eval.*"). The eval broker's RPCs
// (dequeue, ack, update) live with the scheduler.
type EvalEndpoint struct {
	srv *Server
}

// GetEval reads one evaluation by ID or unique ID prefix (in any
// namespace); reply.Eval is nil when there is none.
func (e *EvalEndpoint) GetEval(args *structs.EvalSpecificRequest, reply *structs.SingleEvalResponse) (err error) {
	defer wire(&err)
	defer measureRPC("Eval.GetEval", time.Now())
	if done, err := e.srv.forward("Eval.GetEval", args, args, reply); done {
		return err
	}
	if args.EvalID == "" {
		return structs.NewError(structs.CodeInvalid, "eval read: missing eval ID")
	}
	return e.srv.blockingRPC(&args.QueryOptions, &reply.QueryMeta, func(ws memdb.WatchSet, snap *state.StateSnapshot) (uint64, error) {
		eval, err := lookupExact("eval", args.EvalID,
			func() (*structs.Evaluation, error) { return snap.EvalByID(ws, args.EvalID) },
			func() (memdb.ResultIterator, error) {
				return snap.EvalsByIDPrefix(ws, structs.AllNamespaces, args.EvalID)
			},
			func(e *structs.Evaluation) string { return e.ID })
		if err == nil && eval != nil {
			err = e.srv.readableIn(&args.QueryOptions, acl.CapReadJob, eval.Namespace)
		}
		if err != nil {
			return 0, err
		}
		reply.Eval = eval.Copy()
		if eval != nil {
			return eval.ModifyIndex, nil
		}
		return snap.Index(state.TableEvals)
	})
}

// List lists the evaluations of a namespace ("*" for all), by ID prefix,
// one page at a time, filtered over the evaluations themselves.
func (e *EvalEndpoint) List(args *structs.GenericRequest, reply *structs.EvalListResponse) (err error) {
	defer wire(&err)
	defer measureRPC("Eval.List", time.Now())
	if done, err := e.srv.forward("Eval.List", args, args, reply); done {
		return err
	}
	ns := args.RequestNamespace()
	return e.srv.blockingRPC(&args.QueryOptions, &reply.QueryMeta, func(ws memdb.WatchSet, snap *state.StateSnapshot) (uint64, error) {
		iter, err := snap.EvalsByIDPrefix(ws, ns, args.Prefix)
		if err == nil {
			iter, err = visible(e.srv, &args.QueryOptions, acl.CapReadJob, iter, func(e *structs.Evaluation) string { return e.Namespace })
		}
		if err != nil {
			return 0, err
		}
		p, err := paginate(iter, &args.QueryOptions,
			func(e *structs.Evaluation) pageKey { return idKey(e.ID) },
			(*structs.Evaluation).Copy)
		if err != nil {
			return 0, err
		}
		reply.Evaluations, reply.NextToken = p.Items, p.NextToken
		return snap.Index(state.TableEvals)
	})
}
