package csiendpoint

import (
	"context"
	"errors"

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

// expander is a VolumeManager that can grow a published volume's file
// system (csimanager's can).
type expander interface {
	ExpandVolume(ctx context.Context, namespace, volumeID, externalID string, minBytes, maxBytes int64, secrets structs.CSISecrets) (int64, error)
}

// Expand grows a volume's file system on this node (NodeExpandVolume),
// after the controller grew the volume. A volume this node does not
// publish has nothing to expand: NotFound, which the servers record.
func (e *Node) Expand(args *structs.ClientCSINodeExpandRequest, reply *structs.ClientCSINodeExpandResponse) error {
	nodeID := e.cfg.NodeID
	vm, ok := e.cfg.Plugins.NodePlugin(args.PluginID)
	if !ok {
		return structs.WireError(structs.NewError(structs.CodeRetryable,
			"node %s cannot expand volume %q: its CSI node plugin %q is not running or not ready", nodeID, args.VolumeID, args.PluginID))
	}
	ex, ok := vm.(expander)
	if !ok {
		return structs.WireError(structs.NewError(structs.CodeUnsupported, "node %s cannot expand volume %q", nodeID, args.VolumeID))
	}
	ctx, cancel := e.callCtx()
	defer cancel()
	size, err := ex.ExpandVolume(ctx, args.Namespace, args.VolumeID, args.ExternalID, args.CapacityMin, args.CapacityMax, args.Secrets)
	if errors.Is(err, csimanager.ErrNotPublished) {
		return structs.WireError(structs.NewError(structs.CodeNotFound, "node %s: %v", nodeID, err))
	}
	if err != nil {
		return structs.WireError(structs.NewError(csi.ServerCode(err), "node %s: %v", nodeID, err))
	}
	reply.CapacityBytes = size
	e.cfg.Logger.Info("expanded a volume at the servers' request", "volume_id", args.VolumeID, "capacity_bytes", size)
	return nil
}
