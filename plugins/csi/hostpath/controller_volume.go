package hostpath

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// volumeContextPath is the volume_context key holding the volume directory,
// for operators reading the CO's view of a volume.
const volumeContextPath = "path"

// volumeDirMode lets any task user write to a fresh volume, whatever the
// user its task runs as; the plugin cannot know it.
const volumeDirMode = 0o777

func (s *controllerServer) CreateVolume(ctx context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	name := req.GetName()
	if name == "" {
		return nil, status.Error(codes.InvalidArgument, "create volume: name is required")
	}
	if err := parseCapabilities(req.GetVolumeCapabilities()); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "create volume %q: %v", name, err)
	}
	if err := checkMutable(req.GetMutableParameters()); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "create volume %q: %v", name, err)
	}
	required, limit := req.GetCapacityRange().GetRequiredBytes(), req.GetCapacityRange().GetLimitBytes()
	if err := checkRange(required, limit); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "create volume %q: %v", name, err)
	}
	src := req.GetVolumeContentSource()
	srcSnap, srcVol := src.GetSnapshot().GetSnapshotId(), src.GetVolume().GetVolumeId()
	if (src.GetSnapshot() != nil && srcSnap == "") || (src.GetVolume() != nil && srcVol == "") {
		return nil, status.Errorf(codes.InvalidArgument, "create volume %q: volume_content_source has no ID", name)
	}
	params := req.GetParameters()

	var vol *Volume
	err := s.p.store.update(ctx, true, func(tx *txn) error {
		if v := tx.volumeByName(name); v != nil {
			if err := compatible(v, required, limit, params, srcSnap, srcVol); err != nil {
				return status.Errorf(codes.AlreadyExists, "create volume %q: volume %q already has that name but %v", name, v.ID, err)
			}
			vol = v
			return nil
		}
		var srcDir, srcWhat string
		var srcSize int64
		switch {
		case srcSnap != "":
			sn := tx.Snapshots[srcSnap]
			if sn == nil {
				return status.Errorf(codes.NotFound, "create volume %q: source snapshot %q does not exist", name, srcSnap)
			}
			srcDir, srcWhat, srcSize = s.p.snapshotDir(sn.ID), fmt.Sprintf("snapshot %q", sn.ID), sn.SizeBytes
		case srcVol != "":
			sv := tx.Volumes[srcVol]
			if sv == nil {
				return status.Errorf(codes.NotFound, "create volume %q: source volume %q does not exist", name, srcVol)
			}
			srcDir, srcWhat, srcSize = s.p.volumeDir(sv.ID), fmt.Sprintf("volume %q", sv.ID), sv.CapacityBytes
		}
		capacity := required
		if srcDir != "" {
			if limit > 0 && limit < srcSize {
				return status.Errorf(codes.OutOfRange, "create volume %q: limit_bytes %d is smaller than the source %s (%d bytes)", name, limit, srcWhat, srcSize)
			}
			capacity = max(required, srcSize)
		}
		if err := s.p.checkCapacity(tx.State, "", capacity); err != nil {
			return status.Errorf(status.Code(err), "create volume %q: %v", name, status.Convert(err).Message())
		}
		id, err := newID("vol-")
		if err != nil {
			return statusErr("create volume", name, err)
		}
		if err := s.p.makeDir(ctx, s.p.volumesDir, id, srcDir); err != nil {
			return statusErr("create volume", name, err)
		}
		vol = &Volume{
			ID:                id,
			Name:              name,
			CapacityBytes:     capacity,
			Parameters:        maps.Clone(params),
			MutableParameters: maps.Clone(req.GetMutableParameters()),
			SourceSnapshotID:  srcSnap,
			SourceVolumeID:    srcVol,
			CreatedAt:         time.Now().UTC(),
		}
		tx.putVolume(vol)
		s.p.log.Info("created volume", "volume_id", id, "name", name, "capacity_bytes", capacity, "source", srcWhat)
		return nil
	})
	if err != nil {
		return nil, statusErr("create volume", name, err)
	}
	cv := s.p.csiVolume(vol)
	if s.p.cfg.Topology {
		cv.AccessibleTopology = requestedTopology(req.GetAccessibilityRequirements())
	}
	return &csi.CreateVolumeResponse{Volume: cv}, nil
}

// checkRange checks a capacity range.
func checkRange(required, limit int64) error {
	switch {
	case required < 0 || limit < 0:
		return fmt.Errorf("capacity_range must not be negative (required_bytes %d, limit_bytes %d)", required, limit)
	case limit > 0 && required > limit:
		return fmt.Errorf("capacity_range required_bytes %d exceeds limit_bytes %d", required, limit)
	}
	return nil
}

// compatible reports why an existing volume does not satisfy a repeated
// CreateVolume with the same name, or nil when it does.
func compatible(v *Volume, required, limit int64, params map[string]string, srcSnap, srcVol string) error {
	switch {
	case required > 0 && v.CapacityBytes < required:
		return fmt.Errorf("has %d bytes, less than the %d bytes required", v.CapacityBytes, required)
	case limit > 0 && v.CapacityBytes > limit:
		return fmt.Errorf("has %d bytes, more than the limit of %d bytes", v.CapacityBytes, limit)
	case v.SourceSnapshotID != srcSnap || v.SourceVolumeID != srcVol:
		return fmt.Errorf("was created from a different source (snapshot %q, volume %q)", v.SourceSnapshotID, v.SourceVolumeID)
	case !maps.Equal(v.Parameters, params):
		return fmt.Errorf("has different parameters")
	}
	return nil
}

// checkCapacity checks that volume id can hold capacity bytes within the
// configured capacity: OutOfRange when it never could, ResourceExhausted
// when the other volumes leave too little.
func (p *Plugin) checkCapacity(st *State, id string, capacity int64) error {
	total := p.cfg.CapacityBytes
	if total <= 0 {
		return nil
	}
	if capacity > total {
		return status.Errorf(codes.OutOfRange, "%d bytes requested, but the plugin's whole capacity is %d bytes", capacity, total)
	}
	if free := total - st.usedCapacity(id); capacity > free {
		return status.Errorf(codes.ResourceExhausted, "%d bytes requested, but only %d of %d bytes are free", capacity, free, total)
	}
	return nil
}

// makeDir creates parent/id: empty, or as a copy of src. A copy is made
// under a temporary name and renamed into place, so that a crash never
// leaves a half-copied volume under its real name.
func (p *Plugin) makeDir(ctx context.Context, parent, id, src string) error {
	dst := filepath.Join(parent, id)
	if src == "" {
		if err := os.Mkdir(dst, volumeDirMode); err != nil {
			return fmt.Errorf("creating %s: %w", dst, err)
		}
		// Mkdir applied the umask.
		if err := os.Chmod(dst, volumeDirMode); err != nil {
			return fmt.Errorf("creating %s: %w", dst, err)
		}
		return nil
	}
	tmp := filepath.Join(parent, tmpPrefix+id)
	if _, err := copyTree(ctx, src, tmp); err != nil {
		os.RemoveAll(tmp)
		return err
	}
	if err := os.Rename(tmp, dst); err != nil {
		os.RemoveAll(tmp)
		return fmt.Errorf("renaming %s to %s: %w", tmp, dst, err)
	}
	return nil
}

// requestedTopology picks the segments a new volume reports: the first
// preferred, else the first requisite topology. Volumes are reachable from
// every node sharing the root, so this only echoes the CO's choice.
func requestedTopology(r *csi.TopologyRequirement) []*csi.Topology {
	if t := r.GetPreferred(); len(t) > 0 {
		return t[:1]
	}
	if t := r.GetRequisite(); len(t) > 0 {
		return t[:1]
	}
	return nil
}

// csiVolume converts a Volume for a response.
func (p *Plugin) csiVolume(v *Volume) *csi.Volume {
	cv := &csi.Volume{
		VolumeId:      v.ID,
		CapacityBytes: v.CapacityBytes,
		VolumeContext: map[string]string{volumeContextPath: p.volumeDir(v.ID)},
	}
	switch {
	case v.SourceSnapshotID != "":
		cv.ContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{
			Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: v.SourceSnapshotID},
		}}
	case v.SourceVolumeID != "":
		cv.ContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{
			Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: v.SourceVolumeID},
		}}
	}
	return cv
}

// DeleteVolume removes the volume and its directory. Deleting an unknown
// volume succeeds; deleting one still in use fails with FailedPrecondition.
// Snapshots are independent copies and survive their volume.
func (s *controllerServer) DeleteVolume(ctx context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	id := req.GetVolumeId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "delete volume: volume_id is required")
	}
	err := s.p.store.update(ctx, true, func(tx *txn) error {
		v := tx.Volumes[id]
		if v == nil {
			return nil
		}
		if us := v.usages(); len(us) > 0 {
			return status.Errorf(codes.FailedPrecondition, "delete volume %q: volume is still %s; unpublish and unstage it first", id, us[0])
		}
		if err := os.RemoveAll(s.p.volumeDir(id)); err != nil {
			return fmt.Errorf("removing volume directory: %w", err)
		}
		tx.deleteVolume(id)
		s.p.log.Info("deleted volume", "volume_id", id)
		return nil
	})
	if err != nil {
		return nil, statusErr("delete volume", id, err)
	}
	return &csi.DeleteVolumeResponse{}, nil
}

func (s *controllerServer) ValidateVolumeCapabilities(ctx context.Context, req *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	id := req.GetVolumeId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "validate volume capabilities: volume_id is required")
	}
	if len(req.GetVolumeCapabilities()) == 0 {
		return nil, status.Errorf(codes.InvalidArgument, "validate volume capabilities %q: volume_capabilities are required", id)
	}
	var params map[string]string
	err := s.p.store.read(ctx, func(st *State) error {
		v := st.Volumes[id]
		if v == nil && s.p.cfg.StaticVolumes {
			// A static volume is created on its first publish; every
			// capability parseCapability accepts is supported.
			if err := validID(id); err != nil {
				return status.Errorf(codes.NotFound, "validate volume capabilities %q: volume does not exist, and %v", id, err)
			}
			return nil
		}
		if v == nil {
			return status.Errorf(codes.NotFound, "validate volume capabilities %q: volume does not exist", id)
		}
		params = v.Parameters
		return nil
	})
	if err != nil {
		return nil, statusErr("validate volume capabilities", id, err)
	}
	for _, c := range req.GetVolumeCapabilities() {
		if _, err := parseCapability(c); err != nil {
			return &csi.ValidateVolumeCapabilitiesResponse{Message: fmt.Sprintf("volume %q: %v", id, err)}, nil
		}
	}
	if len(req.GetParameters()) > 0 && !maps.Equal(req.GetParameters(), params) {
		return &csi.ValidateVolumeCapabilitiesResponse{Message: fmt.Sprintf("volume %q was created with different parameters", id)}, nil
	}
	return &csi.ValidateVolumeCapabilitiesResponse{Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{
		VolumeContext:      req.GetVolumeContext(),
		VolumeCapabilities: req.GetVolumeCapabilities(),
		Parameters:         req.GetParameters(),
	}}, nil
}

func (s *controllerServer) ListVolumes(ctx context.Context, req *csi.ListVolumesRequest) (*csi.ListVolumesResponse, error) {
	var resp csi.ListVolumesResponse
	err := s.p.store.read(ctx, func(st *State) error {
		vs, next, err := page(st.sortedVolumes(), func(v *Volume) string { return v.ID }, req.GetStartingToken(), req.GetMaxEntries())
		if err != nil {
			code := codes.Aborted
			if req.GetMaxEntries() < 0 {
				code = codes.InvalidArgument
			}
			return status.Errorf(code, "list volumes: %v", err)
		}
		for _, v := range vs {
			resp.Entries = append(resp.Entries, &csi.ListVolumesResponse_Entry{
				Volume: s.p.csiVolume(v),
				Status: &csi.ListVolumesResponse_VolumeStatus{PublishedNodeIds: v.publishedNodes()},
			})
		}
		resp.NextToken = next
		return nil
	})
	if err != nil {
		return nil, statusErr("list volumes", "", err)
	}
	return &resp, nil
}

func (s *controllerServer) ControllerGetVolume(ctx context.Context, req *csi.ControllerGetVolumeRequest) (*csi.ControllerGetVolumeResponse, error) {
	id := req.GetVolumeId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "get volume: volume_id is required")
	}
	var resp *csi.ControllerGetVolumeResponse
	err := s.p.store.read(ctx, func(st *State) error {
		v := st.Volumes[id]
		if v == nil {
			return status.Errorf(codes.NotFound, "get volume %q: volume does not exist", id)
		}
		resp = &csi.ControllerGetVolumeResponse{
			Volume: s.p.csiVolume(v),
			Status: &csi.ControllerGetVolumeResponse_VolumeStatus{PublishedNodeIds: v.publishedNodes()},
		}
		return nil
	})
	if err != nil {
		return nil, statusErr("get volume", id, err)
	}
	return resp, nil
}

// ControllerExpandVolume records the new capacity; a directory needs no work
// on the node, so node expansion is never required. Shrinking is not
// supported: a smaller request leaves the capacity as it is.
func (s *controllerServer) ControllerExpandVolume(ctx context.Context, req *csi.ControllerExpandVolumeRequest) (*csi.ControllerExpandVolumeResponse, error) {
	id := req.GetVolumeId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "expand volume: volume_id is required")
	}
	if req.GetCapacityRange() == nil {
		return nil, status.Errorf(codes.InvalidArgument, "expand volume %q: capacity_range is required", id)
	}
	required, limit := req.GetCapacityRange().GetRequiredBytes(), req.GetCapacityRange().GetLimitBytes()
	if err := checkRange(required, limit); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "expand volume %q: %v", id, err)
	}
	if c := req.GetVolumeCapability(); c != nil {
		if _, err := parseCapability(c); err != nil {
			return nil, status.Errorf(codes.InvalidArgument, "expand volume %q: %v", id, err)
		}
	}
	var capacity int64
	err := s.p.store.update(ctx, true, func(tx *txn) error {
		v := tx.Volumes[id]
		if v == nil {
			return status.Errorf(codes.NotFound, "expand volume %q: volume does not exist", id)
		}
		capacity = max(v.CapacityBytes, required)
		if limit > 0 && capacity > limit {
			return status.Errorf(codes.OutOfRange, "expand volume %q: volume already has %d bytes, more than limit_bytes %d; shrinking is not supported", id, v.CapacityBytes, limit)
		}
		if capacity == v.CapacityBytes {
			return nil
		}
		if err := s.p.checkCapacity(tx.State, id, capacity); err != nil {
			return status.Errorf(status.Code(err), "expand volume %q: %v", id, status.Convert(err).Message())
		}
		c := v.Copy()
		c.CapacityBytes = capacity
		tx.putVolume(c)
		s.p.log.Info("expanded volume", "volume_id", id, "capacity_bytes", capacity)
		return nil
	})
	if err != nil {
		return nil, statusErr("expand volume", id, err)
	}
	return &csi.ControllerExpandVolumeResponse{CapacityBytes: capacity, NodeExpansionRequired: false}, nil
}

// mutableParameters are the mutable parameters the plugin knows, with what
// each is for. They change nothing about how a volume is served, so that
// modify can be shown end to end without risk:
//
//	note  free text kept with the volume (a label, an owner, a ticket)
var mutableParameters = map[string]bool{"note": true}

// checkMutable refuses a mutable parameter the plugin does not know,
// naming the ones it does.
func checkMutable(params map[string]string) error {
	for _, k := range slices.Sorted(maps.Keys(params)) {
		if !mutableParameters[k] {
			return fmt.Errorf("mutable parameter %q is not supported; the hostpath plugin knows %q", k, slices.Sorted(maps.Keys(mutableParameters)))
		}
	}
	return nil
}

// ControllerModifyVolume sets the given mutable parameters on a volume;
// the ones not given keep their values (CSI has no way to unset one).
func (s *controllerServer) ControllerModifyVolume(ctx context.Context, req *csi.ControllerModifyVolumeRequest) (*csi.ControllerModifyVolumeResponse, error) {
	id := req.GetVolumeId()
	if id == "" {
		return nil, status.Error(codes.InvalidArgument, "modify volume: volume_id is required")
	}
	if err := checkMutable(req.GetMutableParameters()); err != nil {
		return nil, status.Errorf(codes.InvalidArgument, "modify volume %q: %v", id, err)
	}
	err := s.p.store.update(ctx, true, func(tx *txn) error {
		v := tx.Volumes[id]
		if v == nil {
			return status.Errorf(codes.NotFound, "modify volume %q: volume does not exist", id)
		}
		c := v.Copy()
		if c.MutableParameters == nil {
			c.MutableParameters = map[string]string{}
		}
		maps.Copy(c.MutableParameters, req.GetMutableParameters())
		tx.putVolume(c)
		s.p.log.Info("modified volume", "volume_id", id, "mutable_parameters", c.MutableParameters)
		return nil
	})
	if err != nil {
		return nil, statusErr("modify volume", id, err)
	}
	return &csi.ControllerModifyVolumeResponse{}, nil
}
