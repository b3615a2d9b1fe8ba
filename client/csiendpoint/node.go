package csiendpoint

import (
	"context"

	"github.com/berth-io/berth/client/pluginmanager/csimanager"
	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/plugins/csi"
)

// Node is the CSINode endpoint: node-side CSI work the servers ask for.
type Node struct{ session }

// NewNode returns the endpoint; its plugin calls run under ctx.
func NewNode(ctx context.Context, cfg Config) *Node {
	return &Node{session{ctx: ctx, cfg: cfg}}
}

// Detach unpublishes a volume for an alloc on this node: NodeUnpublish,
// and NodeUnstage for the node's last user of it. It refuses while this
// client runs the alloc and its tasks have not all exited: those tasks
// may be using the volume, and the alloc's own release follows their exit.
// A repeated Detach succeeds (unmounting is idempotent).
func (e *Node) Detach(args *structs.ClientCSINodeDetachRequest, _ *structs.ClientCSIControllerResponse) error {
	nodeID := e.cfg.NodeID
	if e.cfg.TasksRunning(args.AllocID) {
		return structs.WireError(structs.NewError(structs.CodeNotReady,
			"alloc %s still runs on node %s: its client unpublishes volume %q once every task of it has exited",
			args.AllocID, nodeID, args.VolumeID))
	}
	vm, ok := e.cfg.Plugins.NodePlugin(args.PluginID)
	if !ok {
		return structs.WireError(structs.NewError(structs.CodeRetryable,
			"node %s cannot unpublish volume %q for alloc %s: its CSI node plugin %q is not running or not ready",
			nodeID, args.VolumeID, args.AllocID, args.PluginID))
	}
	ctx, cancel := e.callCtx()
	defer cancel()
	usage := &csimanager.UsageOptions{ReadOnly: args.ReadOnly, AttachmentMode: args.AttachmentMode, AccessMode: args.AccessMode}
	ref := csimanager.VolumeRef{Namespace: args.Namespace, ID: args.VolumeID, ExternalID: args.ExternalID}
	if err := vm.UnmountVolume(ctx, ref, args.AllocID, usage); err != nil {
		return structs.WireError(structs.NewError(csi.ServerCode(err), "node %s: %v", nodeID, err))
	}
	e.cfg.Logger.Info("unpublished a volume at the servers' request", "volume_id", args.VolumeID, "alloc_id", args.AllocID)
	return nil
}
