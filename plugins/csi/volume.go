package csi

import (
	"errors"
	"maps"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/berth-io/berth/nomad/structs"
)

// CapacityRange bounds a volume's size in bytes; zero means unset.
type CapacityRange struct {
	RequiredBytes int64
	LimitBytes    int64
}

// Validate reports a range no volume can satisfy.
func (r *CapacityRange) Validate() error {
	if r == nil {
		return nil
	}
	var p problems
	p.add(r.RequiredBytes < 0 || r.LimitBytes < 0, "capacity must not be negative")
	p.add(r.LimitBytes > 0 && r.RequiredBytes > r.LimitBytes, "required capacity exceeds capacity limit")
	return p.err()
}

func (r *CapacityRange) toProto() *csipb.CapacityRange {
	if r == nil {
		return nil
	}
	return &csipb.CapacityRange{RequiredBytes: r.RequiredBytes, LimitBytes: r.LimitBytes}
}

// VolumeContentSource says what a new volume starts with: one snapshot or one
// volume to clone, never both.
type VolumeContentSource struct {
	SnapshotID string
	CloneID    string
}

// Validate reports a source with both or neither of its fields.
func (s *VolumeContentSource) Validate() error {
	if s == nil {
		return nil
	}
	if (s.SnapshotID == "") == (s.CloneID == "") {
		return errors.New("volume content source needs exactly one of snapshot ID and clone ID")
	}
	return nil
}

func (s *VolumeContentSource) toProto() *csipb.VolumeContentSource {
	switch {
	case s == nil:
		return nil
	case s.SnapshotID != "":
		return &csipb.VolumeContentSource{Type: &csipb.VolumeContentSource_Snapshot{
			Snapshot: &csipb.VolumeContentSource_SnapshotSource{SnapshotId: s.SnapshotID}}}
	default:
		return &csipb.VolumeContentSource{Type: &csipb.VolumeContentSource_Volume{
			Volume: &csipb.VolumeContentSource_VolumeSource{VolumeId: s.CloneID}}}
	}
}

func contentSourceFromProto(pb *csipb.VolumeContentSource) *VolumeContentSource {
	switch {
	case pb.GetSnapshot() != nil:
		return &VolumeContentSource{SnapshotID: pb.GetSnapshot().GetSnapshotId()}
	case pb.GetVolume() != nil:
		return &VolumeContentSource{CloneID: pb.GetVolume().GetVolumeId()}
	}
	return nil
}

// Volume is a volume as the controller describes it.
type Volume struct {
	ExternalID         string // the plugin's volume ID
	CapacityBytes      int64  // 0 means unknown
	VolumeContext      map[string]string
	ContentSource      *VolumeContentSource
	AccessibleTopology []*structs.CSITopology
}

func volumeFromProto(pb *csipb.Volume) *Volume {
	if pb == nil {
		return nil
	}
	return &Volume{
		ExternalID:         pb.GetVolumeId(),
		CapacityBytes:      pb.GetCapacityBytes(),
		VolumeContext:      maps.Clone(pb.GetVolumeContext()),
		ContentSource:      contentSourceFromProto(pb.GetContentSource()),
		AccessibleTopology: topologiesFromProto(pb.GetAccessibleTopology()),
	}
}

// VolumeCondition is a plugin's view of a volume's health.
type VolumeCondition struct {
	Abnormal bool
	Message  string
}

func conditionFromProto(pb *csipb.VolumeCondition) *VolumeCondition {
	if pb == nil {
		return nil
	}
	return &VolumeCondition{Abnormal: pb.GetAbnormal(), Message: pb.GetMessage()}
}

// Snapshot is a snapshot as the controller describes it.
type Snapshot struct {
	ID              string
	SourceVolumeID  string
	SizeBytes       int64     // 0 means unknown
	CreateTime      time.Time // zero if the plugin did not say
	ReadyToUse      bool
	GroupSnapshotID string
}

func snapshotFromProto(pb *csipb.Snapshot) *Snapshot {
	if pb == nil {
		return nil
	}
	s := &Snapshot{
		ID:              pb.GetSnapshotId(),
		SourceVolumeID:  pb.GetSourceVolumeId(),
		SizeBytes:       pb.GetSizeBytes(),
		ReadyToUse:      pb.GetReadyToUse(),
		GroupSnapshotID: pb.GetGroupSnapshotId(),
	}
	if pb.GetCreationTime() != nil {
		s.CreateTime = pb.GetCreationTime().AsTime()
	}
	return s
}

func topologyToProto(t *structs.CSITopology) *csipb.Topology {
	if t == nil {
		return nil
	}
	return &csipb.Topology{Segments: maps.Clone(t.Segments)}
}

func topologyFromProto(pb *csipb.Topology) *structs.CSITopology {
	if pb == nil {
		return nil
	}
	return &structs.CSITopology{Segments: maps.Clone(pb.GetSegments())}
}

func topologiesToProto(ts []*structs.CSITopology) []*csipb.Topology {
	if ts == nil {
		return nil
	}
	out := make([]*csipb.Topology, len(ts))
	for i, t := range ts {
		out[i] = topologyToProto(t)
	}
	return out
}

func topologiesFromProto(pbs []*csipb.Topology) []*structs.CSITopology {
	if pbs == nil {
		return nil
	}
	out := make([]*structs.CSITopology, len(pbs))
	for i, pb := range pbs {
		out[i] = topologyFromProto(pb)
	}
	return out
}

func topologyRequestToProto(r *structs.CSITopologyRequest) *csipb.TopologyRequirement {
	if r == nil {
		return nil
	}
	return &csipb.TopologyRequirement{
		Requisite: topologiesToProto(r.Required),
		Preferred: topologiesToProto(r.Preferred),
	}
}
