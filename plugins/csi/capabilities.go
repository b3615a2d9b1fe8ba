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

// controllerCapabilities says where each controller capability the
// plugin may list is kept in structs.CSIControllerInfo, the one type that
// carries them from the fingerprint to the servers (and, converted field
// for field, to the HTTP API). Capabilities with no field there
// (SINGLE_NODE_MULTI_WRITER, GET_SNAPSHOT) decide nothing
// in Berth and are not recorded.
var controllerCapabilities = map[csipb.ControllerServiceCapability_RPC_Type]func(*structs.CSIControllerInfo) *bool{
	csipb.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME:         func(c *structs.CSIControllerInfo) *bool { return &c.SupportsCreateDelete },
	csipb.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME:     func(c *structs.CSIControllerInfo) *bool { return &c.SupportsAttachDetach },
	csipb.ControllerServiceCapability_RPC_LIST_VOLUMES:                 func(c *structs.CSIControllerInfo) *bool { return &c.SupportsListVolumes },
	csipb.ControllerServiceCapability_RPC_GET_CAPACITY:                 func(c *structs.CSIControllerInfo) *bool { return &c.SupportsGetCapacity },
	csipb.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT:       func(c *structs.CSIControllerInfo) *bool { return &c.SupportsCreateDeleteSnapshot },
	csipb.ControllerServiceCapability_RPC_LIST_SNAPSHOTS:               func(c *structs.CSIControllerInfo) *bool { return &c.SupportsListSnapshots },
	csipb.ControllerServiceCapability_RPC_CLONE_VOLUME:                 func(c *structs.CSIControllerInfo) *bool { return &c.SupportsClone },
	csipb.ControllerServiceCapability_RPC_PUBLISH_READONLY:             func(c *structs.CSIControllerInfo) *bool { return &c.SupportsReadOnlyAttach },
	csipb.ControllerServiceCapability_RPC_EXPAND_VOLUME:                func(c *structs.CSIControllerInfo) *bool { return &c.SupportsExpand },
	csipb.ControllerServiceCapability_RPC_LIST_VOLUMES_PUBLISHED_NODES: func(c *structs.CSIControllerInfo) *bool { return &c.SupportsListVolumesAttachedNodes },
	csipb.ControllerServiceCapability_RPC_VOLUME_CONDITION:             func(c *structs.CSIControllerInfo) *bool { return &c.SupportsCondition },
	csipb.ControllerServiceCapability_RPC_GET_VOLUME:                   func(c *structs.CSIControllerInfo) *bool { return &c.SupportsGet },
	csipb.ControllerServiceCapability_RPC_MODIFY_VOLUME:                func(c *structs.CSIControllerInfo) *bool { return &c.SupportsModify },
}

func controllerCapabilitiesFromProto(caps []*csipb.ControllerServiceCapability) *structs.CSIControllerInfo {
	out := &structs.CSIControllerInfo{}
	for _, c := range caps {
		if field, ok := controllerCapabilities[c.GetRpc().GetType()]; ok {
			*field(out) = true
		}
	}
	return out
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
	info.SupportsSingleNodeMultiWriter = s.SingleNodeMultiWriter
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
