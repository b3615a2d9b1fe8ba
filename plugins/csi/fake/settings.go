package fake

import (
	"maps"
	"slices"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
)

// Settings shape the fake's default answers. Capabilities are protobuf enum
// numbers, so a test can also send numbers the spec does not know
// (csipb.NodeServiceCapability_RPC_Type(99)).
type Settings struct {
	// GetPluginInfo.
	Name    string
	Version string

	// Probe: nil leaves ready unset (which means ready), else its value.
	Ready *bool

	// GetPluginCapabilities.
	PluginServices  []csipb.PluginCapability_Service_Type
	VolumeExpansion csipb.PluginCapability_VolumeExpansion_Type // UNKNOWN: not advertised

	// ControllerGetCapabilities and NodeGetCapabilities.
	ControllerCapabilities []csipb.ControllerServiceCapability_RPC_Type
	NodeCapabilities       []csipb.NodeServiceCapability_RPC_Type

	// NodeGetInfo. A nil Topology sends no accessible topology.
	NodeID     string
	MaxVolumes int64
	Topology   map[string]string

	// ControllerPublishVolume's publish context.
	PublishContext map[string]string
}

// DefaultSettings is a monolith plugin that can do everything Berth uses.
func DefaultSettings() Settings {
	return Settings{
		Name:    "fake.csi.berth.io",
		Version: "1.0.0",
		PluginServices: []csipb.PluginCapability_Service_Type{
			csipb.PluginCapability_Service_CONTROLLER_SERVICE,
		},
		ControllerCapabilities: []csipb.ControllerServiceCapability_RPC_Type{
			csipb.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
			csipb.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME,
			csipb.ControllerServiceCapability_RPC_LIST_VOLUMES,
			csipb.ControllerServiceCapability_RPC_GET_CAPACITY,
			csipb.ControllerServiceCapability_RPC_CREATE_DELETE_SNAPSHOT,
			csipb.ControllerServiceCapability_RPC_LIST_SNAPSHOTS,
			csipb.ControllerServiceCapability_RPC_EXPAND_VOLUME,
		},
		NodeCapabilities: []csipb.NodeServiceCapability_RPC_Type{
			csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME,
			csipb.NodeServiceCapability_RPC_GET_VOLUME_STATS,
			csipb.NodeServiceCapability_RPC_EXPAND_VOLUME,
		},
		NodeID:         "fake-node",
		PublishContext: map[string]string{"device": "/dev/fake0"},
	}
}

func (s Settings) clone() Settings {
	out := s
	if s.Ready != nil {
		r := *s.Ready
		out.Ready = &r
	}
	out.PluginServices = slices.Clone(s.PluginServices)
	out.ControllerCapabilities = slices.Clone(s.ControllerCapabilities)
	out.NodeCapabilities = slices.Clone(s.NodeCapabilities)
	out.Topology = maps.Clone(s.Topology)
	out.PublishContext = maps.Clone(s.PublishContext)
	return out
}
