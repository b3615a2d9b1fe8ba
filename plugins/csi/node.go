package csi

import (
	"context"
	"errors"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
)

func (c *client) NodeGetCapabilities(ctx context.Context) (*NodeCapabilitySet, error) {
	resp, err := c.node.NodeGetCapabilities(ctx, &csipb.NodeGetCapabilitiesRequest{})
	if err := result(ctx, "NodeGetCapabilities", subject{}, err); err != nil {
		return nil, err
	}
	return nodeCapabilitiesFromProto(resp.GetCapabilities()), nil
}

func (c *client) NodeGetInfo(ctx context.Context) (*NodeInfo, error) {
	const rpc = "NodeGetInfo"
	resp, err := c.node.NodeGetInfo(ctx, &csipb.NodeGetInfoRequest{})
	if err := result(ctx, rpc, subject{}, err); err != nil {
		return nil, err
	}
	if resp.GetNodeId() == "" {
		return nil, &Error{RPC: rpc, Class: Final, Attempts: 1, Err: errors.New("plugin returned an empty node ID")}
	}
	if resp.GetMaxVolumesPerNode() < 0 {
		return nil, &Error{RPC: rpc, Class: Final, Attempts: 1, Err: errors.New("plugin returned a negative max volumes per node")}
	}
	return &NodeInfo{
		ID:                 resp.GetNodeId(),
		MaxVolumes:         resp.GetMaxVolumesPerNode(),
		AccessibleTopology: topologyFromProto(resp.GetAccessibleTopology()),
	}, nil
}

func (c *client) NodeStageVolume(ctx context.Context, req *NodeStageVolumeRequest) error {
	const rpc = "NodeStageVolume"
	s, err := validate(rpc, req)
	if err != nil {
		return err
	}
	_, err = c.node.NodeStageVolume(ctx, &csipb.NodeStageVolumeRequest{
		VolumeId:          req.ExternalID,
		PublishContext:    req.PublishContext,
		StagingTargetPath: req.StagingTargetPath,
		VolumeCapability:  req.VolumeCapability.toProto(),
		Secrets:           req.Secrets,
		VolumeContext:     req.VolumeContext,
	})
	return result(ctx, rpc, s, err)
}

func (c *client) NodeUnstageVolume(ctx context.Context, req *NodeUnstageVolumeRequest) error {
	const rpc = "NodeUnstageVolume"
	s, err := validate(rpc, req)
	if err != nil {
		return err
	}
	_, err = c.node.NodeUnstageVolume(ctx, &csipb.NodeUnstageVolumeRequest{
		VolumeId:          req.ExternalID,
		StagingTargetPath: req.StagingTargetPath,
	})
	return result(ctx, rpc, s, err)
}

func (c *client) NodePublishVolume(ctx context.Context, req *NodePublishVolumeRequest) error {
	const rpc = "NodePublishVolume"
	s, err := validate(rpc, req)
	if err != nil {
		return err
	}
	_, err = c.node.NodePublishVolume(ctx, &csipb.NodePublishVolumeRequest{
		VolumeId:          req.ExternalID,
		PublishContext:    req.PublishContext,
		StagingTargetPath: req.StagingTargetPath,
		TargetPath:        req.TargetPath,
		VolumeCapability:  req.VolumeCapability.toProto(),
		Readonly:          req.ReadOnly,
		Secrets:           req.Secrets,
		VolumeContext:     req.VolumeContext,
	})
	return result(ctx, rpc, s, err)
}

func (c *client) NodeUnpublishVolume(ctx context.Context, req *NodeUnpublishVolumeRequest) error {
	const rpc = "NodeUnpublishVolume"
	s, err := validate(rpc, req)
	if err != nil {
		return err
	}
	_, err = c.node.NodeUnpublishVolume(ctx, &csipb.NodeUnpublishVolumeRequest{
		VolumeId:   req.ExternalID,
		TargetPath: req.TargetPath,
	})
	return result(ctx, rpc, s, err)
}

func (c *client) NodeGetVolumeStats(ctx context.Context, req *NodeGetVolumeStatsRequest) (*VolumeStats, error) {
	const rpc = "NodeGetVolumeStats"
	s, err := validate(rpc, req)
	if err != nil {
		return nil, err
	}
	resp, err := c.node.NodeGetVolumeStats(ctx, &csipb.NodeGetVolumeStatsRequest{
		VolumeId:          req.ExternalID,
		VolumePath:        req.VolumePath,
		StagingTargetPath: req.StagingTargetPath,
	})
	if err := result(ctx, rpc, s, err); err != nil {
		return nil, err
	}
	out := &VolumeStats{Condition: conditionFromProto(resp.GetVolumeCondition())}
	for _, u := range resp.GetUsage() {
		unit := ""
		switch u.GetUnit() {
		case csipb.VolumeUsage_BYTES:
			unit = "bytes"
		case csipb.VolumeUsage_INODES:
			unit = "inodes"
		}
		out.Usage = append(out.Usage, &VolumeUsage{
			Unit:      unit,
			Available: u.GetAvailable(),
			Total:     u.GetTotal(),
			Used:      u.GetUsed(),
		})
	}
	return out, nil
}

func (c *client) NodeExpandVolume(ctx context.Context, req *NodeExpandVolumeRequest) (*NodeExpandVolumeResponse, error) {
	const rpc = "NodeExpandVolume"
	s, err := validate(rpc, req)
	if err != nil {
		return nil, err
	}
	resp, err := c.node.NodeExpandVolume(ctx, &csipb.NodeExpandVolumeRequest{
		VolumeId:          req.ExternalID,
		VolumePath:        req.VolumePath,
		StagingTargetPath: req.StagingTargetPath,
		CapacityRange:     req.CapacityRange.toProto(),
		VolumeCapability:  req.VolumeCapability.toProto(),
		Secrets:           req.Secrets,
	})
	if err := result(ctx, rpc, s, err); err != nil {
		return nil, err
	}
	return &NodeExpandVolumeResponse{CapacityBytes: resp.GetCapacityBytes()}, nil
}
