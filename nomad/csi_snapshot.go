package nomad

import (
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/berth-io/berth/nomad/structs"
)

// Volume snapshots go straight to a controller of the volume's plugin,
// through its client's node session, like create and delete. Berth keeps
// no snapshot state in Raft: the provider is the source of truth, so a
// snapshot made by a create that timed out shows in the next list, and a
// retry with the same name gets the same snapshot (CreateSnapshot's name
// is its idempotency key).

// controllerCapability checks that some controller instance of plugin
// pluginID advertises the capability has reports, or says which one is
// missing, for what, and what to do instead.
func (s *Server) controllerCapability(pluginID, what, capName string, has func(*structs.CSIControllerInfo) bool) error {
	plugin, err := s.State().CSIPluginWithControllers(nil, pluginID)
	if err != nil {
		return err
	}
	if plugin == nil {
		return structs.NewError(structs.CodeNotFound, "%s: CSI plugin %q is not known to the cluster; run 'berth plugin status'", what, pluginID)
	}
	if len(plugin.Controllers) == 0 {
		return structs.NewError(structs.CodeUnsupported, "%s: plugin %q has no controller (it runs in node mode only)", what, pluginID)
	}
	for _, info := range plugin.Controllers {
		if info != nil && info.ControllerInfo != nil && has(info.ControllerInfo) {
			return nil
		}
	}
	return structs.NewError(structs.CodeUnsupported, "%s: the controller of plugin %q does not advertise %s", what, pluginID, capName)
}

func canSnapshot(c *structs.CSIControllerInfo) bool  { return c.SupportsCreateDeleteSnapshot }
func canListSnaps(c *structs.CSIControllerInfo) bool { return c.SupportsListSnapshots }

// CreateSnapshot snapshots each volume the request names (SourceVolumeID,
// in the request's namespace) through its plugin's controller. Whether a
// volume in use may be snapshotted is the plugin's call: a refusal comes
// back with the plugin's words.
func (v *CSIVolumeEndpoint) CreateSnapshot(args *structs.CSISnapshotCreateRequest, reply *structs.CSISnapshotCreateResponse) (err error) {
	defer wire(&err)
	defer measureRPC(structs.MethodCSIVolumeCreateSnapshot, time.Now())
	if done, err := v.srv.forward(structs.MethodCSIVolumeCreateSnapshot, args, args, reply); done {
		return err
	}
	ns, err := claimNamespace(&args.WriteRequest, "volume snapshot create")
	if err != nil {
		return err
	}
	if len(args.Snapshots) == 0 {
		return structs.NewError(structs.CodeInvalid, "volume snapshot create: no snapshot in the request")
	}
	sc, ctx, cancel, err := v.srv.csiOperation()
	if err != nil {
		return err
	}
	defer cancel()
	for i, req := range args.Snapshots {
		if req == nil || req.SourceVolumeID == "" {
			return structs.NewError(structs.CodeInvalid, "volume snapshot create: snapshot %d names no source volume", i+1)
		}
		what := fmt.Sprintf("snapshotting volume %q", req.SourceVolumeID)
		unlock, err := sc.lockVolume(ctx, ns, req.SourceVolumeID, what)
		if err != nil {
			return err
		}
		snap, err := func() (*structs.CSISnapshot, error) {
			defer unlock()
			vol, err := v.srv.State().CSIVolumeByID(nil, ns, req.SourceVolumeID)
			if err != nil {
				return nil, err
			}
			if vol == nil {
				return nil, structs.NewError(structs.CodeNotFound, "%s: volume not found in namespace %q", what, ns)
			}
			if vol.State != "" && vol.State != structs.CSIVolumeStateReady {
				return nil, structs.NewError(structs.CodeConflict, "%s: the volume is %s", what, vol.State)
			}
			if err := v.srv.controllerCapability(vol.PluginID, what, "CREATE_DELETE_SNAPSHOT", canSnapshot); err != nil {
				return nil, err
			}
			name := req.Name
			if name == "" {
				name = fmt.Sprintf("%s-%d", vol.ID, time.Now().Unix())
			}
			secrets := maps.Clone(vol.Secrets)
			maps.Copy(secrets, req.Secrets)
			out, err := v.srv.csiControllers.snapshot(ctx, "CSIController.CreateSnapshot", &structs.ClientCSIControllerSnapshotRequest{
				ClientCSIControllerRequest: structs.ClientCSIControllerRequest{
					PluginID: vol.PluginID, VolumeID: vol.ID, ExternalID: vol.RemoteID(), Secrets: secrets,
				},
				Name: name, Parameters: req.Parameters,
			})
			if err != nil {
				return nil, fmt.Errorf("%s with plugin %q: %w", what, vol.PluginID, err)
			}
			if len(out.Snapshots) == 0 {
				return nil, structs.NewError(structs.CodeInternal, "%s: plugin %q returned no snapshot", what, vol.PluginID)
			}
			s := out.Snapshots[0]
			s.SourceVolumeID, s.Name = vol.ID, name
			return s, nil
		}()
		if err != nil {
			return err
		}
		reply.Snapshots = append(reply.Snapshots, snap)
	}
	reply.Index = v.srv.latestIndex()
	return nil
}

// DeleteSnapshot deletes snapshots (ID, PluginID) through their plugins'
// controllers; a snapshot already gone is a success.
func (v *CSIVolumeEndpoint) DeleteSnapshot(args *structs.CSISnapshotDeleteRequest, reply *structs.GenericResponse) (err error) {
	defer wire(&err)
	defer measureRPC(structs.MethodCSIVolumeDeleteSnapshot, time.Now())
	if done, err := v.srv.forward(structs.MethodCSIVolumeDeleteSnapshot, args, args, reply); done {
		return err
	}
	if len(args.Snapshots) == 0 {
		return structs.NewError(structs.CodeInvalid, "volume snapshot delete: no snapshot in the request")
	}
	_, ctx, cancel, err := v.srv.csiOperation()
	if err != nil {
		return err
	}
	defer cancel()
	for _, s := range args.Snapshots {
		if s == nil || s.ID == "" || s.PluginID == "" {
			return structs.NewError(structs.CodeInvalid, "volume snapshot delete: give the plugin ID and the snapshot ID")
		}
		what := fmt.Sprintf("deleting snapshot %q of plugin %q", s.ID, s.PluginID)
		if err := v.srv.controllerCapability(s.PluginID, what, "CREATE_DELETE_SNAPSHOT", canSnapshot); err != nil {
			return err
		}
		_, err := v.srv.csiControllers.snapshot(ctx, "CSIController.DeleteSnapshot", &structs.ClientCSIControllerSnapshotRequest{
			ClientCSIControllerRequest: structs.ClientCSIControllerRequest{PluginID: s.PluginID, Secrets: maps.Clone(s.Secrets)},
			SnapshotID:                 s.ID,
		})
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	reply.Index = v.srv.latestIndex()
	return nil
}

// ListSnapshots asks a controller of the plugin for one page of its
// snapshots (PerPage, NextToken), newest first.
func (v *CSIVolumeEndpoint) ListSnapshots(args *structs.CSISnapshotListRequest, reply *structs.CSISnapshotListResponse) (err error) {
	defer wire(&err)
	defer measureRPC(structs.MethodCSIVolumeListSnapshots, time.Now())
	if done, err := v.srv.forward(structs.MethodCSIVolumeListSnapshots, args, args, reply); done {
		return err
	}
	if args.PluginID == "" {
		return structs.NewError(structs.CodeInvalid, "volume snapshot list: give the plugin ID (-plugin)")
	}
	if args.PerPage < 0 {
		return structs.NewError(structs.CodeInvalid, "volume snapshot list: per_page must not be negative")
	}
	what := fmt.Sprintf("listing snapshots of plugin %q", args.PluginID)
	if err := v.srv.controllerCapability(args.PluginID, what, "LIST_SNAPSHOTS", canListSnaps); err != nil {
		return err
	}
	_, ctx, cancel, err := v.srv.csiOperation()
	if err != nil {
		return err
	}
	defer cancel()
	out, err := v.srv.csiControllers.snapshot(ctx, "CSIController.ListSnapshots", &structs.ClientCSIControllerSnapshotRequest{
		ClientCSIControllerRequest: structs.ClientCSIControllerRequest{PluginID: args.PluginID, Secrets: maps.Clone(args.Secrets)},
		MaxEntries:                 args.PerPage, StartingToken: args.NextToken,
	})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	// Name Berth's volume for each snapshot whose source it knows.
	byExternal := map[string]string{}
	iter, err := v.srv.State().CSIVolumesByPluginID(nil, structs.AllNamespaces, args.PluginID)
	if err == nil {
		for raw := iter.Next(); raw != nil; raw = iter.Next() {
			vol := raw.(*structs.CSIVolume)
			byExternal[vol.RemoteID()] = vol.ID
		}
	}
	for _, s := range out.Snapshots {
		s.SourceVolumeID = byExternal[s.ExternalSourceVolumeID]
	}
	reply.Snapshots, reply.NextToken = out.Snapshots, strings.TrimSpace(out.NextToken)
	reply.Index = v.srv.latestIndex()
	return nil
}
