package csi

import (
	"context"
	"fmt"
	"maps"
	"slices"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/berth-io/berth/nomad/structs"
)

func (c *client) ControllerGetCapabilities(ctx context.Context) (*structs.CSIControllerInfo, error) {
	resp, err := c.controller.ControllerGetCapabilities(ctx, &csipb.ControllerGetCapabilitiesRequest{})
	if err := result(ctx, "ControllerGetCapabilities", subject{}, err); err != nil {
		return nil, err
	}
	return controllerCapabilitiesFromProto(resp.GetCapabilities()), nil
}

func (c *client) ControllerPublishVolume(ctx context.Context, req *ControllerPublishVolumeRequest) (*ControllerPublishVolumeResponse, error) {
	const rpc = "ControllerPublishVolume"
	s, err := validate(rpc, req)
	if err != nil {
		return nil, err
	}
	resp, err := c.controller.ControllerPublishVolume(ctx, &csipb.ControllerPublishVolumeRequest{
		VolumeId:         req.ExternalID,
		NodeId:           req.NodeID,
		VolumeCapability: req.VolumeCapability.toProto(),
		Readonly:         req.ReadOnly,
		Secrets:          req.Secrets,
		VolumeContext:    req.VolumeContext,
	})
	if err := result(ctx, rpc, s, err); err != nil {
		return nil, err
	}
	return &ControllerPublishVolumeResponse{PublishContext: maps.Clone(resp.GetPublishContext())}, nil
}

func (c *client) ControllerUnpublishVolume(ctx context.Context, req *ControllerUnpublishVolumeRequest) error {
	const rpc = "ControllerUnpublishVolume"
	s, err := validate(rpc, req)
	if err != nil {
		return err
	}
	_, err = c.controller.ControllerUnpublishVolume(ctx, &csipb.ControllerUnpublishVolumeRequest{
		VolumeId: req.ExternalID,
		NodeId:   req.NodeID,
		Secrets:  req.Secrets,
	})
	return result(ctx, rpc, s, err)
}

func (c *client) ControllerValidateCapabilities(ctx context.Context, req *ControllerValidateVolumeRequest) error {
	const rpc = "ValidateVolumeCapabilities"
	s, err := validate(rpc, req)
	if err != nil {
		return err
	}
	resp, err := c.controller.ValidateVolumeCapabilities(ctx, &csipb.ValidateVolumeCapabilitiesRequest{
		VolumeId:           req.ExternalID,
		VolumeContext:      req.VolumeContext,
		VolumeCapabilities: capabilitiesToProto(req.Capabilities),
		Parameters:         req.Parameters,
		MutableParameters:  req.MutableParameters,
		Secrets:            req.Secrets,
	})
	if err := result(ctx, rpc, s, err); err != nil {
		return err
	}
	if err := checkConfirmed(req.Capabilities, resp); err != nil {
		return &Error{RPC: rpc, VolumeID: s.volumeID, Class: Final, Attempts: 1,
			Err: fmt.Errorf("%w: %w", ErrNotConfirmed, err)}
	}
	return nil
}

// checkConfirmed reports a requested capability the plugin did not confirm.
// Access and attachment modes must match; plugins commonly omit mount
// options from their confirmation, so those are not compared.
func checkConfirmed(requested []*VolumeCapability, resp *csipb.ValidateVolumeCapabilitiesResponse) error {
	if resp.GetConfirmed() == nil {
		if msg := resp.GetMessage(); msg != "" {
			return fmt.Errorf("plugin says %q", msg)
		}
		return fmt.Errorf("plugin gave no reason")
	}
	var confirmed []*VolumeCapability
	for _, pb := range resp.GetConfirmed().GetVolumeCapabilities() {
		if v, ok := volumeCapabilityFromProto(pb); ok {
			confirmed = append(confirmed, v)
		}
	}
	var p problems
	for _, want := range requested {
		found := slices.ContainsFunc(confirmed, func(got *VolumeCapability) bool {
			return got.AccessMode == want.AccessMode && got.AttachmentMode == want.AttachmentMode
		})
		p.add(!found, fmt.Sprintf("capability %s/%s missing from confirmation", want.AccessMode, want.AttachmentMode))
	}
	return p.err()
}

func (c *client) ControllerCreateVolume(ctx context.Context, req *ControllerCreateVolumeRequest) (*Volume, error) {
	const rpc = "CreateVolume"
	s, err := validate(rpc, req)
	if err != nil {
		return nil, err
	}
	resp, err := c.controller.CreateVolume(ctx, &csipb.CreateVolumeRequest{
		Name:                      req.Name,
		CapacityRange:             req.CapacityRange.toProto(),
		VolumeCapabilities:        capabilitiesToProto(req.Capabilities),
		Parameters:                req.Parameters,
		MutableParameters:         req.MutableParameters,
		Secrets:                   req.Secrets,
		VolumeContentSource:       req.ContentSource.toProto(),
		AccessibilityRequirements: topologyRequestToProto(req.AccessibilityRequirements),
	})
	if err := result(ctx, rpc, s, err); err != nil {
		return nil, err
	}
	vol := volumeFromProto(resp.GetVolume())
	if vol == nil || vol.ExternalID == "" {
		return nil, &Error{RPC: rpc, VolumeID: s.volumeID, Class: Final, Attempts: 1,
			Err: fmt.Errorf("plugin returned no volume ID")}
	}
	return vol, nil
}

func (c *client) ControllerDeleteVolume(ctx context.Context, req *ControllerDeleteVolumeRequest) error {
	const rpc = "DeleteVolume"
	s, err := validate(rpc, req)
	if err != nil {
		return err
	}
	_, err = c.controller.DeleteVolume(ctx, &csipb.DeleteVolumeRequest{
		VolumeId: req.ExternalID,
		Secrets:  req.Secrets,
	})
	return result(ctx, rpc, s, err)
}

func (c *client) ControllerListVolumes(ctx context.Context, req *ControllerListVolumesRequest) (*ControllerListVolumesResponse, error) {
	const rpc = "ListVolumes"
	s, err := validate(rpc, req)
	if err != nil {
		return nil, err
	}
	resp, err := c.controller.ListVolumes(ctx, &csipb.ListVolumesRequest{
		MaxEntries:    req.MaxEntries,
		StartingToken: req.StartingToken,
	})
	if err := result(ctx, rpc, s, err); err != nil {
		return nil, err
	}
	out := &ControllerListVolumesResponse{NextToken: resp.GetNextToken()}
	for _, e := range resp.GetEntries() {
		out.Entries = append(out.Entries, &ListedVolume{
			Volume:           volumeFromProto(e.GetVolume()),
			PublishedNodeIDs: slices.Clone(e.GetStatus().GetPublishedNodeIds()),
			Condition:        conditionFromProto(e.GetStatus().GetVolumeCondition()),
		})
	}
	return out, nil
}

func (c *client) ControllerGetCapacity(ctx context.Context, req *ControllerGetCapacityRequest) (*ControllerGetCapacityResponse, error) {
	const rpc = "GetCapacity"
	s, err := validate(rpc, req)
	if err != nil {
		return nil, err
	}
	resp, err := c.controller.GetCapacity(ctx, &csipb.GetCapacityRequest{
		VolumeCapabilities: capabilitiesToProto(req.Capabilities),
		Parameters:         req.Parameters,
		AccessibleTopology: topologyToProto(req.AccessibleTopology),
	})
	if err := result(ctx, rpc, s, err); err != nil {
		return nil, err
	}
	return &ControllerGetCapacityResponse{
		AvailableCapacity: resp.GetAvailableCapacity(),
		MaximumVolumeSize: resp.GetMaximumVolumeSize().GetValue(),
		MinimumVolumeSize: resp.GetMinimumVolumeSize().GetValue(),
	}, nil
}

func (c *client) ControllerExpandVolume(ctx context.Context, req *ControllerExpandVolumeRequest) (*ControllerExpandVolumeResponse, error) {
	const rpc = "ControllerExpandVolume"
	s, err := validate(rpc, req)
	if err != nil {
		return nil, err
	}
	resp, err := c.controller.ControllerExpandVolume(ctx, &csipb.ControllerExpandVolumeRequest{
		VolumeId:         req.ExternalID,
		CapacityRange:    req.CapacityRange.toProto(),
		Secrets:          req.Secrets,
		VolumeCapability: req.VolumeCapability.toProto(),
	})
	if err := result(ctx, rpc, s, err); err != nil {
		return nil, err
	}
	return &ControllerExpandVolumeResponse{
		CapacityBytes:         resp.GetCapacityBytes(),
		NodeExpansionRequired: resp.GetNodeExpansionRequired(),
	}, nil
}

func (c *client) ControllerModifyVolume(ctx context.Context, req *ControllerModifyVolumeRequest) error {
	const rpc = "ControllerModifyVolume"
	s, err := validate(rpc, req)
	if err != nil {
		return err
	}
	_, err = c.controller.ControllerModifyVolume(ctx, &csipb.ControllerModifyVolumeRequest{
		VolumeId:          req.ExternalID,
		Secrets:           req.Secrets,
		MutableParameters: req.MutableParameters,
	})
	return result(ctx, rpc, s, err)
}

func (c *client) ControllerCreateSnapshot(ctx context.Context, req *ControllerCreateSnapshotRequest) (*Snapshot, error) {
	const rpc = "CreateSnapshot"
	s, err := validate(rpc, req)
	if err != nil {
		return nil, err
	}
	resp, err := c.controller.CreateSnapshot(ctx, &csipb.CreateSnapshotRequest{
		SourceVolumeId: req.SourceVolumeID,
		Name:           req.Name,
		Secrets:        req.Secrets,
		Parameters:     req.Parameters,
	})
	if err := result(ctx, rpc, s, err); err != nil {
		return nil, err
	}
	snap := snapshotFromProto(resp.GetSnapshot())
	if snap == nil || snap.ID == "" {
		return nil, &Error{RPC: rpc, VolumeID: s.volumeID, SnapshotID: s.snapshotID, Class: Final, Attempts: 1,
			Err: fmt.Errorf("plugin returned no snapshot ID")}
	}
	return snap, nil
}

func (c *client) ControllerDeleteSnapshot(ctx context.Context, req *ControllerDeleteSnapshotRequest) error {
	const rpc = "DeleteSnapshot"
	s, err := validate(rpc, req)
	if err != nil {
		return err
	}
	_, err = c.controller.DeleteSnapshot(ctx, &csipb.DeleteSnapshotRequest{
		SnapshotId: req.SnapshotID,
		Secrets:    req.Secrets,
	})
	return result(ctx, rpc, s, err)
}

func (c *client) ControllerListSnapshots(ctx context.Context, req *ControllerListSnapshotsRequest) (*ControllerListSnapshotsResponse, error) {
	const rpc = "ListSnapshots"
	s, err := validate(rpc, req)
	if err != nil {
		return nil, err
	}
	resp, err := c.controller.ListSnapshots(ctx, &csipb.ListSnapshotsRequest{
		MaxEntries:     req.MaxEntries,
		StartingToken:  req.StartingToken,
		SourceVolumeId: req.SourceVolumeID,
		SnapshotId:     req.SnapshotID,
		Secrets:        req.Secrets,
	})
	if err := result(ctx, rpc, s, err); err != nil {
		return nil, err
	}
	out := &ControllerListSnapshotsResponse{NextToken: resp.GetNextToken()}
	for _, e := range resp.GetEntries() {
		out.Entries = append(out.Entries, snapshotFromProto(e.GetSnapshot()))
	}
	return out, nil
}
