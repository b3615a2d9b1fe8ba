package fake

import (
	"context"
	"maps"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func (p *Plugin) ControllerGetCapabilities(ctx context.Context, req *csipb.ControllerGetCapabilitiesRequest) (*csipb.ControllerGetCapabilitiesResponse, error) {
	return handle(ctx, p, "ControllerGetCapabilities", req, func(s Settings, _ *csipb.ControllerGetCapabilitiesRequest) *csipb.ControllerGetCapabilitiesResponse {
		resp := &csipb.ControllerGetCapabilitiesResponse{}
		for _, t := range s.ControllerCapabilities {
			resp.Capabilities = append(resp.Capabilities, &csipb.ControllerServiceCapability{
				Type: &csipb.ControllerServiceCapability_Rpc{Rpc: &csipb.ControllerServiceCapability_RPC{Type: t}},
			})
		}
		return resp
	})
}

// CreateVolume answers with volume ID "vol-<name>", the required capacity,
// the parameters as volume context, the content source, and the first
// required (else preferred) topology.
func (p *Plugin) CreateVolume(ctx context.Context, req *csipb.CreateVolumeRequest) (*csipb.CreateVolumeResponse, error) {
	return handle(ctx, p, "CreateVolume", req, func(_ Settings, req *csipb.CreateVolumeRequest) *csipb.CreateVolumeResponse {
		vol := &csipb.Volume{
			VolumeId:      "vol-" + req.GetName(),
			CapacityBytes: req.GetCapacityRange().GetRequiredBytes(),
			VolumeContext: maps.Clone(req.GetParameters()),
			ContentSource: req.GetVolumeContentSource(),
		}
		topo := req.GetAccessibilityRequirements().GetRequisite()
		if len(topo) == 0 {
			topo = req.GetAccessibilityRequirements().GetPreferred()
		}
		if len(topo) > 0 {
			vol.AccessibleTopology = topo[:1]
		}
		return &csipb.CreateVolumeResponse{Volume: vol}
	})
}

func (p *Plugin) DeleteVolume(ctx context.Context, req *csipb.DeleteVolumeRequest) (*csipb.DeleteVolumeResponse, error) {
	return handle(ctx, p, "DeleteVolume", req, func(Settings, *csipb.DeleteVolumeRequest) *csipb.DeleteVolumeResponse {
		return &csipb.DeleteVolumeResponse{}
	})
}

func (p *Plugin) ControllerPublishVolume(ctx context.Context, req *csipb.ControllerPublishVolumeRequest) (*csipb.ControllerPublishVolumeResponse, error) {
	return handle(ctx, p, "ControllerPublishVolume", req, func(s Settings, _ *csipb.ControllerPublishVolumeRequest) *csipb.ControllerPublishVolumeResponse {
		return &csipb.ControllerPublishVolumeResponse{PublishContext: s.PublishContext}
	})
}

func (p *Plugin) ControllerUnpublishVolume(ctx context.Context, req *csipb.ControllerUnpublishVolumeRequest) (*csipb.ControllerUnpublishVolumeResponse, error) {
	return handle(ctx, p, "ControllerUnpublishVolume", req, func(Settings, *csipb.ControllerUnpublishVolumeRequest) *csipb.ControllerUnpublishVolumeResponse {
		return &csipb.ControllerUnpublishVolumeResponse{}
	})
}

// ValidateVolumeCapabilities confirms whatever it is asked.
func (p *Plugin) ValidateVolumeCapabilities(ctx context.Context, req *csipb.ValidateVolumeCapabilitiesRequest) (*csipb.ValidateVolumeCapabilitiesResponse, error) {
	return handle(ctx, p, "ValidateVolumeCapabilities", req, func(_ Settings, req *csipb.ValidateVolumeCapabilitiesRequest) *csipb.ValidateVolumeCapabilitiesResponse {
		return &csipb.ValidateVolumeCapabilitiesResponse{Confirmed: &csipb.ValidateVolumeCapabilitiesResponse_Confirmed{
			VolumeContext:      req.GetVolumeContext(),
			VolumeCapabilities: req.GetVolumeCapabilities(),
			Parameters:         req.GetParameters(),
			MutableParameters:  req.GetMutableParameters(),
		}}
	})
}

func (p *Plugin) ListVolumes(ctx context.Context, req *csipb.ListVolumesRequest) (*csipb.ListVolumesResponse, error) {
	return handle(ctx, p, "ListVolumes", req, func(Settings, *csipb.ListVolumesRequest) *csipb.ListVolumesResponse {
		return &csipb.ListVolumesResponse{}
	})
}

func (p *Plugin) GetCapacity(ctx context.Context, req *csipb.GetCapacityRequest) (*csipb.GetCapacityResponse, error) {
	return handle(ctx, p, "GetCapacity", req, func(Settings, *csipb.GetCapacityRequest) *csipb.GetCapacityResponse {
		return &csipb.GetCapacityResponse{AvailableCapacity: 1 << 40}
	})
}

// CreateSnapshot answers with snapshot ID "snap-<name>", ready to use.
func (p *Plugin) CreateSnapshot(ctx context.Context, req *csipb.CreateSnapshotRequest) (*csipb.CreateSnapshotResponse, error) {
	return handle(ctx, p, "CreateSnapshot", req, func(_ Settings, req *csipb.CreateSnapshotRequest) *csipb.CreateSnapshotResponse {
		return &csipb.CreateSnapshotResponse{Snapshot: &csipb.Snapshot{
			SnapshotId:     "snap-" + req.GetName(),
			SourceVolumeId: req.GetSourceVolumeId(),
			CreationTime:   timestamppb.Now(),
			ReadyToUse:     true,
		}}
	})
}

func (p *Plugin) DeleteSnapshot(ctx context.Context, req *csipb.DeleteSnapshotRequest) (*csipb.DeleteSnapshotResponse, error) {
	return handle(ctx, p, "DeleteSnapshot", req, func(Settings, *csipb.DeleteSnapshotRequest) *csipb.DeleteSnapshotResponse {
		return &csipb.DeleteSnapshotResponse{}
	})
}

func (p *Plugin) ListSnapshots(ctx context.Context, req *csipb.ListSnapshotsRequest) (*csipb.ListSnapshotsResponse, error) {
	return handle(ctx, p, "ListSnapshots", req, func(Settings, *csipb.ListSnapshotsRequest) *csipb.ListSnapshotsResponse {
		return &csipb.ListSnapshotsResponse{}
	})
}

func (p *Plugin) GetSnapshot(ctx context.Context, req *csipb.GetSnapshotRequest) (*csipb.GetSnapshotResponse, error) {
	return handle(ctx, p, "GetSnapshot", req, func(_ Settings, req *csipb.GetSnapshotRequest) *csipb.GetSnapshotResponse {
		return &csipb.GetSnapshotResponse{Snapshot: &csipb.Snapshot{SnapshotId: req.GetSnapshotId(), ReadyToUse: true}}
	})
}

func (p *Plugin) ControllerExpandVolume(ctx context.Context, req *csipb.ControllerExpandVolumeRequest) (*csipb.ControllerExpandVolumeResponse, error) {
	return handle(ctx, p, "ControllerExpandVolume", req, func(_ Settings, req *csipb.ControllerExpandVolumeRequest) *csipb.ControllerExpandVolumeResponse {
		return &csipb.ControllerExpandVolumeResponse{
			CapacityBytes:         req.GetCapacityRange().GetRequiredBytes(),
			NodeExpansionRequired: true,
		}
	})
}

func (p *Plugin) ControllerGetVolume(ctx context.Context, req *csipb.ControllerGetVolumeRequest) (*csipb.ControllerGetVolumeResponse, error) {
	return handle(ctx, p, "ControllerGetVolume", req, func(_ Settings, req *csipb.ControllerGetVolumeRequest) *csipb.ControllerGetVolumeResponse {
		return &csipb.ControllerGetVolumeResponse{Volume: &csipb.Volume{VolumeId: req.GetVolumeId()}}
	})
}

func (p *Plugin) ControllerModifyVolume(ctx context.Context, req *csipb.ControllerModifyVolumeRequest) (*csipb.ControllerModifyVolumeResponse, error) {
	return handle(ctx, p, "ControllerModifyVolume", req, func(Settings, *csipb.ControllerModifyVolumeRequest) *csipb.ControllerModifyVolumeResponse {
		return &csipb.ControllerModifyVolumeResponse{}
	})
}
