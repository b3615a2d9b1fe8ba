package csi

import (
	"reflect"
	"testing"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/plugins/csi/fake"
)

func TestPluginInfo(t *testing.T) {
	h := newHarness(t)
	h.plugin.Configure(func(s *fake.Settings) { s.Name, s.Version = "org.example.disk", "v1.2.3" })

	name, version, err := h.client.PluginInfo(testCtx(t))
	must.NoError(t, err)
	must.EqOp(t, "org.example.disk", name)
	must.EqOp(t, "v1.2.3", version)

	t.Run("empty name is an error", func(t *testing.T) {
		h.plugin.Configure(func(s *fake.Settings) { s.Name = "" })
		_, _, err := h.client.PluginInfo(testCtx(t))
		must.ErrorIs(t, err, ErrFinal)
		must.StrContains(t, err.Error(), "empty name")
	})
}

func TestProbe(t *testing.T) {
	yes, no := true, false
	cases := []struct {
		name  string
		ready *bool
		want  bool
	}{
		{"unset counts as ready", nil, true},
		{"ready", &yes, true},
		{"not ready", &no, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			h.plugin.Configure(func(s *fake.Settings) { s.Ready = tc.ready })
			ready, err := h.client.Probe(testCtx(t))
			must.NoError(t, err)
			must.EqOp(t, tc.want, ready)
		})
	}
}

// Capability numbers this spec version does not know are skipped, whatever
// the list they are in.
func TestCapabilities_UnknownNumbersIgnored(t *testing.T) {
	h := newHarness(t)
	h.plugin.Configure(func(s *fake.Settings) {
		s.PluginServices = []csipb.PluginCapability_Service_Type{
			csipb.PluginCapability_Service_UNKNOWN,
			csipb.PluginCapability_Service_CONTROLLER_SERVICE,
			csipb.PluginCapability_Service_VOLUME_ACCESSIBILITY_CONSTRAINTS,
			csipb.PluginCapability_Service_Type(77),
		}
		s.VolumeExpansion = csipb.PluginCapability_VolumeExpansion_ONLINE
		s.ControllerCapabilities = []csipb.ControllerServiceCapability_RPC_Type{
			csipb.ControllerServiceCapability_RPC_UNKNOWN,
			csipb.ControllerServiceCapability_RPC_CREATE_DELETE_VOLUME,
			csipb.ControllerServiceCapability_RPC_PUBLISH_UNPUBLISH_VOLUME,
			csipb.ControllerServiceCapability_RPC_PUBLISH_READONLY,
			csipb.ControllerServiceCapability_RPC_LIST_VOLUMES_PUBLISHED_NODES,
			csipb.ControllerServiceCapability_RPC_VOLUME_CONDITION,
			csipb.ControllerServiceCapability_RPC_Type(16), // e.g. a v1.13 health capability
			csipb.ControllerServiceCapability_RPC_Type(99),
		}
		s.NodeCapabilities = []csipb.NodeServiceCapability_RPC_Type{
			csipb.NodeServiceCapability_RPC_UNKNOWN, // as csi-test's mock-driver sends
			csipb.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME,
			csipb.NodeServiceCapability_RPC_VOLUME_CONDITION,
			csipb.NodeServiceCapability_RPC_Type(42),
		}
	})

	pcaps, err := h.client.PluginCapabilities(testCtx(t))
	must.NoError(t, err)
	must.Eq(t, &PluginCapabilitySet{ControllerService: true, VolumeAccessibilityConstraints: true, OnlineExpansion: true}, pcaps)
	var info structs.CSIInfo
	pcaps.Fill(&info)
	must.True(t, info.RequiresControllerPlugin)
	must.True(t, info.RequiresTopologies)

	ccaps, err := h.client.ControllerGetCapabilities(testCtx(t))
	must.NoError(t, err)
	must.Eq(t, &structs.CSIControllerInfo{
		SupportsCreateDelete: true, SupportsAttachDetach: true, SupportsReadOnlyAttach: true,
		SupportsListVolumesAttachedNodes: true, SupportsCondition: true,
	}, ccaps)

	ncaps, err := h.client.NodeGetCapabilities(testCtx(t))
	must.NoError(t, err)
	must.Eq(t, &NodeCapabilitySet{StageUnstageVolume: true, VolumeCondition: true}, ncaps)
	var ninfo structs.CSINodeInfo
	ncaps.Fill(&ninfo)
	must.Eq(t, structs.CSINodeInfo{RequiresNodeStageVolume: true, SupportsCondition: true}, ninfo)
}

// Every controller capability Berth records lands in its own field, and
// every field is reachable from one capability.
func TestCapabilities_FillEveryField(t *testing.T) {
	var all []*csipb.ControllerServiceCapability
	seen := map[string]csipb.ControllerServiceCapability_RPC_Type{}
	for typ := range controllerCapabilities {
		one := controllerCapabilitiesFromProto([]*csipb.ControllerServiceCapability{controllerCap(typ)})
		set := setFields(one)
		must.SliceLen(t, 1, set, must.Sprintf("%s sets %v", typ, set))
		if prev, dup := seen[set[0]]; dup {
			t.Errorf("%s and %s both set %s", prev, typ, set[0])
		}
		seen[set[0]] = typ
		all = append(all, controllerCap(typ))
	}
	must.MapLen(t, reflect.TypeFor[structs.CSIControllerInfo]().NumField(), seen)
	// A capability Berth does not record, and an unknown number, set nothing.
	all = append(all, controllerCap(csipb.ControllerServiceCapability_RPC_MODIFY_VOLUME), controllerCap(0), controllerCap(999))
	must.SliceLen(t, len(seen), setFields(controllerCapabilitiesFromProto(all)))

	var ninfo structs.CSINodeInfo
	(&NodeCapabilitySet{StageUnstageVolume: true, GetVolumeStats: true, ExpandVolume: true, VolumeCondition: true}).Fill(&ninfo)
	must.Eq(t, structs.CSINodeInfo{
		RequiresNodeStageVolume: true, SupportsStats: true, SupportsExpand: true, SupportsCondition: true,
	}, ninfo)
}

func TestNodeGetInfo(t *testing.T) {
	h := newHarness(t)
	h.plugin.Configure(func(s *fake.Settings) {
		s.NodeID, s.MaxVolumes, s.Topology = "i-0abc", 16, map[string]string{"zone": "eu-1a"}
	})

	ni, err := h.client.NodeGetInfo(testCtx(t))
	must.NoError(t, err)
	want := &NodeInfo{ID: "i-0abc", MaxVolumes: 16, AccessibleTopology: &structs.CSITopology{Segments: map[string]string{"zone": "eu-1a"}}}
	must.Eq(t, want, ni)

	var info structs.CSINodeInfo
	ni.Fill(&info)
	must.EqOp(t, "i-0abc", info.ID)
	must.EqOp(t, int64(16), info.MaxVolumes)
	must.True(t, info.AccessibleTopology.Equal(want.AccessibleTopology))

	t.Run("no topology", func(t *testing.T) {
		h.plugin.Configure(func(s *fake.Settings) { s.Topology = nil })
		ni, err := h.client.NodeGetInfo(testCtx(t))
		must.NoError(t, err)
		must.Nil(t, ni.AccessibleTopology)
	})
	t.Run("empty node ID is an error", func(t *testing.T) {
		h.plugin.Configure(func(s *fake.Settings) { s.NodeID = "" })
		_, err := h.client.NodeGetInfo(testCtx(t))
		must.ErrorIs(t, err, ErrFinal)
		must.StrContains(t, err.Error(), "empty node ID")
	})
}

func controllerCap(typ csipb.ControllerServiceCapability_RPC_Type) *csipb.ControllerServiceCapability {
	return &csipb.ControllerServiceCapability{Type: &csipb.ControllerServiceCapability_Rpc{
		Rpc: &csipb.ControllerServiceCapability_RPC{Type: typ},
	}}
}

// setFields names the true bool fields of c.
func setFields(c *structs.CSIControllerInfo) []string {
	var out []string
	v := reflect.ValueOf(c).Elem()
	for i := range v.NumField() {
		if v.Field(i).Bool() {
			out = append(out, v.Type().Field(i).Name)
		}
	}
	return out
}
