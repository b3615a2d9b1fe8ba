package nomad

import (
	"time"

	"github.com/hashicorp/go-memdb"

	"github.com/berth-io/berth/nomad/state"
	"github.com/berth-io/berth/nomad/structs"
)

// CSIPluginEndpoint reads CSI plugins ("CSIPlugin.*"). Plugins are derived
// from node fingerprints; nothing registers one directly.
type CSIPluginEndpoint struct {
	srv *Server
}

// Get reads one plugin by ID or unique ID prefix, with every controller
// and node instance; reply.Plugin is nil when there is none.
func (p *CSIPluginEndpoint) Get(args *structs.CSIPluginGetRequest, reply *structs.CSIPluginGetResponse) (err error) {
	defer wire(&err)
	defer measureRPC("CSIPlugin.Get", time.Now())
	if done, err := p.srv.forward("CSIPlugin.Get", args, args, reply); done {
		return err
	}
	if args.ID == "" {
		return structs.NewError(structs.CodeInvalid, "plugin read: missing plugin ID")
	}
	return p.srv.blockingRPC(&args.QueryOptions, &reply.QueryMeta, func(ws memdb.WatchSet, snap *state.StateSnapshot) (uint64, error) {
		plug, err := lookupExact("plugin", args.ID,
			func() (*structs.CSIPlugin, error) { return snap.CSIPluginByID(ws, args.ID) },
			func() (memdb.ResultIterator, error) { return snap.CSIPluginsByIDPrefix(ws, args.ID) },
			func(p *structs.CSIPlugin) string { return p.ID })
		if err != nil {
			return 0, err
		}
		reply.Plugin = plug.Copy()
		if plug != nil {
			return plug.ModifyIndex, nil
		}
		return snap.Index(state.TableCSIPlugins)
	})
}

// List lists plugins by ID prefix, one page at a time, filtered over the
// list stubs.
func (p *CSIPluginEndpoint) List(args *structs.GenericRequest, reply *structs.CSIPluginListResponse) (err error) {
	defer wire(&err)
	defer measureRPC("CSIPlugin.List", time.Now())
	if done, err := p.srv.forward("CSIPlugin.List", args, args, reply); done {
		return err
	}
	return p.srv.blockingRPC(&args.QueryOptions, &reply.QueryMeta, func(ws memdb.WatchSet, snap *state.StateSnapshot) (uint64, error) {
		iter, err := snap.CSIPluginsByIDPrefix(ws, args.Prefix)
		if err != nil {
			return 0, err
		}
		pg, err := paginate(iter, &args.QueryOptions,
			func(p *structs.CSIPlugin) pageKey { return idKey(p.ID) },
			(*structs.CSIPlugin).Stub)
		if err != nil {
			return 0, err
		}
		reply.Plugins, reply.NextToken = pg.Items, pg.NextToken
		return snap.Index(state.TableCSIPlugins)
	})
}
