package csi

import (
	"github.com/berth-io/berth/nomad/structs"
)

// NodeStageVolumeRequest stages volume ExternalID at StagingTargetPath.
// Paths are as the plugin sees them (under its stage_publish_base_dir).
type NodeStageVolumeRequest struct {
	ExternalID        string
	PublishContext    map[string]string // from ControllerPublishVolume
	StagingTargetPath string
	VolumeCapability  *VolumeCapability
	Secrets           structs.CSISecrets
	VolumeContext     map[string]string
}

// Validate reports missing or bad fields.
func (r *NodeStageVolumeRequest) Validate() error {
	var p problems
	p.add(r.ExternalID == "", "missing volume external ID")
	p.add(r.StagingTargetPath == "", "missing staging target path")
	p.addErr(r.VolumeCapability.Validate())
	return p.err()
}

// NodeUnstageVolumeRequest undoes a NodeStageVolumeRequest.
type NodeUnstageVolumeRequest struct {
	ExternalID        string
	StagingTargetPath string
}

// Validate reports missing fields.
func (r *NodeUnstageVolumeRequest) Validate() error {
	var p problems
	p.add(r.ExternalID == "", "missing volume external ID")
	p.add(r.StagingTargetPath == "", "missing staging target path")
	return p.err()
}

// NodePublishVolumeRequest publishes volume ExternalID at TargetPath.
// StagingTargetPath is set when the plugin stages (NodeCapabilitySet.
// StageUnstageVolume) and empty otherwise.
type NodePublishVolumeRequest struct {
	ExternalID        string
	PublishContext    map[string]string // from ControllerPublishVolume
	StagingTargetPath string
	TargetPath        string
	VolumeCapability  *VolumeCapability
	ReadOnly          bool
	Secrets           structs.CSISecrets
	VolumeContext     map[string]string
}

// Validate reports missing or bad fields.
func (r *NodePublishVolumeRequest) Validate() error {
	var p problems
	p.add(r.ExternalID == "", "missing volume external ID")
	p.add(r.TargetPath == "", "missing target path")
	p.addErr(r.VolumeCapability.Validate())
	return p.err()
}

// NodeUnpublishVolumeRequest undoes a NodePublishVolumeRequest.
type NodeUnpublishVolumeRequest struct {
	ExternalID string
	TargetPath string
}

// Validate reports missing fields.
func (r *NodeUnpublishVolumeRequest) Validate() error {
	var p problems
	p.add(r.ExternalID == "", "missing volume external ID")
	p.add(r.TargetPath == "", "missing target path")
	return p.err()
}

// NodeGetVolumeStatsRequest asks for the usage of a published volume.
type NodeGetVolumeStatsRequest struct {
	ExternalID        string
	VolumePath        string // a target path the volume is published at
	StagingTargetPath string // optional
}

// Validate reports missing fields.
func (r *NodeGetVolumeStatsRequest) Validate() error {
	var p problems
	p.add(r.ExternalID == "", "missing volume external ID")
	p.add(r.VolumePath == "", "missing volume path")
	return p.err()
}

// VolumeStats is what NodeGetVolumeStats said.
type VolumeStats struct {
	Usage     []*VolumeUsage
	Condition *VolumeCondition // with the VolumeCondition node capability
}

// VolumeUsage is one usage figure; Unit is "bytes" or "inodes" ("" if the
// plugin did not say).
type VolumeUsage struct {
	Unit      string
	Available int64
	Total     int64
	Used      int64
}

// NodeExpandVolumeRequest grows the file system of volume ExternalID on this
// node.
type NodeExpandVolumeRequest struct {
	ExternalID        string
	VolumePath        string
	StagingTargetPath string
	CapacityRange     *CapacityRange
	VolumeCapability  *VolumeCapability // optional
	Secrets           structs.CSISecrets
}

// Validate reports missing or bad fields.
func (r *NodeExpandVolumeRequest) Validate() error {
	var p problems
	p.add(r.ExternalID == "", "missing volume external ID")
	p.add(r.VolumePath == "", "missing volume path")
	p.addErr(r.CapacityRange.Validate())
	if r.VolumeCapability != nil {
		p.addErr(r.VolumeCapability.Validate())
	}
	return p.err()
}

// NodeExpandVolumeResponse says the new size (0 if unknown).
type NodeExpandVolumeResponse struct {
	CapacityBytes int64
}

func (r *NodeStageVolumeRequest) subject() subject     { return volume(r.ExternalID) }
func (r *NodeUnstageVolumeRequest) subject() subject   { return volume(r.ExternalID) }
func (r *NodePublishVolumeRequest) subject() subject   { return volume(r.ExternalID) }
func (r *NodeUnpublishVolumeRequest) subject() subject { return volume(r.ExternalID) }
func (r *NodeGetVolumeStatsRequest) subject() subject  { return volume(r.ExternalID) }
func (r *NodeExpandVolumeRequest) subject() subject    { return volume(r.ExternalID) }
