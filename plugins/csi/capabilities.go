package csi

import (
	csipb "github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/berth-io/berth/nomad/structs"
)

// Capability sets are read from the plugin's lists. A number this spec
// version does not know (UNKNOWN = 0, which csi-test's mock-driver sends, or
// a capability added by a newer spec) is ignored: plugins newer than Berth
// must still fingerprint.

// PluginCapabilitySet is what GetPluginCapabilities said.
type PluginCapabilitySet struct {
	ControllerService              bool
	VolumeAccessibilityConstraints bool
	GroupControllerService         bool
	SnapshotMetadataService        bool
	OnlineExpansion                bool
	OfflineExpansion               bool
}

// Fill sets the fields of info that the plugin capabilities decide.
func (s *PluginCapabilitySet) Fill(info *structs.CSIInfo) {
	info.RequiresControllerPlugin = s.ControllerService
	info.RequiresTopologies = s.VolumeAccessibilityConstraints
}

func pluginCapabilitiesFromProto(caps []*csipb.PluginCapability) *PluginCapabilitySet {
	s := &PluginCapabilitySet{}
	for _, c := range caps {
		if svc := c.GetService(); svc != nil {
			switch svc.GetType() {
			case csipb.PluginCapability_Service_CONTROLLER_SERVICE:
				s.ControllerService = true
			case csipb.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS:
				s.VolumeAccessibilityConstraints = true
			case csipb.PluginCapability_Service_GROUP_CONTROLLER_SERVICE:
				s.GroupControllerService = true
			case csipb.PluginCapability_Service_SNAPSHOT_METADATA_SERVICE:
				s.SnapshotMetadataService = true
			}
		}
		if exp := c.GetVolumeExpansion(); exp != nil {
			switch exp.GetType() {
			case csipb.PluginCapability_VolumeExpansion_ONLINE:
				s.OnlineExpansion = true
			case csipb.PluginCapability_VolumeExpansion_OFFLINE:
				s.OfflineExpansion = true
			}
		}
	}
	return s
}

// ControllerCapabilitySet is what ControllerGetCapabilities said.
type ControllerCapabilitySet struct {
	CreateDeleteVolume        bool
	PublishUnpublishVolume    bool
	ListVolumes               bool
	GetCapacity               bool
	CreateDeleteSnapshot      bool
	ListSnapshots             bool
	CloneVolume               bool
	PublishReadonly           bool
	ExpandVolume              bool
	ListVolumesPublishedNodes bool
	VolumeCondition           bool
	GetVolume                 bool
	SingleNodeMultiWriter     bool
	ModifyVolume              bool
	GetSnapshot               bool
}

// Fill sets the Supports* fields of info.
func (s *ControllerCapabilitySet) Fill(info *structs.CSIControllerInfo) {
	info.SupportsCreateDelete = s.CreateDeleteVolume
	info.SupportsAttachDetach = s.PublishUnpublishVolume
	info.SupportsListVolumes = s.ListVolumes
	info.SupportsGetCapacity = s.GetCapacity
	info.SupportsCreateDeleteSnapshot = s.CreateDeleteSnapshot
	info.SupportsListSnapshots = s.ListSnapshots
	info.SupportsClone = s.CloneVolume
	info.SupportsReadOnlyAttach = s.PublishReadonly
	info.SupportsExpand = s.ExpandVolume
	info.SupportsListVolumesAttachedNodes = s.ListVolumesPublishedNodes
	info.SupportsCondition = s.VolumeCondition
	info.SupportsGet = s.GetVolume
}

func controllerCapabilitiesFromProto(caps []*csipb.ControllerServiceCapability) *ControllerCapabilitySet {
	s := &ControllerCapabilitySet{}
	for _, c := range caps {
		switch c.GetRpc().GetType() {
		case csipb.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME:
			s.CreateDeleteVolume = true
		case csipb.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME:
			s.PublishUnpublishVolume = true
		case csipb.ControllerServiceCapability_RPC_LIST_VOLUMES:
			s.ListVolumes = true
		case csipb.ControllerServiceCapability_RPC_GET_CAPACITY:
			s.GetCapacity = true
		case csipb.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT:
			s.CreateDeleteSnapshot = true
		case csipb.ControllerServiceCapability_RPC_LIST_SNAPSHOTS:
			s.ListSnapshots = true
		case csipb.ControllerServiceCapability_RPC_CLONE_VOLUME:
			s.CloneVolume = true
		case csipb.ControllerServiceCapability_RPC_PUBLISH_READONLY:
			s.PublishReadonly = true
		case csipb.ControllerServiceCapability_RPC_EXPAND_VOLUME:
			s.ExpandVolume = true
		case csipb.ControllerServiceCapability_RPC_LIST_VOLUMES_PUBLISHED_NODES:
			s.ListVolumesPublishedNodes = true
		case csipb.ControllerServiceCapability_RPC_VOLUME_CONDITION:
			s.VolumeCondition = true
		case csipb.ControllerServiceCapability_RPC_GET_VOLUME:
			s.GetVolume = true
		case csipb.ControllerServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER:
			s.SingleNodeMultiWriter = true
		case csipb.ControllerServiceCapability_RPC_MODIFY_VOLUME:
			s.ModifyVolume = true
		case csipb.ControllerServiceCapability_RPC_GET_SNAPSHOT:
			s.GetSnapshot = true
		}
	}
	return s
}

// NodeCapabilitySet is what NodeGetCapabilities said.
type NodeCapabilitySet struct {
	StageUnstageVolume    bool
	GetVolumeStats        bool
	ExpandVolume          bool
	VolumeCondition       bool
	SingleNodeMultiWriter bool
	VolumeMountGroup      bool
}

// Fill sets the capability fields of info (not ID, MaxVolumes or topology:
// see NodeInfo.Fill).
func (s *NodeCapabilitySet) Fill(info *structs.CSINodeInfo) {
	info.RequiresNodeStageVolume = s.StageUnstageVolume
	info.SupportsStats = s.GetVolumeStats
	info.SupportsExpand = s.ExpandVolume
	info.SupportsCondition = s.VolumeCondition
}

func nodeCapabilitiesFromProto(caps []*csipb.NodeServiceCapability) *NodeCapabilitySet {
	s := &NodeCapabilitySet{}
	for _, c := range caps {
		switch c.GetRpc().GetType() {
		case csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME:
			s.StageUnstageVolume = true
		case csipb.NodeServiceCapability_RPC_GET_VOLUME_STATS:
			s.GetVolumeStats = true
		case csipb.NodeServiceCapability_RPC_EXPAND_VOLUME:
			s.ExpandVolume = true
		case csipb.NodeServiceCapability_RPC_VOLUME_CONDITION:
			s.VolumeCondition = true
		case csipb.NodeServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER:
			s.SingleNodeMultiWriter = true
		case csipb.NodeServiceCapability_RPC_VOLUME_MOUNT_GROUP:
			s.VolumeMountGroup = true
		}
	}
	return s
}

// NodeInfo is what NodeGetInfo said.
type NodeInfo struct {
	ID                 string // the plugin's ID for this node (external node ID)
	MaxVolumes         int64  // 0 means no limit
	AccessibleTopology *structs.CSITopology
}

// Fill sets ID, MaxVolumes and AccessibleTopology of info.
func (n *NodeInfo) Fill(info *structs.CSINodeInfo) {
	info.ID = n.ID
	info.MaxVolumes = n.MaxVolumes
	info.AccessibleTopology = n.AccessibleTopology.Copy()
}
