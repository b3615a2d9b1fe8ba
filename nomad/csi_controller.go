package nomad

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/berth-io/berth/helper/keylock"
	"github.com/berth-io/berth/nomad/claims"
	"github.com/berth-io/berth/nomad/structs"
)

// CSI controller RPCs reach a controller plugin through a client that runs
// a healthy instance of it, over that client's node session
// (node_session.go). The client endpoint is CSIController.<Method>.

// csiControllers is the servers' ControllerPublisher over node sessions,
// plus the controller calls of volume create, delete and register.
type csiControllers struct {
	s *Server
	// targets serialises publish and unpublish per (plugin, target node):
	// CSI controllers are not required to handle concurrent attach and
	// detach calls for the same node, and many cannot.
	targets keylock.Locks[string]
}

var _ ControllerPublisher = (*csiControllers)(nil)

// controllers returns the publisher the claim protocol uses: the test's
// fake when Config.ControllerPublisher is set, else the node-session one.
func (s *Server) controllers() ControllerPublisher {
	if s.config.ControllerPublisher != nil {
		return s.config.ControllerPublisher
	}
	return s.csiControllers
}

func (c *csiControllers) ControllerPublish(ctx context.Context, vol *structs.CSIVolume, claim *structs.CSIVolumeClaim) (map[string]string, error) {
	unlock, err := c.targets.Lock(ctx, vol.PluginID+"\x00"+claim.ExternalNodeID)
	if err != nil {
		return nil, fmt.Errorf("waiting for another controller call on the same node: %w", err)
	}
	defer unlock()
	args := &structs.ClientCSIControllerPublishRequest{
		ClientCSIControllerRequest: controllerRequest(vol),
		ExternalNodeID:             claim.ExternalNodeID,
		AccessMode:                 claim.AccessMode,
		AttachmentMode:             claim.AttachmentMode,
		MountOptions:               vol.MountOptions.Copy(),
		ReadOnly:                   claim.ReadOnly,
		VolumeContext:              maps.Clone(vol.Context),
	}
	if d, ok := ctx.Deadline(); ok {
		args.Deadline = d.UnixNano() // PublishUntil, on this server's clock
	}
	var reply structs.ClientCSIControllerPublishResponse
	if err := c.call(ctx, vol.PluginID, "CSIController.Publish", args, &reply); err != nil {
		return nil, err
	}
	return reply.PublishContext, nil
}

func (c *csiControllers) ControllerUnpublish(ctx context.Context, vol *structs.CSIVolume, claim *structs.CSIVolumeClaim) error {
	unlock, err := c.targets.Lock(ctx, vol.PluginID+"\x00"+claim.ExternalNodeID)
	if err != nil {
		return fmt.Errorf("waiting for another controller call on the same node: %w", err)
	}
	args := &structs.ClientCSIControllerUnpublishRequest{
		ClientCSIControllerRequest: controllerRequest(vol),
		ExternalNodeID:             claim.ExternalNodeID,
	}
	deadline, hasDeadline := ctx.Deadline()
	if hasDeadline {
		args.Deadline = deadline.UnixNano()
	}
	err = c.call(ctx, vol.PluginID, "CSIController.Unpublish", args, &structs.ClientCSIControllerResponse{})
	holdWhileMayRun(unlock, err, deadline, hasDeadline)
	return err
}

// holdWhileMayRun releases a (plugin, target node) lock once the
// controller call made under it is over: at once when the call was
// answered, else (the server stopped waiting, or the node session broke
// under it: errMayStillRun) only after the call's deadline, which the
// client ends it by, retries included, plus claims.ClockSkew.
//
// Why (seed 4060, one server): a ControllerUnpublish hung at the plugin
// on node A; A's session broke, the watcher retried through node B's
// controller, which succeeded after the fault healed, so the claim was
// freed and the next claim ControllerPublished the volume to the same
// node. A's client then retried its abandoned unpublish, which detached
// the volume from under the new claim's running alloc (check 4). Held,
// the lock makes the later publish wait until nothing abandoned can land.
// The lock is this leader's fast path: the deadline is also on the claim
// in state (UnpublishUntil, written by the volumewatcher before the
// call), which the Claim endpoint of any leader waits out before a
// ControllerPublish of the volume to the node (claims.UnpublishHold).
func holdWhileMayRun(unlock func(), err error, deadline time.Time, hasDeadline bool) {
	if !errors.Is(err, errMayStillRun) || !hasDeadline {
		unlock()
		return
	}
	wait := time.Until(deadline.Add(claims.ClockSkew))
	if wait <= 0 {
		unlock()
		return
	}
	time.AfterFunc(wait, unlock)
}

// validate asks the controller to confirm the volume's capabilities.
func (c *csiControllers) validate(ctx context.Context, vol *structs.CSIVolume) error {
	args := &structs.ClientCSIControllerValidateRequest{
		ClientCSIControllerRequest: controllerRequest(vol),
		Capabilities:               vol.RequestedCapabilities,
		MountOptions:               vol.MountOptions.Copy(),
		VolumeContext:              maps.Clone(vol.Context),
		Parameters:                 maps.Clone(vol.Parameters),
	}
	return c.call(ctx, vol.PluginID, "CSIController.Validate", args, &structs.ClientCSIControllerResponse{})
}

// create provisions vol in the provider; the name is the idempotency key.
func (c *csiControllers) create(ctx context.Context, vol *structs.CSIVolume) (*structs.ClientCSIControllerCreateResponse, error) {
	args := &structs.ClientCSIControllerCreateRequest{
		ClientCSIControllerRequest: controllerRequest(vol),
		Name:                       vol.Name,
		CapacityMin:                vol.RequestedCapacityMin,
		CapacityMax:                vol.RequestedCapacityMax,
		Capabilities:               vol.RequestedCapabilities,
		MountOptions:               vol.MountOptions.Copy(),
		Parameters:                 maps.Clone(vol.Parameters),
		MutableParameters:          maps.Clone(vol.MutableParameters),
		RequestedTopologies:        vol.RequestedTopologies.Copy(),
		SnapshotID:                 vol.SnapshotID,
		CloneID:                    vol.CloneID,
	}
	if args.Name == "" {
		args.Name = vol.ID
	}
	var reply structs.ClientCSIControllerCreateResponse
	if err := c.call(ctx, vol.PluginID, "CSIController.Create", args, &reply); err != nil {
		return nil, err
	}
	return &reply, nil
}

// expand grows vol in the provider to at least min bytes
// (ControllerExpandVolume).
func (c *csiControllers) expand(ctx context.Context, vol *structs.CSIVolume, min, max int64) (*structs.ClientCSIControllerExpandResponse, error) {
	args := &structs.ClientCSIControllerExpandRequest{
		ClientCSIControllerRequest: controllerRequest(vol), CapacityMin: min, CapacityMax: max,
	}
	if len(vol.RequestedCapabilities) > 0 {
		args.Capability = vol.RequestedCapabilities[0]
	}
	var reply structs.ClientCSIControllerExpandResponse
	if err := c.call(ctx, vol.PluginID, "CSIController.Expand", args, &reply); err != nil {
		return nil, err
	}
	return &reply, nil
}

// modify sets the given mutable parameters of vol in the provider
// (ControllerModifyVolume).
func (c *csiControllers) modify(ctx context.Context, vol *structs.CSIVolume, params map[string]string) error {
	args := &structs.ClientCSIControllerModifyRequest{
		ClientCSIControllerRequest: controllerRequest(vol), MutableParameters: maps.Clone(params),
	}
	return c.call(ctx, vol.PluginID, "CSIController.Modify", args, &structs.ClientCSIControllerResponse{})
}

// nodeExpand asks the client of nodeID, through its node session, to grow
// vol's file system there (NodeExpandVolume).
func (c *csiControllers) nodeExpand(ctx context.Context, vol *structs.CSIVolume, nodeID string, minBytes, maxBytes int64) error {
	args := &structs.ClientCSINodeExpandRequest{
		PluginID: vol.PluginID, Namespace: vol.Namespace, VolumeID: vol.ID, ExternalID: vol.RemoteID(),
		CapacityMin: minBytes, CapacityMax: maxBytes, Secrets: maps.Clone(vol.Secrets),
	}
	return c.s.nodeRPC(ctx, nodeID, "CSINode.Expand", args, &structs.ClientCSINodeExpandResponse{})
}

// delete deletes vol in the provider; a volume already gone is a success.
func (c *csiControllers) delete(ctx context.Context, vol *structs.CSIVolume) error {
	args := &structs.ClientCSIControllerDeleteRequest{ClientCSIControllerRequest: controllerRequest(vol)}
	return c.call(ctx, vol.PluginID, "CSIController.Delete", args, &structs.ClientCSIControllerResponse{})
}

// snapshot runs one snapshot method (CSIController.CreateSnapshot,
// DeleteSnapshot or ListSnapshots) on a controller of args.PluginID.
func (c *csiControllers) snapshot(ctx context.Context, method string, args *structs.ClientCSIControllerSnapshotRequest) (*structs.ClientCSIControllerSnapshotResponse, error) {
	var reply structs.ClientCSIControllerSnapshotResponse
	if err := c.call(ctx, args.PluginID, method, args, &reply); err != nil {
		return nil, err
	}
	return &reply, nil
}

// NodeDetach asks the client of claim's node, through its node session, to
// unpublish vol for claim's alloc (volumewatcher.NodeDetacher).
func (c *csiControllers) NodeDetach(ctx context.Context, vol *structs.CSIVolume, claim *structs.CSIVolumeClaim) error {
	args := &structs.ClientCSINodeDetachRequest{
		PluginID: vol.PluginID, Namespace: vol.Namespace, VolumeID: vol.ID, ExternalID: vol.RemoteID(),
		AllocID: claim.AllocID, AccessMode: claim.AccessMode, AttachmentMode: claim.AttachmentMode, ReadOnly: claim.ReadOnly,
	}
	return c.s.nodeRPC(ctx, claim.NodeID, "CSINode.Detach", args, &structs.ClientCSIControllerResponse{})
}

func controllerRequest(vol *structs.CSIVolume) structs.ClientCSIControllerRequest {
	return structs.ClientCSIControllerRequest{
		PluginID: vol.PluginID, VolumeID: vol.ID, ExternalID: vol.RemoteID(), Secrets: maps.Clone(vol.Secrets),
	}
}

// call runs a controller method on a client with a healthy instance of
// the plugin, trying the next one when a client cannot be reached or no
// longer runs it. An answer from a plugin, success or error, ends the call.
func (c *csiControllers) call(ctx context.Context, pluginID, method string, args, reply any) error {
	nodes, err := c.s.controllerNodes(pluginID)
	if err != nil {
		return err
	}
	return tryControllers(ctx, pluginID, method, nodes, func(nodeID string) error {
		return c.s.nodeRPC(ctx, nodeID, method, args, reply)
	})
}

// tryControllers runs call on each node in turn until one answers for
// good. It moves on from a client that did not take the call or whose
// plugin answered retryably (the call is over there). A client that may
// still run the call (its session broke under it, or we stopped waiting)
// ends the try with errMayStillRun in the chain, so the caller keeps the
// call's deadline (PublishUntil, UnpublishUntil) and retries.
//
// Why (seed 26854, one server): a ControllerPublish through node B's
// controller succeeded while B's session broke (B was partitioned), and
// the try went on to node A's controller, which answered InvalidArgument.
// That answer, unmarked, read as "the call is over and attached nothing":
// the reservation lost ControllerPublished and PublishUntil, was freed
// without ControllerUnpublish, and the volume stayed attached (check 4;
// seed 25914 fits the same story with Unimplemented, the volume then
// attached to a second node, check 1). One call at a time per (plugin,
// node) is also what CSI asks of a CO: a second controller's call would
// race the first.
//
// A final answer that follows a retryable one from a client that took the
// call (a plugin's Unavailable or DeadlineExceeded: for ControllerPublish
// a timed-out attach may still complete in the storage system) carries
// errTriedBefore, so the claim counts that attempt as it counts an earlier
// Claim's (claims.PublishFailed's earlier).
func tryControllers(ctx context.Context, pluginID, method string, nodes []string, call func(nodeID string) error) error {
	var errs []string
	tried := false
	for _, nodeID := range nodes {
		err := call(nodeID)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			// We stopped waiting; the client may not have.
			return mayStillRun{err}
		}
		if errors.Is(err, errMayStillRun) {
			return err
		}
		// Retryable here means "this client could not take the call"
		// (no session, plugin not running there) or the plugin's
		// retryable answer: the next controller may do better. Anything
		// else is the plugin's final answer.
		if structs.CodeOf(err) != structs.CodeRetryable {
			if tried {
				return triedBefore{err}
			}
			return err
		}
		tried = tried || !errors.Is(err, errNotTaken)
		errs = append(errs, err.Error())
	}
	return structs.NewError(structs.CodeRetryable, "no controller of plugin %q could take %s: %s",
		pluginID, strings.TrimPrefix(method, "CSIController."), strings.Join(errs, "; "))
}

// errMayStillRun is claims.ErrMayStillRun: the volumewatcher reads it
// in a failed ControllerUnpublish to keep the call's UnpublishUntil.
var errMayStillRun = claims.ErrMayStillRun

// mayStillRun marks err with errMayStillRun, keeping its code.
type mayStillRun struct{ err error }

func (e mayStillRun) Error() string   { return e.err.Error() }
func (e mayStillRun) Unwrap() []error { return []error{e.err, errMayStillRun} }

// errNotTaken is in the chain of a call that never reached a client: its
// node has no session with this server (nodeRPC). Any other failure may
// have reached the plugin.
var errNotTaken = errors.New("no client took the call")

// notTaken marks err with errNotTaken, keeping its code.
type notTaken struct{ err error }

func (e notTaken) Error() string   { return e.err.Error() }
func (e notTaken) Unwrap() []error { return []error{e.err, errNotTaken} }

// errTriedBefore is in the chain of a controller's final answer that
// followed another controller's retryable one (tryControllers).
var errTriedBefore = errors.New("an earlier controller took the call and failed retryably")

// triedBefore marks err with errTriedBefore, keeping its code.
type triedBefore struct{ err error }

func (e triedBefore) Error() string   { return e.err.Error() }
func (e triedBefore) Unwrap() []error { return []error{e.err, errTriedBefore} }

// controllerNodes lists the nodes with a healthy controller instance of
// pluginID on a node that is not down, those with a node session first.
// None gives a retryable error naming the plugin.
func (s *Server) controllerNodes(pluginID string) ([]string, error) {
	snap := s.State()
	plugin, err := snap.CSIPluginSummary(nil, pluginID)
	if err != nil {
		return nil, err
	}
	if plugin == nil {
		return nil, structs.NewError(structs.CodeRetryable, "CSI plugin %q is not running on any node; start its plugin job", pluginID)
	}
	iter, err := snap.CSIPluginControllers(nil, pluginID)
	if err != nil {
		return nil, err
	}
	var connected, other []string
	for raw := iter.Next(); raw != nil; raw = iter.Next() {
		in := raw.(*structs.CSIPluginInstance)
		nodeID, info := in.NodeID, in.Controller
		if info == nil || !info.Healthy {
			continue
		}
		node, err := snap.NodeByID(nil, nodeID)
		if err != nil {
			return nil, err
		}
		if node == nil || node.Status == structs.NodeStatusDown {
			continue
		}
		if s.sessions.has(nodeID) {
			connected = append(connected, nodeID)
		} else {
			other = append(other, nodeID)
		}
	}
	slices.Sort(connected)
	slices.Sort(other)
	nodes := append(connected, other...)
	if len(nodes) == 0 {
		return nil, structs.NewError(structs.CodeRetryable,
			"CSI plugin %q has no healthy controller (%d of %d healthy); check its plugin job with 'berth plugin status %s'",
			pluginID, plugin.ControllersHealthy, plugin.ControllersExpected, pluginID)
	}
	return nodes, nil
}

// controllerAdvertises reports whether a healthy controller of plugin
// (read with its controllers) advertises what has says. When none does and
// some controller is not healthy, it returns the error of op on volID
// instead: an unhealthy controller may have failed to say what it
// advertises (its ControllerGetCapabilities failed, and it fingerprints
// every capability false), so the answer is "retry once one is healthy",
// not "the plugin cannot" (seed 6719). capability names the capability in
// that error.
func controllerAdvertises(plugin *structs.CSIPlugin, op, volID, capability string, has func(*structs.CSIControllerInfo) bool) (bool, error) {
	if plugin == nil {
		return false, nil
	}
	var unhealthy []string
	for _, id := range slices.Sorted(maps.Keys(plugin.Controllers)) {
		info := plugin.Controllers[id]
		switch {
		case info == nil:
		case !info.Healthy:
			unhealthy = append(unhealthy, fmt.Sprintf("node %s: %s", id, info.HealthDescription))
		case info.ControllerInfo != nil && has(info.ControllerInfo):
			return true, nil
		}
	}
	if len(unhealthy) > 0 {
		return false, structs.NewError(structs.CodeNotReady,
			"%s volume %q: no healthy controller of plugin %q advertises %s, and %d cannot say (%s); retry once one is healthy ('berth plugin status %s')",
			op, volID, plugin.ID, capability, len(unhealthy), strings.Join(unhealthy, "; "), plugin.ID)
	}
	return false, nil
}

// errNoController is the error of a volume operation that needs a
// controller when the plugin has none.
func errNoController(op, volID, pluginID string) error {
	return structs.NewError(structs.CodeInvalid,
		"%s volume %q: plugin %q has no controller (it runs in node mode only); register an existing volume with 'berth volume register' instead",
		op, volID, pluginID)
}
