package client

import (
	"context"
	"errors"
	"maps"
	"net"
	"net/rpc"
	"time"

	"github.com/berth-io/berth/client/pluginmanager/csimanager"
	"github.com/berth-io/berth/helper"
	"github.com/berth-io/berth/nomad/msgpack"
	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/plugins/csi"
)

// The node session is how the leader calls this client (for CSI controller
// RPCs): the client dials the leader and serves net/rpc on that connection
// (see nomad/node_session.go for why the roles are reversed). The client
// keeps one session open while it runs, redialling with backoff whenever it
// breaks, e.g. when leadership moves.

// SessionDialer is an RPCer that can open a node session to the leader.
// Without it the client serves no session and the servers cannot reach
// its controller plugins.
type SessionDialer interface {
	DialNodeSession(ctx context.Context) (net.Conn, error)
}

// nodeSessionBackoff paces redials of a failed or broken session.
var nodeSessionBackoff = helper.Backoff{Base: 100 * time.Millisecond, Max: 5 * time.Second}

// csiControllerTimeout bounds one controller call made for the servers;
// the servers' own timeout does not cross the session.
const csiControllerTimeout = 2 * time.Minute

// nodeSessionLoop keeps a node session open until ctx ends.
func (c *Client) nodeSessionLoop(ctx context.Context) {
	dialer, ok := c.cfg.RPC.(SessionDialer)
	if !ok {
		c.logger.Debug("the RPC transport cannot open node sessions: the servers cannot reach this node's CSI controllers")
		return
	}
	select {
	case <-c.registered: // the servers check the session against the node
	case <-ctx.Done():
		return
	}
	srv := rpc.NewServer()
	if err := srv.RegisterName("NodeSession", &nodeSessionEndpoint{c: c}); err != nil {
		c.logger.Error("node session: registering endpoint", "error", err)
		return
	}
	if err := srv.RegisterName("CSIController", &csiControllerEndpoint{c: c, ctx: ctx}); err != nil {
		c.logger.Error("node session: registering endpoint", "error", err)
		return
	}
	if err := srv.RegisterName("CSINode", &csiNodeEndpoint{c: c, ctx: ctx}); err != nil {
		c.logger.Error("node session: registering endpoint", "error", err)
		return
	}
	attempt := 0
	for ctx.Err() == nil {
		conn, err := dialer.DialNodeSession(ctx)
		if err == nil {
			start := time.Now()
			c.serveNodeSession(ctx, srv, conn)
			if time.Since(start) > 10*time.Second {
				attempt = 0 // a session that lived was no failure
			}
		} else if ctx.Err() == nil {
			c.logger.Debug("node session: dialling the leader", "error", err)
		}
		t := time.NewTimer(nodeSessionBackoff.Delay(attempt))
		attempt++
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
}

// serveNodeSession serves conn until it breaks or ctx ends.
func (c *Client) serveNodeSession(ctx context.Context, srv *rpc.Server, conn net.Conn) {
	codec := msgpack.NewRPCCodec(conn)
	stop := context.AfterFunc(ctx, func() { codec.Close() })
	defer stop()
	srv.ServeCodec(codec) // returns when the connection closes
}

// nodeSessionEndpoint is the session's NodeSession endpoint.
type nodeSessionEndpoint struct{ c *Client }

// Identify names this node and proves it with the node's secret.
func (e *nodeSessionEndpoint) Identify(_ *structs.NodeSessionIdentifyRequest, reply *structs.NodeSessionIdentity) error {
	reply.NodeID = e.c.NodeID()
	reply.SecretID = e.c.nodeSecret()
	return nil
}

// csiControllerEndpoint runs CSI controller RPCs for the servers through
// this node's controller plugin instances.
type csiControllerEndpoint struct {
	c   *Client
	ctx context.Context
}

// controller returns the plugin's controller client, or a retryable error
// (the servers then try another node) when it does not run here.
func (e *csiControllerEndpoint) controller(r *structs.ClientCSIControllerRequest) (csi.Client, error) {
	cl, err := e.c.csi.ControllerClient(r.PluginID)
	if err != nil {
		return nil, structs.WireError(structs.NewError(structs.CodeRetryable, "node %s: %v", e.c.NodeID(), err))
	}
	return cl, nil
}

// controllerErr codes a plugin's error for the servers: retryable errors
// stay retryable, others are final (invalid).
func (e *csiControllerEndpoint) controllerErr(op string, r *structs.ClientCSIControllerRequest, err error) error {
	code := structs.CodeInvalid
	if errors.Is(err, csi.ErrRetryable) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		code = structs.CodeRetryable
	}
	return structs.WireError(structs.NewError(code, "%s of volume %q by plugin %q on node %s: %v",
		op, r.VolumeID, r.PluginID, e.c.NodeID(), err))
}

func (e *csiControllerEndpoint) callCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(e.ctx, csiControllerTimeout)
}

// Publish runs ControllerPublishVolume.
func (e *csiControllerEndpoint) Publish(args *structs.ClientCSIControllerPublishRequest, reply *structs.ClientCSIControllerPublishResponse) error {
	cl, err := e.controller(&args.ClientCSIControllerRequest)
	if err != nil {
		return err
	}
	ctx, cancel := e.callCtx()
	defer cancel()
	resp, err := cl.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{
		ExternalID: args.ExternalID,
		NodeID:     args.ExternalNodeID,
		ReadOnly:   args.ReadOnly,
		VolumeCapability: &csi.VolumeCapability{
			AccessMode: args.AccessMode, AttachmentMode: args.AttachmentMode, MountOptions: fsMountOptions(args.AttachmentMode, args.MountOptions),
		},
		Secrets:       args.Secrets,
		VolumeContext: args.VolumeContext,
	})
	if err != nil {
		return e.controllerErr("ControllerPublish to node "+args.ExternalNodeID, &args.ClientCSIControllerRequest, err)
	}
	reply.PublishContext = maps.Clone(resp.PublishContext)
	return nil
}

// Unpublish runs ControllerUnpublishVolume; a volume not attached there
// is a success (the csi client maps NotFound to nil).
func (e *csiControllerEndpoint) Unpublish(args *structs.ClientCSIControllerUnpublishRequest, _ *structs.ClientCSIControllerResponse) error {
	cl, err := e.controller(&args.ClientCSIControllerRequest)
	if err != nil {
		return err
	}
	ctx, cancel := e.callCtx()
	defer cancel()
	err = cl.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{
		ExternalID: args.ExternalID, NodeID: args.ExternalNodeID, Secrets: args.Secrets,
	})
	if err != nil {
		return e.controllerErr("ControllerUnpublish from node "+args.ExternalNodeID, &args.ClientCSIControllerRequest, err)
	}
	return nil
}

// Validate runs ValidateVolumeCapabilities.
func (e *csiControllerEndpoint) Validate(args *structs.ClientCSIControllerValidateRequest, _ *structs.ClientCSIControllerResponse) error {
	cl, err := e.controller(&args.ClientCSIControllerRequest)
	if err != nil {
		return err
	}
	ctx, cancel := e.callCtx()
	defer cancel()
	err = cl.ControllerValidateCapabilities(ctx, &csi.ControllerValidateVolumeRequest{
		ExternalID:    args.ExternalID,
		Capabilities:  volumeCapabilities(args.Capabilities, args.MountOptions),
		VolumeContext: args.VolumeContext,
		Parameters:    args.Parameters,
		Secrets:       args.Secrets,
	})
	if err != nil {
		return e.controllerErr("ValidateVolumeCapabilities", &args.ClientCSIControllerRequest, err)
	}
	return nil
}

// Create runs CreateVolume.
func (e *csiControllerEndpoint) Create(args *structs.ClientCSIControllerCreateRequest, reply *structs.ClientCSIControllerCreateResponse) error {
	cl, err := e.controller(&args.ClientCSIControllerRequest)
	if err != nil {
		return err
	}
	req := &csi.ControllerCreateVolumeRequest{
		Name:                      args.Name,
		Capabilities:              volumeCapabilities(args.Capabilities, args.MountOptions),
		Parameters:                args.Parameters,
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
		return e.controllerErr("CreateVolume", &args.ClientCSIControllerRequest, err)
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
func (e *csiControllerEndpoint) Delete(args *structs.ClientCSIControllerDeleteRequest, _ *structs.ClientCSIControllerResponse) error {
	cl, err := e.controller(&args.ClientCSIControllerRequest)
	if err != nil {
		return err
	}
	ctx, cancel := e.callCtx()
	defer cancel()
	if err := cl.ControllerDeleteVolume(ctx, &csi.ControllerDeleteVolumeRequest{ExternalID: args.ExternalID, Secrets: args.Secrets}); err != nil {
		return e.controllerErr("DeleteVolume", &args.ClientCSIControllerRequest, err)
	}
	return nil
}

// csiNodeEndpoint runs node-side CSI work the servers ask for: the
// unpublish of a volume whose alloc's client-side release never happened
// (the alloc was garbage collected, or this client lost track of it).
type csiNodeEndpoint struct {
	c   *Client
	ctx context.Context
}

// Detach unpublishes a volume for an alloc on this node: NodeUnpublish,
// and NodeUnstage for the node's last user of it. It refuses while this
// client runs the alloc and its tasks have not all exited: those tasks
// may be using the volume, and the alloc's own release follows their exit.
func (e *csiNodeEndpoint) Detach(args *structs.ClientCSINodeDetachRequest, _ *structs.ClientCSIControllerResponse) error {
	nodeID := e.c.NodeID()
	if r, err := e.c.runner(args.AllocID); err == nil && !r.Alloc().TasksExited {
		return structs.WireError(structs.NewError(structs.CodeNotReady,
			"alloc %s still runs on node %s: its client unpublishes volume %q once every task of it has exited",
			args.AllocID, nodeID, args.VolumeID))
	}
	vm, ok := e.c.csi.NodePlugin(args.PluginID)
	if !ok {
		return structs.WireError(structs.NewError(structs.CodeRetryable,
			"node %s cannot unpublish volume %q for alloc %s: its CSI node plugin %q is not running or not ready",
			nodeID, args.VolumeID, args.AllocID, args.PluginID))
	}
	ctx, cancel := context.WithTimeout(e.ctx, csiControllerTimeout)
	defer cancel()
	usage := &csimanager.UsageOptions{ReadOnly: args.ReadOnly, AttachmentMode: args.AttachmentMode, AccessMode: args.AccessMode}
	ref := csimanager.VolumeRef{Namespace: args.Namespace, ID: args.VolumeID, ExternalID: args.ExternalID}
	if err := vm.UnmountVolume(ctx, ref, args.AllocID, usage); err != nil {
		code := structs.CodeRetryable
		if errors.Is(err, csi.ErrFinal) {
			code = structs.CodeInvalid
		}
		return structs.WireError(structs.NewError(code, "node %s: %v", nodeID, err))
	}
	e.c.logger.Info("unpublished a volume at the servers' request", "volume_id", args.VolumeID, "alloc_id", args.AllocID)
	return nil
}

// fsMountOptions keeps mount options for file-system attachments only.
func fsMountOptions(mode structs.CSIVolumeAttachmentMode, o *structs.CSIMountOptions) *structs.CSIMountOptions {
	if mode != structs.CSIVolumeAttachmentModeFilesystem {
		return nil
	}
	return o.Copy()
}

func volumeCapabilities(caps []*structs.CSIVolumeCapability, o *structs.CSIMountOptions) []*csi.VolumeCapability {
	out := make([]*csi.VolumeCapability, 0, len(caps))
	for _, c := range caps {
		if c == nil {
			continue
		}
		out = append(out, &csi.VolumeCapability{
			AccessMode: c.AccessMode, AttachmentMode: c.AttachmentMode, MountOptions: fsMountOptions(c.AttachmentMode, o),
		})
	}
	return out
}
