package nomad

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/berth-io/berth/nomad/structs"
)

// Volume create and delete go through the plugin's controller, with the
// volume's state in Raft on either side of the plugin call:
//
//	Create: (none) ─► "creating" ─(CreateVolume)─► "ready" with the plugin's external ID
//	Delete: "ready" ─► "deleting" ─(DeleteVolume)─► deregistered
//
// Why: a plugin call can time out after the provider acted. A create
// recorded as "creating" is finished by running create again (CreateVolume
// is idempotent by name, and the name is fixed before the first call), so
// a timeout never leaks a provider volume nor makes a second one; a
// "deleting" volume cannot be claimed while its delete is unfinished.

// Create makes each volume in the storage provider through a healthy
// controller of its plugin and registers it.
func (v *CSIVolumeEndpoint) Create(args *structs.CSIVolumeCreateRequest, reply *structs.CSIVolumeCreateResponse) (err error) {
	defer wire(&err)
	defer measureRPC("CSIVolume.Create", time.Now())
	if done, err := v.srv.forward("CSIVolume.Create", args, args, reply); done {
		return err
	}
	if len(args.Volumes) == 0 {
		return structs.NewError(structs.CodeInvalid, "volume create: no volumes given")
	}
	ns, err := claimNamespace(&args.WriteRequest, "volume create")
	if err != nil {
		return err
	}
	sc, err := v.srv.csiTerm()
	if err != nil {
		return err
	}
	for i, in := range args.Volumes {
		if in == nil {
			return structs.NewError(structs.CodeInvalid, "volume %d of the request is empty", i+1)
		}
		vol := in.Copy()
		if vol.Namespace == "" {
			vol.Namespace = ns
		}
		created, index, outcome, err := v.createOne(sc, vol)
		if err != nil {
			if len(reply.Volumes) > 0 {
				// The earlier ones stay created: say which.
				ids := make([]string, 0, len(reply.Volumes))
				for _, c := range reply.Volumes {
					ids = append(ids, strconv.Quote(c.ID))
				}
				return structs.NewError(structs.CodeOf(err), "%v (volumes %s of the request were created)", err, strings.Join(ids, ", "))
			}
			return err
		}
		reply.Volumes = append(reply.Volumes, created.Sanitize())
		reply.Outcomes = append(reply.Outcomes, outcome)
		reply.Index = index
	}
	return nil
}

// createOne creates vol, or changes it if it exists; outcome says which
// (structs.CSIVolumeCreated, ...).
func (v *CSIVolumeEndpoint) createOne(sc *scheduling, vol *structs.CSIVolume) (_ *structs.CSIVolume, _ uint64, outcome string, _ error) {
	ctx, cancel := v.srv.csiContext()
	defer cancel()
	unlock, err := sc.volumes.Lock(ctx, vol.Namespace, vol.ID, fmt.Sprintf("creating volume %q", vol.ID))
	if err != nil {
		return nil, 0, "", fmt.Errorf("creating volume %q: waiting for the volume: %w", vol.ID, err)
	}
	defer unlock()

	snap, err := v.srv.State().Snapshot()
	if err != nil {
		return nil, 0, "", err
	}
	existing, err := snap.CSIVolumeByID(nil, vol.Namespace, vol.ID)
	if err != nil {
		return nil, 0, "", err
	}
	if existing != nil {
		stored, index, outcome, err := v.changeLocked(ctx, existing, vol, "create")
		if err != nil || outcome != "" {
			return stored, index, outcome, err
		}
	}
	if existing != nil && existing.State != structs.CSIVolumeStateCreating {
		return nil, 0, "", structs.NewError(structs.CodeConflict,
			"volume %q already exists (%s); choose another ID, or 'berth volume deregister %s' first if Berth should forget it "+
				"(that keeps the data in the storage provider)", vol.ID, stateOf(existing), vol.ID)
	}
	if existing == nil {
		if _, errs := prepareVolumeRegister(newRegisterReads(snap), vol, time.Now().UnixNano()); len(errs) > 0 {
			return nil, 0, "", joinCoded(errs)
		}
	} else {
		// A retry of an unfinished create finishes the recorded one: the
		// plugin gets the same name and parameters as the first time.
		vol = existing.Copy()
	}
	if err := v.srv.canCreateDelete(vol, "creating"); err != nil {
		return nil, 0, "", err
	}
	if len(vol.MutableParameters) > 0 {
		if err := v.srv.canModify(vol, vol.MutableParameters); err != nil {
			return nil, 0, "", err
		}
	}
	if vol.Name == "" {
		vol.Name = vol.ID
	}
	if existing == nil {
		vol.State = structs.CSIVolumeStateCreating
		vol.Created = true
		if _, _, err := v.srv.raftApply(structs.CSIVolumeRegisterRequestType, &structs.CSIVolumeRegisterRequest{
			Volumes: []*structs.CSIVolume{vol}, Timestamp: time.Now().UnixNano(),
		}); err != nil {
			return nil, 0, "", fmt.Errorf("creating volume %q: recording it as creating: %w", vol.ID, err)
		}
	}

	out, err := v.srv.csiControllers.create(ctx, vol)
	if err != nil {
		if structs.CodeOf(err) == structs.CodeRetryable || ctx.Err() != nil {
			return nil, 0, "", structs.NewError(structs.CodeRetryable,
				"creating volume %q with plugin %q did not finish: %v; the volume is recorded as creating: run 'berth volume create' with the same spec again to finish it",
				vol.ID, vol.PluginID, err)
		}
		// The plugin refused: nothing was made, so nothing is kept.
		if _, _, derr := v.srv.raftApply(structs.CSIVolumeDeregisterRequestType, &structs.CSIVolumeDeregisterRequest{
			VolumeIDs: []string{vol.ID}, WriteRequest: structs.WriteRequest{Namespace: vol.Namespace},
		}); derr != nil {
			v.srv.logger.Warn("removing a volume whose create failed", "volume_id", vol.ID, "error", derr)
		}
		return nil, 0, "", structs.NewError(structs.CodeOf(err), "creating volume %q with plugin %q: %v", vol.ID, vol.PluginID, err)
	}

	vol.ExternalID = out.ExternalID
	vol.Capacity = out.CapacityBytes
	if len(out.VolumeContext) > 0 {
		if vol.Context == nil {
			vol.Context = map[string]string{}
		}
		maps.Copy(vol.Context, out.VolumeContext)
	}
	if len(out.Topologies) > 0 {
		vol.Topologies = out.Topologies
	}
	vol.State = structs.CSIVolumeStateReady
	_, index, err := v.srv.raftApply(structs.CSIVolumeRegisterRequestType, &structs.CSIVolumeRegisterRequest{
		Volumes: []*structs.CSIVolume{vol}, Timestamp: time.Now().UnixNano(),
	})
	if err != nil {
		return nil, 0, "", fmt.Errorf("volume %q was created by plugin %q as %q but recording it failed (%w); run 'berth volume create' again to finish",
			vol.ID, vol.PluginID, out.ExternalID, err)
	}
	stored, err := v.srv.State().CSIVolumeByID(nil, vol.Namespace, vol.ID)
	if err != nil || stored == nil {
		return nil, 0, "", fmt.Errorf("reading back volume %q: %v", vol.ID, err)
	}
	return stored, index, structs.CSIVolumeCreated, nil
}

// Delete deletes a volume in the storage provider and deregisters it. A
// claimed volume is refused; the volume is "deleting" (unclaimable) from
// before the plugin call until it is gone.
func (v *CSIVolumeEndpoint) Delete(args *structs.CSIVolumeDeleteRequest, reply *structs.GenericResponse) (err error) {
	defer wire(&err)
	defer measureRPC("CSIVolume.Delete", time.Now())
	if done, err := v.srv.forward("CSIVolume.Delete", args, args, reply); done {
		return err
	}
	ns, err := claimNamespace(&args.WriteRequest, "volume delete")
	if err != nil {
		return err
	}
	if args.VolumeID == "" {
		return structs.NewError(structs.CodeInvalid, "volume delete: missing volume ID")
	}
	sc, ctx, cancel, err := v.srv.csiOperation()
	if err != nil {
		return err
	}
	defer cancel()
	unlock, err := sc.lockVolume(ctx, ns, args.VolumeID, fmt.Sprintf("deleting volume %q", args.VolumeID))
	if err != nil {
		return err
	}
	defer unlock()

	vol, err := v.srv.State().CSIVolumeByID(nil, ns, args.VolumeID)
	if err != nil {
		return err
	}
	if vol == nil {
		return structs.NotFound("volume", args.VolumeID)
	}
	if live := vol.LiveClaims(); len(live) > 0 {
		var who []string
		for _, c := range live {
			who = append(who, fmt.Sprintf("alloc %s on node %s (%s)", shortID(c.AllocID), shortID(c.NodeID), c.Step.Describe()))
		}
		slices.Sort(who)
		return structs.NewError(structs.CodeConflict, "volume %q is claimed by %s; stop the jobs using it before deleting it",
			vol.ID, strings.Join(who, ", "))
	}
	if err := v.srv.canCreateDelete(vol, "deleting"); err != nil {
		return err
	}
	if len(args.Secrets) > 0 {
		vol.Secrets = maps.Clone(args.Secrets)
	}
	if vol.State != structs.CSIVolumeStateDeleting {
		marked := vol.Copy()
		marked.State = structs.CSIVolumeStateDeleting
		if _, _, err := v.srv.raftApply(structs.CSIVolumeRegisterRequestType, &structs.CSIVolumeRegisterRequest{
			Volumes: []*structs.CSIVolume{marked}, Timestamp: time.Now().UnixNano(),
		}); err != nil {
			return fmt.Errorf("deleting volume %q: recording it as deleting: %w", vol.ID, err)
		}
	}
	if err := v.srv.csiControllers.delete(ctx, vol); err != nil {
		return structs.NewError(structs.CodeOf(err),
			"deleting volume %q with plugin %q: %v; the volume stays registered as deleting: run 'berth volume delete %s' again",
			vol.ID, vol.PluginID, err, vol.ID)
	}
	_, index, err := v.srv.raftApply(structs.CSIVolumeDeregisterRequestType, &structs.CSIVolumeDeregisterRequest{
		VolumeIDs: []string{vol.ID}, WriteRequest: structs.WriteRequest{Namespace: ns},
	})
	if err != nil {
		return fmt.Errorf("volume %q was deleted by plugin %q but deregistering it failed (%w); run 'berth volume deregister %s'",
			vol.ID, vol.PluginID, err, vol.ID)
	}
	reply.Index = index
	return nil
}

// canCreateDelete checks that vol's plugin has a controller that creates
// and deletes volumes.
func (s *Server) canCreateDelete(vol *structs.CSIVolume, op string) error {
	plugin, err := s.State().CSIPluginWithControllers(nil, vol.PluginID)
	if err != nil {
		return err
	}
	if plugin == nil {
		return structs.NewError(structs.CodeInvalid,
			"%s volume %q: CSI plugin %q is not known to the cluster; run 'berth plugin status' and check the plugin's job", op, vol.ID, vol.PluginID)
	}
	if len(plugin.Controllers) == 0 {
		return errNoController(op, vol.ID, vol.PluginID)
	}
	if ok, err := controllerAdvertises(plugin, op, vol.ID, "CREATE_DELETE_VOLUME", func(c *structs.CSIControllerInfo) bool { return c.SupportsCreateDelete }); ok || err != nil {
		return err
	}
	return structs.NewError(structs.CodeInvalid,
		"%s volume %q: the controller of plugin %q does not create or delete volumes (no CREATE_DELETE_VOLUME capability); register an existing volume instead",
		op, vol.ID, vol.PluginID)
}

// validateWithController asks a controller of the plugin to confirm a new
// volume's capabilities, for plugins that have controllers. plugin is the
// volume's plugin as the request read it.
func (s *Server) validateWithController(ctx context.Context, vol *structs.CSIVolume, plugin *structs.CSIPlugin) error {
	if plugin == nil || plugin.ControllersExpected == 0 {
		return nil
	}
	validate := s.csiControllers.validate
	if s.config.ControllerPublisher != nil {
		// A test's publisher stands in for every controller: validation
		// goes to it when it can validate, and is skipped otherwise.
		v, ok := s.config.ControllerPublisher.(VolumeValidator)
		if !ok {
			return nil
		}
		validate = v.ValidateVolume
	}
	if err := validate(ctx, vol); err != nil {
		if structs.CodeOf(err) == structs.CodeRetryable {
			return structs.NewError(structs.CodeRetryable, "volume %q was not validated by a controller of plugin %q: %v", vol.ID, vol.PluginID, err)
		}
		return structs.NewError(structs.CodeOf(err), "volume %q: plugin %q did not confirm its capabilities: %v", vol.ID, vol.PluginID, err)
	}
	return nil
}

// VolumeValidator is implemented by a Config.ControllerPublisher (tests)
// that also answers ValidateVolumeCapabilities.
type VolumeValidator interface {
	ValidateVolume(ctx context.Context, vol *structs.CSIVolume) error
}

func stateOf(v *structs.CSIVolume) string {
	if v.State == "" {
		return string(structs.CSIVolumeStateReady)
	}
	return string(v.State)
}

// shortID is the first 8 characters of an ID, as the CLI shows them.
func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// changeLocked applies to the ready volume existing, under its lock, what
// update asks that may change on a live volume: a larger capacity
// (sizeChange, expandLocked), then changed mutable parameters
// (mutableChange, modifyLocked). outcome says which it did
// (structs.CSIVolumeExpanded, ...Modified, ...ExpandedModified), "" when
// update asks for neither. Create and register both come here (verb says
// which).
func (v *CSIVolumeEndpoint) changeLocked(ctx context.Context, existing, update *structs.CSIVolume, verb string) (stored *structs.CSIVolume, index uint64, outcome string, err error) {
	grow, err := sizeChange(existing, update)
	if err != nil {
		return nil, 0, "", err
	}
	changes := mutableChange(existing, update)
	if len(changes) > 0 {
		// Refuse before growing: the request is either done whole or not
		// started.
		if err := v.srv.canModify(existing, changes); err != nil {
			return nil, 0, "", err
		}
	}
	switch {
	case grow && len(changes) > 0:
		outcome = structs.CSIVolumeExpandedModified
	case grow:
		outcome = structs.CSIVolumeExpanded
	case len(changes) > 0:
		outcome = structs.CSIVolumeModified
	}
	stored = existing
	if grow {
		if stored, index, err = v.expandLocked(ctx, existing, update.RequestedCapacityMin, update.RequestedCapacityMax, verb); err != nil {
			return nil, 0, outcome, err
		}
	}
	if len(changes) > 0 {
		if stored, index, err = v.modifyLocked(ctx, stored, changes, verb); err != nil {
			return nil, 0, outcome, err
		}
	}
	return stored, index, outcome, nil
}

// mutableChange is the mutable parameters of update whose value differs
// from the registered volume existing's (nil when existing is not ready).
// A parameter update leaves out keeps its value: CSI cannot unset one.
func mutableChange(existing, update *structs.CSIVolume) map[string]string {
	if existing.State != structs.CSIVolumeStateReady && existing.State != "" {
		return nil
	}
	var out map[string]string
	for k, val := range update.MutableParameters {
		if old, ok := existing.MutableParameters[k]; ok && old == val {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[k] = val
	}
	return out
}

// canModify checks that a controller of vol's plugin can change mutable
// parameters (MODIFY_VOLUME), refusing with the fix otherwise.
func (s *Server) canModify(vol *structs.CSIVolume, changes map[string]string) error {
	plugin, err := s.State().CSIPluginWithControllers(nil, vol.PluginID)
	if err != nil {
		return err
	}
	if ok, err := controllerAdvertises(plugin, "modifying", vol.ID, "MODIFY_VOLUME", func(c *structs.CSIControllerInfo) bool { return c.SupportsModify }); ok || err != nil {
		return err
	}
	return structs.NewError(structs.CodeInvalid,
		"volume %q: mutable_parameters %s cannot be set: no controller of plugin %q can modify volumes (no MODIFY_VOLUME capability); "+
			"remove them from the spec, or keep the registered values %s",
		vol.ID, formatMap(changes), vol.PluginID, formatMap(vol.MutableParameters))
}

// modifyLocked sets changes, the mutable parameters that differ, on the
// registered volume existing through a controller (ControllerModifyVolume)
// under the volume's lock, and records the outcome in Raft: the volume's
// MutableParameters when the plugin made the change, its Modification
// either way.
func (v *CSIVolumeEndpoint) modifyLocked(ctx context.Context, existing *structs.CSIVolume, changes map[string]string, verb string) (*structs.CSIVolume, uint64, error) {
	vol := existing.Copy()
	vol.Modification = &structs.CSIVolumeModification{Parameters: maps.Clone(changes)}
	perr := v.srv.csiControllers.modify(ctx, vol, changes)
	if perr != nil {
		vol.Modification.Error = perr.Error()
	} else {
		if vol.MutableParameters == nil {
			vol.MutableParameters = map[string]string{}
		}
		maps.Copy(vol.MutableParameters, changes)
	}
	vol.Modification.Time = time.Now().UnixNano()
	_, index, err := v.srv.raftApply(structs.CSIVolumeRegisterRequestType, &structs.CSIVolumeRegisterRequest{
		Volumes: []*structs.CSIVolume{vol}, Timestamp: time.Now().UnixNano(),
	})
	switch {
	case perr != nil:
		if err != nil {
			v.srv.logger.Warn("recording a failed modification", "volume_id", vol.ID, "error", err)
		}
		return nil, 0, structs.NewError(structs.CodeOf(perr), "modifying volume %q with plugin %q (mutable_parameters %s): %v; fix the spec and run 'berth volume %s' again",
			vol.ID, vol.PluginID, formatMap(changes), perr, verb)
	case err != nil:
		return nil, 0, fmt.Errorf("volume %q was modified by plugin %q but recording it failed (%w); run 'berth volume %s' again",
			vol.ID, vol.PluginID, err, verb)
	}
	stored, err := v.srv.State().CSIVolumeByID(nil, vol.Namespace, vol.ID)
	if err != nil || stored == nil {
		return nil, 0, fmt.Errorf("reading back volume %q: %v", vol.ID, err)
	}
	return stored, index, nil
}

// sizeChange says whether update asks to grow the registered volume
// existing (a capacity_min above what it has, or the same request again
// after a failed expansion, which retries it), and refuses a capacity_max
// below its capacity: volumes never shrink. Create and register both
// decide with it, and both grow through expandLocked.
func sizeChange(existing, update *structs.CSIVolume) (bool, error) {
	if existing.State != structs.CSIVolumeStateReady && existing.State != "" {
		return false, nil
	}
	if update.RequestedCapacityMax > 0 && update.RequestedCapacityMax < existing.Capacity {
		return false, structs.NewError(structs.CodeInvalid,
			"volume %q is %d bytes and capacity_max asks for at most %d: volumes never shrink; keep capacity_max at %d or more",
			existing.ID, existing.Capacity, update.RequestedCapacityMax, existing.Capacity)
	}
	retry := existing.Expansion != nil && existing.Expansion.Error != "" &&
		update.RequestedCapacityMin == existing.Expansion.RequestedBytes
	known := max(existing.Capacity, existing.RequestedCapacityMin)
	return retry || (known > 0 && update.RequestedCapacityMin > known), nil
}

// expandLocked grows a ready volume to at least min bytes, under the
// volume's lock (verb is the command that asked, "create" or "register",
// named in the fix): ControllerExpandVolume when a controller of the plugin
// advertises EXPAND_VOLUME, each step recorded in Raft on the volume's
// Expansion. When the plugin says node_expansion_required, the nodes that
// stage or publish the volume are listed as pending: NodeExpandVolume on
// them is not done yet (DESIGN.md §4).
func (v *CSIVolumeEndpoint) expandLocked(ctx context.Context, existing *structs.CSIVolume, minBytes, maxBytes int64, verb string) (*structs.CSIVolume, uint64, error) {
	if maxBytes > 0 && maxBytes < minBytes {
		return nil, 0, structs.NewError(structs.CodeInvalid, "expanding volume %q: capacity_max %d is below capacity_min %d", existing.ID, maxBytes, minBytes)
	}
	plugin, err := v.srv.State().CSIPluginWithControllers(nil, existing.PluginID)
	if err != nil {
		return nil, 0, err
	}
	expands, err := controllerAdvertises(plugin, "expanding", existing.ID, "EXPAND_VOLUME", func(c *structs.CSIControllerInfo) bool { return c.SupportsExpand })
	if err != nil {
		return nil, 0, err
	}
	if !expands {
		return nil, 0, structs.NewError(structs.CodeInvalid,
			"expanding volume %q from %d to %d bytes: no controller of plugin %q can expand volumes (no EXPAND_VOLUME capability); keep capacity_min at %d or less",
			existing.ID, existing.Capacity, minBytes, existing.PluginID, existing.Capacity)
	}
	vol := existing.Copy()
	record := func() (uint64, error) {
		vol.Expansion.Time = time.Now().UnixNano()
		_, index, err := v.srv.raftApply(structs.CSIVolumeRegisterRequestType, &structs.CSIVolumeRegisterRequest{
			Volumes: []*structs.CSIVolume{vol}, Timestamp: time.Now().UnixNano(),
		})
		return index, err
	}
	vol.Expansion = &structs.CSIVolumeExpansion{RequestedBytes: minBytes}
	out, err := v.srv.csiControllers.expand(ctx, vol, minBytes, maxBytes)
	if err != nil {
		vol.Expansion.Error = err.Error()
		if _, rerr := record(); rerr != nil {
			v.srv.logger.Warn("recording a failed expansion", "volume_id", vol.ID, "error", rerr)
		}
		return nil, 0, structs.NewError(structs.CodeOf(err), "expanding volume %q with plugin %q: %v; run 'berth volume %s' with the same spec again to retry",
			vol.ID, vol.PluginID, err, verb)
	}
	vol.Expansion.ControllerDone = true
	vol.Expansion.CapacityBytes = out.CapacityBytes
	vol.Capacity = max(out.CapacityBytes, minBytes)
	vol.RequestedCapacityMin, vol.RequestedCapacityMax = minBytes, maxBytes
	if out.NodeExpansionRequired {
		vol.Expansion.NodeRequired = true
		vol.Expansion.Nodes = map[string]string{}
		for _, c := range vol.Claims {
			if c.Step == structs.CSIClaimReserved || c.Step == structs.CSIClaimTaken {
				vol.Expansion.Nodes[c.NodeID] = "pending"
			}
		}
	}
	index, err := record()
	if err == nil && len(vol.Expansion.Nodes) > 0 {
		// The controller step is recorded; now each node that uses it.
		var failed []string
		for _, nodeID := range slices.Sorted(maps.Keys(vol.Expansion.Nodes)) {
			nerr := v.srv.csiControllers.nodeExpand(ctx, vol, nodeID, minBytes, maxBytes)
			switch {
			case nerr == nil:
				vol.Expansion.Nodes[nodeID] = "expanded"
			case structs.CodeOf(nerr) == structs.CodeNotFound:
				vol.Expansion.Nodes[nodeID] = "not published"
			default:
				vol.Expansion.Nodes[nodeID] = "failed"
				failed = append(failed, nerr.Error())
			}
		}
		vol.Expansion.Error = strings.Join(failed, "; ")
		index, err = record()
		if err == nil && len(failed) > 0 {
			return nil, 0, structs.NewError(structs.CodeRetryable,
				"volume %q was expanded to %d bytes by its controller but not on every node: %s; run 'berth volume %s' with the same spec again to retry",
				vol.ID, vol.Capacity, vol.Expansion.Error, verb)
		}
	}
	if err != nil {
		return nil, 0, fmt.Errorf("volume %q was expanded by plugin %q to %d bytes but recording it failed (%w); run 'berth volume %s' again",
			vol.ID, vol.PluginID, out.CapacityBytes, err, verb)
	}
	stored, err := v.srv.State().CSIVolumeByID(nil, vol.Namespace, vol.ID)
	if err != nil || stored == nil {
		return nil, 0, fmt.Errorf("reading back volume %q: %v", vol.ID, err)
	}
	return stored, index, nil
}
