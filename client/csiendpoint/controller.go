package csiendpoint

import (
	"context"
	"maps"
	"time"

	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/plugins/csi"
)

// Controller is the CSIController endpoint: controller RPCs for the
// servers, through this node's controller plugin instances. Every method
// is as idempotent as the CSI RPC it makes.
type Controller struct{ session }

// NewController returns the endpoint; its plugin calls run under ctx.
func NewController(ctx context.Context, cfg Config) *Controller {
	return &Controller{session{ctx: ctx, cfg: cfg}}
}

// controller returns the plugin's controller client, or a retryable error
// (the servers then try another node) when it does not run here.
func (e *Controller) controller(r *structs.ClientCSIControllerRequest) (csi.Client, error) {
	cl, err := e.cfg.Plugins.ControllerClient(r.PluginID)
	if err != nil {
		return nil, structs.WireError(structs.NewError(structs.CodeRetryable, "node %s: %v", e.cfg.NodeID, err))
	}
	return cl, nil
}

// failed codes a plugin's error for the servers (csi.ServerCode).
func (e *Controller) failed(op string, r *structs.ClientCSIControllerRequest, err error) error {
	return structs.WireError(structs.NewError(csi.ServerCode(err), "%s of volume %q by plugin %q on node %s: %v",
		op, r.VolumeID, r.PluginID, e.cfg.NodeID, err))
}

// untilDeadline is the context of a controller call the servers bounded
// with deadline (Unix nanoseconds; 0: only the endpoint's own timeout).
// A deadline already past is a retryable error naming the call (what is
// a format of the volume ID and the external node ID).
func (e *Controller) untilDeadline(what string, r *structs.ClientCSIControllerRequest, extNode string, deadline int64) (context.Context, context.CancelFunc, error) {
	ctx, cancel := e.callCtx()
	if deadline <= 0 {
		return ctx, cancel, nil
	}
	d := time.Unix(0, deadline)
	if !time.Now().Before(d) {
		cancel()
		return nil, nil, structs.WireError(structs.NewError(structs.CodeRetryable,
			what+": the servers' deadline %s passed before node %s got the request; retry",
			r.VolumeID, extNode, d.UTC().Format(time.RFC3339Nano), e.cfg.NodeID))
	}
	ctx, cancelDeadline := context.WithDeadline(ctx, d)
	return ctx, func() { cancelDeadline(); cancel() }, nil
}

// Publish runs ControllerPublishVolume.
func (e *Controller) Publish(args *structs.ClientCSIControllerPublishRequest, reply *structs.ClientCSIControllerPublishResponse) error {
	cl, err := e.controller(&args.ClientCSIControllerRequest)
	if err != nil {
		return err
	}
	// The servers wait this deadline out before they unpublish
	// (claims.Next): a publish must not land after it, retries included,
	// even when the server that asked gave up long ago.
	ctx, cancel, err := e.untilDeadline("ControllerPublish of volume %q to node %s", &args.ClientCSIControllerRequest, args.ExternalNodeID, args.Deadline)
	if err != nil {
		return err
	}
	defer cancel()
	resp, err := cl.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{
		ExternalID:       args.ExternalID,
		NodeID:           args.ExternalNodeID,
		ReadOnly:         args.ReadOnly,
		VolumeCapability: csi.CapabilityFor(args.AccessMode, args.AttachmentMode, args.MountOptions),
		Secrets:          args.Secrets,
		VolumeContext:    args.VolumeContext,
	})
	if err != nil {
		return e.failed("ControllerPublish to node "+args.ExternalNodeID, &args.ClientCSIControllerRequest, err)
	}
	reply.PublishContext = maps.Clone(resp.PublishContext)
	return nil
}

// Unpublish runs ControllerUnpublishVolume; a volume not attached there
// is a success (the csi client maps NotFound to nil). Like Publish, it
// ends at the servers' Deadline, retries included.
func (e *Controller) Unpublish(args *structs.ClientCSIControllerUnpublishRequest, _ *structs.ClientCSIControllerResponse) error {
	cl, err := e.controller(&args.ClientCSIControllerRequest)
	if err != nil {
		return err
	}
	// A server that stopped waiting holds every controller call to the
	// node until this deadline (csiControllers.ControllerUnpublish): an
	// unpublish, retries included, must not land after it, on top of a
	// publish to that node for a later claim (seed 4060).
	ctx, cancel, err := e.untilDeadline("ControllerUnpublish of volume %q from node %s", &args.ClientCSIControllerRequest, args.ExternalNodeID, args.Deadline)
	if err != nil {
		return err
	}
	defer cancel()
	err = cl.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{
		ExternalID: args.ExternalID, NodeID: args.ExternalNodeID, Secrets: args.Secrets,
	})
	if err != nil {
		return e.failed("ControllerUnpublish from node "+args.ExternalNodeID, &args.ClientCSIControllerRequest, err)
	}
	return nil
}

// Validate runs ValidateVolumeCapabilities.
func (e *Controller) Validate(args *structs.ClientCSIControllerValidateRequest, _ *structs.ClientCSIControllerResponse) error {
	cl, err := e.controller(&args.ClientCSIControllerRequest)
	if err != nil {
		return err
	}
	ctx, cancel := e.callCtx()
	defer cancel()
	err = cl.ControllerValidateCapabilities(ctx, &csi.ControllerValidateVolumeRequest{
		ExternalID:    args.ExternalID,
		Capabilities:  csi.CapabilitiesFor(args.Capabilities, args.MountOptions),
		VolumeContext: args.VolumeContext,
		Parameters:    args.Parameters,
		Secrets:       args.Secrets,
	})
	if err != nil {
		return e.failed("ValidateVolumeCapabilities", &args.ClientCSIControllerRequest, err)
	}
	return nil
}

// Create runs CreateVolume.
func (e *Controller) Create(args *structs.ClientCSIControllerCreateRequest, reply *structs.ClientCSIControllerCreateResponse) error {
	cl, err := e.controller(&args.ClientCSIControllerRequest)
	if err != nil {
		return err
	}
	req := &csi.ControllerCreateVolumeRequest{
		Name:                      args.Name,
		Capabilities:              csi.CapabilitiesFor(args.Capabilities, args.MountOptions),
		Parameters:                args.Parameters,
		MutableParameters:         args.MutableParameters,
		Secrets:                   args.Secrets,
		AccessibilityRequirements: args.RequestedTopologies,
	}
	if args.CapacityMin > 0 || args.CapacityMax > 0 {
		req.CapacityRange = &csi.CapacityRange{RequiredBytes: args.CapacityMin, LimitBytes: args.CapacityMax}
	}
	if args.SnapshotID != "" || args.CloneID != "" {
		req.ContentSource = &csi.VolumeContentSource{SnapshotID: args.SnapshotID, CloneID: args.CloneID}
	}
	ctx, cancel := e.callCtx()
	defer cancel()
	vol, err := cl.ControllerCreateVolume(ctx, req)
	if err != nil {
		return e.failed("CreateVolume", &args.ClientCSIControllerRequest, err)
	}
	if vol == nil || vol.ExternalID == "" {
		return structs.WireError(structs.NewError(structs.CodeInvalid,
			"CreateVolume of volume %q by plugin %q returned no volume ID", args.VolumeID, args.PluginID))
	}
	reply.ExternalID = vol.ExternalID
	reply.CapacityBytes = vol.CapacityBytes
	reply.VolumeContext = maps.Clone(vol.VolumeContext)
	reply.Topologies = vol.AccessibleTopology
	return nil
}

// Delete runs DeleteVolume; a volume already gone is a success.
func (e *Controller) Delete(args *structs.ClientCSIControllerDeleteRequest, _ *structs.ClientCSIControllerResponse) error {
	cl, err := e.controller(&args.ClientCSIControllerRequest)
	if err != nil {
		return err
	}
	ctx, cancel := e.callCtx()
	defer cancel()
	if err := cl.ControllerDeleteVolume(ctx, &csi.ControllerDeleteVolumeRequest{ExternalID: args.ExternalID, Secrets: args.Secrets}); err != nil {
		return e.failed("DeleteVolume", &args.ClientCSIControllerRequest, err)
	}
	return nil
}

// CreateSnapshot runs CreateSnapshot of volume ExternalID under Name (the
// idempotency key: the same name gives the same snapshot).
func (e *Controller) CreateSnapshot(args *structs.ClientCSIControllerSnapshotRequest, reply *structs.ClientCSIControllerSnapshotResponse) error {
	cl, err := e.controller(&args.ClientCSIControllerRequest)
	if err != nil {
		return err
	}
	ctx, cancel := e.callCtx()
	defer cancel()
	snap, err := cl.ControllerCreateSnapshot(ctx, &csi.ControllerCreateSnapshotRequest{
		SourceVolumeID: args.ExternalID, Name: args.Name, Secrets: args.Secrets, Parameters: args.Parameters,
	})
	if err != nil {
		return e.failed("CreateSnapshot", &args.ClientCSIControllerRequest, err)
	}
	reply.Snapshots = []*structs.CSISnapshot{snapshotOf(snap, args.PluginID)}
	return nil
}

// DeleteSnapshot runs DeleteSnapshot; a snapshot already gone is a
// success.
func (e *Controller) DeleteSnapshot(args *structs.ClientCSIControllerSnapshotRequest, _ *structs.ClientCSIControllerResponse) error {
	cl, err := e.controller(&args.ClientCSIControllerRequest)
	if err != nil {
		return err
	}
	ctx, cancel := e.callCtx()
	defer cancel()
	if err := cl.ControllerDeleteSnapshot(ctx, &csi.ControllerDeleteSnapshotRequest{SnapshotID: args.SnapshotID, Secrets: args.Secrets}); err != nil {
		return e.failed("DeleteSnapshot "+args.SnapshotID, &args.ClientCSIControllerRequest, err)
	}
	return nil
}

// ListSnapshots runs ListSnapshots for one page.
func (e *Controller) ListSnapshots(args *structs.ClientCSIControllerSnapshotRequest, reply *structs.ClientCSIControllerSnapshotResponse) error {
	cl, err := e.controller(&args.ClientCSIControllerRequest)
	if err != nil {
		return err
	}
	ctx, cancel := e.callCtx()
	defer cancel()
	page, err := cl.ControllerListSnapshots(ctx, &csi.ControllerListSnapshotsRequest{
		MaxEntries: args.MaxEntries, StartingToken: args.StartingToken, Secrets: args.Secrets,
	})
	if err != nil {
		return e.failed("ListSnapshots", &args.ClientCSIControllerRequest, err)
	}
	for _, s := range page.Entries {
		reply.Snapshots = append(reply.Snapshots, snapshotOf(s, args.PluginID))
	}
	reply.NextToken = page.NextToken
	return nil
}

func snapshotOf(s *csi.Snapshot, pluginID string) *structs.CSISnapshot {
	out := &structs.CSISnapshot{ID: s.ID, ExternalSourceVolumeID: s.SourceVolumeID, PluginID: pluginID,
		SizeBytes: s.SizeBytes, IsReady: s.ReadyToUse}
	if !s.CreateTime.IsZero() {
		out.CreateTime = s.CreateTime.Unix()
	}
	return out
}

// Modify runs ControllerModifyVolume.
func (e *Controller) Modify(args *structs.ClientCSIControllerModifyRequest, _ *structs.ClientCSIControllerResponse) error {
	cl, err := e.controller(&args.ClientCSIControllerRequest)
	if err != nil {
		return err
	}
	ctx, cancel := e.callCtx()
	defer cancel()
	err = cl.ControllerModifyVolume(ctx, &csi.ControllerModifyVolumeRequest{
		ExternalID: args.ExternalID, Secrets: args.Secrets, MutableParameters: args.MutableParameters,
	})
	if err != nil {
		return e.failed("ControllerModifyVolume", &args.ClientCSIControllerRequest, err)
	}
	return nil
}

// Expand runs ControllerExpandVolume.
func (e *Controller) Expand(args *structs.ClientCSIControllerExpandRequest, reply *structs.ClientCSIControllerExpandResponse) error {
	cl, err := e.controller(&args.ClientCSIControllerRequest)
	if err != nil {
		return err
	}
	req := &csi.ControllerExpandVolumeRequest{
		ExternalID:    args.ExternalID,
		CapacityRange: &csi.CapacityRange{RequiredBytes: args.CapacityMin, LimitBytes: args.CapacityMax},
		Secrets:       args.Secrets,
	}
	if c := args.Capability; c != nil {
		req.VolumeCapability = csi.CapabilityFor(c.AccessMode, c.AttachmentMode, nil)
	}
	ctx, cancel := e.callCtx()
	defer cancel()
	resp, err := cl.ControllerExpandVolume(ctx, req)
	if err != nil {
		return e.failed("ControllerExpandVolume", &args.ClientCSIControllerRequest, err)
	}
	reply.CapacityBytes = resp.CapacityBytes
	reply.NodeExpansionRequired = resp.NodeExpansionRequired
	return nil
}
