package csimanager

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	csipb "github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/shoenig/test/must"
	"google.golang.org/grpc/codes"

	"github.com/berth-io/berth/client/dynamicplugins"
	"github.com/berth-io/berth/client/state"
	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/plugins/csi"
	"github.com/berth-io/berth/plugins/csi/fake"
	"github.com/berth-io/berth/testutil"
)

func TestBuildInfo(t *testing.T) {
	p := &dynamicplugins.PluginInfo{Name: "hp", AllocID: "a1", Version: "from-registry", Options: map[string]string{dynamicplugins.OptionProvider: "reg.provider"}}
	nodeOK := func() *probeResult {
		return &probeResult{
			Provider: "hostpath", Version: "0.1.0", Ready: true,
			PluginCaps: &csi.PluginCapabilitySet{ControllerService: true, VolumeAccessibilityConstraints: true},
			NodeInfo:   &csi.NodeInfo{ID: "ext-1", MaxVolumes: 3, AccessibleTopology: &structs.CSITopology{Segments: map[string]string{"zone": "a"}}},
			NodeCaps:   &csi.NodeCapabilitySet{StageUnstageVolume: true},
		}
	}
	cases := []struct {
		name        string
		typ         string
		result      func() *probeResult
		healthy     bool
		description string
		check       func(t *testing.T, info *structs.CSIInfo)
	}{
		{name: "healthy node plugin", typ: dynamicplugins.PluginTypeCSINode, result: nodeOK, healthy: true, description: "healthy",
			check: func(t *testing.T, info *structs.CSIInfo) {
				must.Eq(t, "hp", info.PluginID)
				must.Eq(t, "a1", info.AllocID)
				must.Eq(t, "hostpath", info.Provider)
				must.Eq(t, "0.1.0", info.ProviderVersion)
				must.True(t, info.RequiresControllerPlugin)
				must.True(t, info.RequiresTopologies)
				must.Eq(t, &structs.CSINodeInfo{ID: "ext-1", MaxVolumes: 3, RequiresNodeStageVolume: true,
					AccessibleTopology: &structs.CSITopology{Segments: map[string]string{"zone": "a"}}}, info.NodeInfo)
				must.Nil(t, info.ControllerInfo)
			}},
		{name: "provider and version fall back to the registration", typ: dynamicplugins.PluginTypeCSINode, healthy: true, description: "healthy",
			result: func() *probeResult { r := nodeOK(); r.Provider, r.Version = "", ""; return r },
			check: func(t *testing.T, info *structs.CSIInfo) {
				must.Eq(t, "reg.provider", info.Provider)
				must.Eq(t, "from-registry", info.ProviderVersion)
			}},
		{name: "probe failed", typ: dynamicplugins.PluginTypeCSINode, description: "probe failed: boom",
			result: func() *probeResult { r := nodeOK(); r.Ready, r.ProbeErr = false, errors.New("boom"); return r }},
		{name: "not ready", typ: dynamicplugins.PluginTypeCSINode, description: "plugin says it is not ready",
			result: func() *probeResult { r := nodeOK(); r.Ready = false; return r }},
		{name: "node info unknown", typ: dynamicplugins.PluginTypeCSINode, description: "NodeGetInfo failed: unavailable",
			result: func() *probeResult {
				r := nodeOK()
				r.NodeInfo, r.NodeInfoErr = nil, errors.New("unavailable")
				return r
			}},
		{name: "node capabilities unknown", typ: dynamicplugins.PluginTypeCSINode, description: "NodeGetCapabilities failed: not asked yet",
			result: func() *probeResult { r := nodeOK(); r.NodeCaps = nil; return r }},
		{name: "plugin capabilities unknown", typ: dynamicplugins.PluginTypeCSINode, description: "GetPluginCapabilities failed: x",
			result: func() *probeResult { r := nodeOK(); r.PluginCaps, r.PluginCapsErr = nil, errors.New("x"); return r }},
		{name: "healthy controller", typ: dynamicplugins.PluginTypeCSIController, healthy: true, description: "healthy",
			result: func() *probeResult {
				return &probeResult{Ready: true, PluginCaps: &csi.PluginCapabilitySet{ControllerService: true},
					ControllerCaps: &structs.CSIControllerInfo{SupportsAttachDetach: true, SupportsCreateDelete: true}}
			},
			check: func(t *testing.T, info *structs.CSIInfo) {
				must.Eq(t, &structs.CSIControllerInfo{SupportsAttachDetach: true, SupportsCreateDelete: true}, info.ControllerInfo)
				must.False(t, info.ControllerCapsUnknown)
				must.Nil(t, info.NodeInfo)
			}},
		{name: "controller capabilities unknown", typ: dynamicplugins.PluginTypeCSIController, description: "ControllerGetCapabilities failed: nope",
			result: func() *probeResult {
				return &probeResult{Ready: true, PluginCaps: &csi.PluginCapabilitySet{}, ControllerCapsErr: errors.New("nope")}
			},
			// Said as unknown, not as "supports nothing" (seed 6719).
			check: func(t *testing.T, info *structs.CSIInfo) { must.True(t, info.ControllerCapsUnknown) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			info := buildInfo(tc.typ, p, tc.result(), 42)
			must.Eq(t, tc.healthy, info.Healthy)
			must.Eq(t, tc.description, info.HealthDescription)
			must.Eq(t, 42, info.UpdateTime)
			if tc.check != nil {
				tc.check(t, info)
			}
		})
	}
}

func TestInfoEqualIgnoresUpdateTime(t *testing.T) {
	a := &structs.CSIInfo{PluginID: "p", Healthy: true, UpdateTime: 1, NodeInfo: &structs.CSINodeInfo{ID: "n"}}
	b := a.Copy()
	b.UpdateTime = 2
	must.True(t, infoEqual(a, b))
	b.NodeInfo.ID = "other"
	must.False(t, infoEqual(a, b))
	must.False(t, infoEqual(a, nil))
	must.True(t, infoEqual(nil, nil))
}

func TestManager_FingerprintsNodePluginAndReportsOnlyChanges(t *testing.T) {
	sock := socketPath(t)
	p := fake.Start(t, sock)
	p.Configure(func(s *fake.Settings) {
		s.NodeID, s.MaxVolumes, s.Topology = "ext-node-1", 7, map[string]string{"zone": "a"}
	})
	h := newManagerHarness(t, state.NewMemDB(), t.TempDir(), func(c *Config) { c.FingerprintInterval = 10 * time.Millisecond })
	h.register("fakeplug", dynamicplugins.PluginTypeCSINode, sock, "plugin-alloc")

	up := h.updates.waitFor(t, "a healthy fingerprint", func(u nodeUpdate) bool { return u.info != nil && u.info.Healthy })
	must.Eq(t, dynamicplugins.PluginTypeCSINode, up.typ)
	must.Eq(t, "fakeplug", up.id)
	must.Eq(t, "plugin-alloc", up.info.AllocID)
	must.Eq(t, "fake.csi.berth.io", up.info.Provider)
	must.Eq(t, "1.0.0", up.info.ProviderVersion)
	must.Eq(t, "ext-node-1", up.info.NodeInfo.ID)
	must.Eq(t, 7, up.info.NodeInfo.MaxVolumes)
	must.Eq(t, map[string]string{"zone": "a"}, up.info.NodeInfo.AccessibleTopology.Segments)
	must.True(t, up.info.NodeInfo.RequiresNodeStageVolume)

	// Many more fingerprints, nothing new to say.
	ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitTimeout)
	defer cancel()
	must.NoError(t, p.WaitForCalls(ctx, "Probe", p.Calls("Probe")+5))
	must.Len(t, 1, h.updates.all())
	must.Eq(t, 1, p.Calls("NodeGetInfo"), must.Sprint("node info is read once"))

	// Health changes are reported, both ways.
	notReady := false
	p.Configure(func(s *fake.Settings) { s.Ready = &notReady })
	h.updates.waitFor(t, "an unhealthy fingerprint", func(u nodeUpdate) bool {
		return u.info != nil && !u.info.Healthy && u.info.HealthDescription == "plugin says it is not ready"
	})
	p.Configure(func(s *fake.Settings) { s.Ready = nil })
	testutil.WaitForResult(t, func() (bool, error) {
		all := h.updates.all()
		last := all[len(all)-1]
		return len(all) == 3 && last.info.Healthy, fmt.Errorf("updates: %d", len(all))
	})

	// Deregistering removes the plugin from the node.
	must.NoError(t, h.registry.Deregister(dynamicplugins.PluginTypeCSINode, "fakeplug", "plugin-alloc"))
	h.updates.waitFor(t, "a removal", func(u nodeUpdate) bool { return u.info == nil })
	_, ok := h.mgr.NodePlugin("fakeplug")
	must.False(t, ok)
}

func TestManager_MonolithFingerprintsBothTypes(t *testing.T) {
	sock := socketPath(t)
	fake.Start(t, sock)
	h := newManagerHarness(t, state.NewMemDB(), t.TempDir(), nil)
	h.register("fakeplug", dynamicplugins.PluginTypeCSINode, sock, "a1")
	h.register("fakeplug", dynamicplugins.PluginTypeCSIController, sock, "a1")
	ctrl := h.updates.waitFor(t, "a controller fingerprint", func(u nodeUpdate) bool {
		return u.typ == dynamicplugins.PluginTypeCSIController && u.info != nil && u.info.Healthy
	})
	must.True(t, ctrl.info.ControllerInfo.SupportsAttachDetach)
	must.True(t, ctrl.info.ControllerInfo.SupportsCreateDelete)
	h.updates.waitFor(t, "a node fingerprint", func(u nodeUpdate) bool {
		return u.typ == dynamicplugins.PluginTypeCSINode && u.info != nil && u.info.Healthy
	})
}

func TestManager_ShutdownReportsPluginsUnhealthy(t *testing.T) {
	sock := socketPath(t)
	fake.Start(t, sock)
	h := newManagerHarness(t, state.NewMemDB(), t.TempDir(), nil)
	h.register("fakeplug", dynamicplugins.PluginTypeCSINode, sock, "a1")
	h.updates.waitFor(t, "a healthy fingerprint", func(u nodeUpdate) bool { return u.info != nil && u.info.Healthy })
	h.stop()
	all := h.updates.all()
	last := all[len(all)-1]
	must.NotNil(t, last.info)
	must.False(t, last.info.Healthy)
	must.Eq(t, "client is shutting down", last.info.HealthDescription)
}

func TestManager_ShutdownIsPromptWhilePluginHangs(t *testing.T) {
	sock := socketPath(t)
	p := fake.Start(t, sock)
	p.SetHang("Probe", true)
	h := newManagerHarness(t, state.NewMemDB(), t.TempDir(), nil)
	h.register("fakeplug", dynamicplugins.PluginTypeCSINode, sock, "a1")
	ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitTimeout)
	defer cancel()
	must.NoError(t, p.WaitForCalls(ctx, "Probe", 1))
	// The Probe hangs until the test ends: a stop that waited on it would
	// never return.
	testutil.Returns(t, "stopping the manager while a Probe hangs", h.stop)
}

func TestManager_WaitForNodePlugin(t *testing.T) {
	sock := socketPath(t)
	p := fake.Start(t, sock)
	h := newManagerHarness(t, state.NewMemDB(), t.TempDir(), nil)

	// Not registered: the error says so.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	_, err := h.mgr.WaitForNodePlugin(ctx, "fakeplug")
	cancel()
	must.ErrorIs(t, err, ErrPluginNotReady)
	must.ErrorContains(t, err, `CSI node plugin "fakeplug" is not running on this node`)

	// Registered but NodeGetInfo fails: the error says why.
	p.NextErr("NodeGetInfo", codes.Internal, codes.Internal, codes.Internal, codes.Internal, codes.Internal, codes.Internal)
	h.register("fakeplug", dynamicplugins.PluginTypeCSINode, sock, "a1")
	ctx, cancel = context.WithTimeout(context.Background(), 2*time.Second)
	must.NoError(t, p.WaitForCalls(ctx, "NodeGetInfo", 2))
	cancel()
	ctx, cancel = context.WithTimeout(context.Background(), 20*time.Millisecond)
	_, err = h.mgr.WaitForNodePlugin(ctx, "fakeplug")
	cancel()
	must.ErrorIs(t, err, ErrPluginNotReady)
	must.ErrorContains(t, err, "NodeGetInfo failed")

	// Once NodeGetInfo works, the waiter gets the plugin.
	vm := h.nodePlugin("fakeplug")
	must.Eq(t, "fake-node", vm.ExternalNodeID())
	must.Eq(t, "fakeplug", vm.PluginID())
	_, ok := h.mgr.NodePlugin("fakeplug")
	must.True(t, ok)
}

func TestManager_ReplacesInstanceWhenANewAllocRegisters(t *testing.T) {
	sock1, sock2 := socketPath(t), socketPath(t)
	fake.Start(t, sock1)
	p2 := fake.Start(t, sock2)
	p2.SetResponse("NodeGetInfo", &csipb.NodeGetInfoResponse{NodeId: "from-new-alloc"})
	h := newManagerHarness(t, state.NewMemDB(), t.TempDir(), nil)
	h.register("fakeplug", dynamicplugins.PluginTypeCSINode, sock1, "old")
	must.Eq(t, "fake-node", h.nodePlugin("fakeplug").ExternalNodeID())
	h.register("fakeplug", dynamicplugins.PluginTypeCSINode, sock2, "new")
	up := h.updates.waitFor(t, "the new alloc's fingerprint", func(u nodeUpdate) bool { return u.info != nil && u.info.AllocID == "new" })
	must.Eq(t, "from-new-alloc", up.info.NodeInfo.ID)
	for _, u := range h.updates.all() {
		must.NotNil(t, u.info, must.Sprint("a replaced plugin is never removed from the node"))
	}
}

// A controller with GET_CAPACITY reports GetCapacity's answer in its
// fingerprint, asked about the topology of the same plugin's node
// instance here; a failing GetCapacity is said, and the controller stays
// healthy.
func TestManager_ControllerFingerprintCarriesCapacity(t *testing.T) {
	sock := socketPath(t)
	p := fake.Start(t, sock)
	p.Configure(func(s *fake.Settings) { s.Topology = map[string]string{"zone": "a"} })
	h := newManagerHarness(t, state.NewMemDB(), t.TempDir(), func(c *Config) { c.FingerprintInterval = 10 * time.Millisecond })
	h.register("fakeplug", dynamicplugins.PluginTypeCSINode, sock, "a1")
	h.register("fakeplug", dynamicplugins.PluginTypeCSIController, sock, "a1")
	up := h.updates.waitFor(t, "a controller fingerprint with capacity for zone a", func(u nodeUpdate) bool {
		return u.typ == dynamicplugins.PluginTypeCSIController && u.info != nil && u.info.Capacity != nil &&
			u.info.Capacity.Topology != nil && u.info.Capacity.Topology.Segments["zone"] == "a"
	})
	must.True(t, up.info.Healthy)
	must.Eq(t, int64(1<<40), up.info.Capacity.AvailableBytes)
	must.Eq(t, "", up.info.Capacity.Error)
	req := p.LastRequest("GetCapacity").(*csipb.GetCapacityRequest)
	must.Eq(t, map[string]string{"zone": "a"}, req.GetAccessibleTopology().GetSegments())

	p.NextErr("GetCapacity", codes.Internal, codes.Internal, codes.Internal, codes.Internal, codes.Internal, codes.Internal)
	up = h.updates.waitFor(t, "a fingerprint saying GetCapacity failed", func(u nodeUpdate) bool {
		return u.typ == dynamicplugins.PluginTypeCSIController && u.info != nil && u.info.Capacity != nil && u.info.Capacity.Error != ""
	})
	must.StrContains(t, up.info.Capacity.Error, "GetCapacity failed: Internal")
	must.True(t, up.info.Healthy)
}
