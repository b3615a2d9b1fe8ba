package csi

import (
	"github.com/berth-io/berth/nomad/structs"
)

// ControllerPublishVolumeRequest attaches volume ExternalID to node NodeID.
type ControllerPublishVolumeRequest struct {
	ExternalID       string // the plugin's volume ID
	NodeID           string // the plugin's node ID (from NodeGetInfo)
	ReadOnly         bool
	VolumeCapability *VolumeCapability
	Secrets          structs.CSISecrets
	VolumeContext    map[string]string
}

// Validate reports missing or bad fields.
func (r *ControllerPublishVolumeRequest) Validate() error {
	var p problems
	p.add(r.ExternalID == "", "missing volume external ID")
	p.add(r.NodeID == "", "missing node ID")
	p.addErr(r.VolumeCapability.Validate())
	return p.err()
}

// ControllerPublishVolumeResponse carries what NodeStage/NodePublish need.
type ControllerPublishVolumeResponse struct {
	PublishContext map[string]string
}

// ControllerUnpublishVolumeRequest detaches volume ExternalID from node
// NodeID. NodeID is required: the spec reads an empty node ID as "detach
// from every node", which Berth never means.
type ControllerUnpublishVolumeRequest struct {
	ExternalID string
	NodeID     string
	Secrets    structs.CSISecrets
}

// Validate reports missing fields.
func (r *ControllerUnpublishVolumeRequest) Validate() error {
	var p problems
	p.add(r.ExternalID == "", "missing volume external ID")
	p.add(r.NodeID == "", "missing node ID")
	return p.err()
}

// ControllerValidateVolumeRequest asks whether volume ExternalID supports
// all of Capabilities.
type ControllerValidateVolumeRequest struct {
	ExternalID        string
	Capabilities      []*VolumeCapability
	VolumeContext     map[string]string
	Parameters        map[string]string
	MutableParameters map[string]string
	Secrets           structs.CSISecrets
}

// Validate reports missing or bad fields.
func (r *ControllerValidateVolumeRequest) Validate() error {
	var p problems
	p.add(r.ExternalID == "", "missing volume external ID")
	p.addErr(validateCapabilities(r.Capabilities))
	return p.err()
}

// ControllerCreateVolumeRequest provisions a volume named Name.
type ControllerCreateVolumeRequest struct {
	Name                      string // Berth's name for the volume; the idempotency key
	CapacityRange             *CapacityRange
	Capabilities              []*VolumeCapability
	Parameters                map[string]string
	MutableParameters         map[string]string
	Secrets                   structs.CSISecrets
	ContentSource             *VolumeContentSource
	AccessibilityRequirements *structs.CSITopologyRequest
}

// Validate reports missing or bad fields.
func (r *ControllerCreateVolumeRequest) Validate() error {
	var p problems
	p.add(r.Name == "", "missing volume name")
	p.addErr(r.CapacityRange.Validate())
	p.addErr(validateCapabilities(r.Capabilities))
	p.addErr(r.ContentSource.Validate())
	return p.err()
}

// ControllerDeleteVolumeRequest deletes volume ExternalID.
type ControllerDeleteVolumeRequest struct {
	ExternalID string
	Secrets    structs.CSISecrets
}

// Validate reports missing fields.
func (r *ControllerDeleteVolumeRequest) Validate() error {
	var p problems
	p.add(r.ExternalID == "", "missing volume external ID")
	return p.err()
}

// ControllerListVolumesRequest asks for one page of volumes.
type ControllerListVolumesRequest struct {
	MaxEntries    int32  // 0 means the plugin chooses
	StartingToken string // NextToken of the previous page, or ""
}

// Validate reports bad fields.
func (r *ControllerListVolumesRequest) Validate() error {
	var p problems
	p.add(r.MaxEntries < 0, "max entries must not be negative")
	return p.err()
}

// ControllerListVolumesResponse is one page of volumes.
type ControllerListVolumesResponse struct {
	Entries   []*ListedVolume
	NextToken string // "" on the last page
}

// ListedVolume is one ListVolumes entry.
type ListedVolume struct {
	Volume           *Volume
	PublishedNodeIDs []string         // with the ListVolumesPublishedNodes capability
	Condition        *VolumeCondition // with the VolumeCondition capability
}

// ControllerGetCapacityRequest asks what capacity is available for volumes
// with these capabilities, parameters and topology (all optional).
type ControllerGetCapacityRequest struct {
	Capabilities       []*VolumeCapability
	Parameters         map[string]string
	AccessibleTopology *structs.CSITopology
}

// Validate reports bad capabilities.
func (r *ControllerGetCapacityRequest) Validate() error {
	if len(r.Capabilities) == 0 {
		return nil
	}
	return validateCapabilities(r.Capabilities)
}

// ControllerGetCapacityResponse is in bytes; the sizes are 0 when unknown.
type ControllerGetCapacityResponse struct {
	AvailableCapacity int64
	MaximumVolumeSize int64
	MinimumVolumeSize int64
}

// ControllerExpandVolumeRequest grows volume ExternalID.
type ControllerExpandVolumeRequest struct {
	ExternalID       string
	CapacityRange    *CapacityRange
	Secrets          structs.CSISecrets
	VolumeCapability *VolumeCapability // optional
}

// Validate reports missing or bad fields.
func (r *ControllerExpandVolumeRequest) Validate() error {
	var p problems
	p.add(r.ExternalID == "", "missing volume external ID")
	p.add(r.CapacityRange == nil, "missing capacity range")
	p.addErr(r.CapacityRange.Validate())
	if r.VolumeCapability != nil {
		p.addErr(r.VolumeCapability.Validate())
	}
	return p.err()
}

// ControllerExpandVolumeResponse says the new size, and whether the node
// must also expand (NodeExpandVolume).
type ControllerExpandVolumeResponse struct {
	CapacityBytes         int64
	NodeExpansionRequired bool
}

// ControllerModifyVolumeRequest sets mutable parameters of volume
// ExternalID (MODIFY_VOLUME).
type ControllerModifyVolumeRequest struct {
	ExternalID        string
	Secrets           structs.CSISecrets
	MutableParameters map[string]string
}

// Validate reports missing fields.
func (r *ControllerModifyVolumeRequest) Validate() error {
	var p problems
	p.add(r.ExternalID == "", "missing volume external ID")
	p.add(len(r.MutableParameters) == 0, "no mutable parameters to set")
	return p.err()
}

// ControllerCreateSnapshotRequest snapshots volume SourceVolumeID under Name.
type ControllerCreateSnapshotRequest struct {
	SourceVolumeID string // the plugin's volume ID
	Name           string // the idempotency key
	Secrets        structs.CSISecrets
	Parameters     map[string]string
}

// Validate reports missing fields.
func (r *ControllerCreateSnapshotRequest) Validate() error {
	var p problems
	p.add(r.SourceVolumeID == "", "missing source volume external ID")
	p.add(r.Name == "", "missing snapshot name")
	return p.err()
}

// ControllerDeleteSnapshotRequest deletes snapshot SnapshotID.
type ControllerDeleteSnapshotRequest struct {
	SnapshotID string
	Secrets    structs.CSISecrets
}

// Validate reports missing fields.
func (r *ControllerDeleteSnapshotRequest) Validate() error {
	var p problems
	p.add(r.SnapshotID == "", "missing snapshot ID")
	return p.err()
}

// ControllerListSnapshotsRequest asks for one page of snapshots, optionally
// only those of one volume or only one snapshot.
type ControllerListSnapshotsRequest struct {
	MaxEntries     int32
	StartingToken  string
	SourceVolumeID string
	SnapshotID     string
	Secrets        structs.CSISecrets
}

// Validate reports bad fields.
func (r *ControllerListSnapshotsRequest) Validate() error {
	var p problems
	p.add(r.MaxEntries < 0, "max entries must not be negative")
	return p.err()
}

// ControllerListSnapshotsResponse is one page of snapshots.
type ControllerListSnapshotsResponse struct {
	Entries   []*Snapshot
	NextToken string
}

func (r *ControllerPublishVolumeRequest) subject() subject   { return volume(r.ExternalID) }
func (r *ControllerUnpublishVolumeRequest) subject() subject { return volume(r.ExternalID) }
func (r *ControllerValidateVolumeRequest) subject() subject  { return volume(r.ExternalID) }
func (r *ControllerCreateVolumeRequest) subject() subject    { return volume(r.Name) }
func (r *ControllerDeleteVolumeRequest) subject() subject    { return volume(r.ExternalID) }
func (r *ControllerListVolumesRequest) subject() subject     { return subject{} }
func (r *ControllerGetCapacityRequest) subject() subject     { return subject{} }
func (r *ControllerExpandVolumeRequest) subject() subject    { return volume(r.ExternalID) }
func (r *ControllerModifyVolumeRequest) subject() subject    { return volume(r.ExternalID) }
func (r *ControllerCreateSnapshotRequest) subject() subject {
	return snapshotOf(r.Name, r.SourceVolumeID)
}
func (r *ControllerDeleteSnapshotRequest) subject() subject { return snapshot(r.SnapshotID) }
func (r *ControllerListSnapshotsRequest) subject() subject {
	return snapshotOf(r.SnapshotID, r.SourceVolumeID)
}
