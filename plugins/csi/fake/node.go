package fake

import (
	"context"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
)

func (p *Plugin) NodeGetCapabilities(ctx context.Context, req *csipb.NodeGetCapabilitiesRequest) (*csipb.NodeGetCapabilitiesResponse, error) {
	return handle(ctx, p, "NodeGetCapabilities", req, func(s Settings, _ *csipb.NodeGetCapabilitiesRequest) *csipb.NodeGetCapabilitiesResponse {
		resp := &csipb.NodeGetCapabilitiesResponse{}
		for _, t := range s.NodeCapabilities {
			resp.Capabilities = append(resp.Capabilities, &csipb.NodeServiceCapability{
				Type: &csipb.NodeServiceCapability_Rpc{Rpc: &csipb.NodeServiceCapability_RPC{Type: t}},
			})
		}
		return resp
	})
}

func (p *Plugin) NodeGetInfo(ctx context.Context, req *csipb.NodeGetInfoRequest) (*csipb.NodeGetInfoResponse, error) {
	return handle(ctx, p, "NodeGetInfo", req, func(s Settings, _ *csipb.NodeGetInfoRequest) *csipb.NodeGetInfoResponse {
		resp := &csipb.NodeGetInfoResponse{NodeId: s.NodeID, MaxVolumesPerNode: s.MaxVolumes}
		if s.Topology != nil {
			resp.AccessibleTopology = &csipb.Topology{Segments: s.Topology}
		}
		return resp
	})
}

func (p *Plugin) NodeStageVolume(ctx context.Context, req *csipb.NodeStageVolumeRequest) (*csipb.NodeStageVolumeResponse, error) {
	return handle(ctx, p, "NodeStageVolume", req, func(Settings, *csipb.NodeStageVolumeRequest) *csipb.NodeStageVolumeResponse {
		return &csipb.NodeStageVolumeResponse{}
	})
}

func (p *Plugin) NodeUnstageVolume(ctx context.Context, req *csipb.NodeUnstageVolumeRequest) (*csipb.NodeUnstageVolumeResponse, error) {
	return handle(ctx, p, "NodeUnstageVolume", req, func(Settings, *csipb.NodeUnstageVolumeRequest) *csipb.NodeUnstageVolumeResponse {
		return &csipb.NodeUnstageVolumeResponse{}
	})
}

func (p *Plugin) NodePublishVolume(ctx context.Context, req *csipb.NodePublishVolumeRequest) (*csipb.NodePublishVolumeResponse, error) {
	return handle(ctx, p, "NodePublishVolume", req, func(Settings, *csipb.NodePublishVolumeRequest) *csipb.NodePublishVolumeResponse {
		return &csipb.NodePublishVolumeResponse{}
	})
}

func (p *Plugin) NodeUnpublishVolume(ctx context.Context, req *csipb.NodeUnpublishVolumeRequest) (*csipb.NodeUnpublishVolumeResponse, error) {
	return handle(ctx, p, "NodeUnpublishVolume", req, func(Settings, *csipb.NodeUnpublishVolumeRequest) *csipb.NodeUnpublishVolumeResponse {
		return &csipb.NodeUnpublishVolumeResponse{}
	})
}

func (p *Plugin) NodeGetVolumeStats(ctx context.Context, req *csipb.NodeGetVolumeStatsRequest) (*csipb.NodeGetVolumeStatsResponse, error) {
	return handle(ctx, p, "NodeGetVolumeStats", req, func(Settings, *csipb.NodeGetVolumeStatsRequest) *csipb.NodeGetVolumeStatsResponse {
		return &csipb.NodeGetVolumeStatsResponse{Usage: []*csipb.VolumeUsage{
			{Unit: csipb.VolumeUsage_BYTES, Total: 1 << 30, Used: 1 << 28, Available: 1<<30 - 1<<28},
			{Unit: csipb.VolumeUsage_INODES, Total: 1 << 16, Used: 1 << 8, Available: 1<<16 - 1<<8},
		}}
	})
}

func (p *Plugin) NodeExpandVolume(ctx context.Context, req *csipb.NodeExpandVolumeRequest) (*csipb.NodeExpandVolumeResponse, error) {
	return handle(ctx, p, "NodeExpandVolume", req, func(_ Settings, req *csipb.NodeExpandVolumeRequest) *csipb.NodeExpandVolumeResponse {
		return &csipb.NodeExpandVolumeResponse{CapacityBytes: req.GetCapacityRange().GetRequiredBytes()}
	})
}
