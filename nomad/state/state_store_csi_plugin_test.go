package state

import (
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/structs"
)

// pluginCounts is what a plugin's health summary should read.
type pluginCounts struct {
	ctrlHealthy, ctrlExpected, nodesHealthy, nodesExpected int
}

func counts(p *structs.CSIPlugin) pluginCounts {
	return pluginCounts{p.ControllersHealthy, p.ControllersExpected, p.NodesHealthy, p.NodesExpected}
}

func TestCSIPlugins_DerivedFromNodes(t *testing.T) {
	s := testStore(t)

	// n1 runs the monolith's controller and node; n2 its node only.
	n1 := mockNode("n1")
	n1.CSIControllerPlugins = map[string]*structs.CSIInfo{"ebs": csiInfo("ebs", true)}
	n1.CSINodePlugins = map[string]*structs.CSIInfo{"ebs": csiInfo("ebs", false)}
	must.NoError(t, s.UpsertNode(10, n1))
	n2 := mockNode("n2")
	n2.CSINodePlugins = map[string]*structs.CSIInfo{"ebs": csiInfo("ebs", false), "nfs": csiInfo("nfs", false)}
	must.NoError(t, s.UpsertNode(11, n2))

	p, err := s.CSIPluginByID(nil, "ebs")
	must.NoError(t, err)
	must.Eq(t, pluginCounts{1, 1, 2, 2}, counts(p))
	must.Eq(t, "org.example.ebs", p.Provider)
	must.Eq(t, "1.0.0", p.Version)
	must.True(t, p.ControllerRequired)
	must.Eq(t, 10, p.CreateIndex)
	must.Eq(t, 11, p.ModifyIndex)
	must.MapContainsKeys(t, p.Nodes, []string{"n1", "n2"})
	must.Eq(t, 11, mustIndex(t, s, TableCSIPlugins))

	iter, err := s.CSIPlugins(nil)
	must.Eq(t, []string{"ebs", "nfs"}, ids(t, iter, err))
	iter, err = s.CSIPluginsByIDPrefix(nil, "n")
	must.Eq(t, []string{"nfs"}, ids(t, iter, err))

	// n2's ebs node instance turns unhealthy, and it stops running nfs.
	n2 = mockNode("n2")
	bad := csiInfo("ebs", false)
	bad.Healthy, bad.HealthDescription = false, "probe failed"
	bad.ProviderVersion = "1.1.0"
	n2.CSINodePlugins = map[string]*structs.CSIInfo{"ebs": bad}
	must.NoError(t, s.UpsertNode(12, n2))
	p, _ = s.CSIPluginByID(nil, "ebs")
	must.Eq(t, pluginCounts{1, 1, 1, 2}, counts(p))
	must.Eq(t, "1.1.0", p.Version)
	nfs, _ := s.CSIPluginByID(nil, "nfs")
	must.NotNil(t, nfs) // kept, empty, for plugin GC
	must.True(t, nfs.IsEmpty())
	must.Eq(t, pluginCounts{0, 0, 0, 0}, counts(nfs))
	must.Eq(t, 12, nfs.ModifyIndex)

	// A node write that does not change any instance leaves the plugins
	// (and their table index) alone.
	must.NoError(t, s.UpsertNode(13, n2))
	must.Eq(t, 12, mustIndex(t, s, TableCSIPlugins))
	must.Eq(t, 13, mustIndex(t, s, TableNodes))

	// n1 goes down: its instances are kept but counted unhealthy.
	must.NoError(t, s.UpdateNodeStatus(14, "n1", structs.NodeStatusDown, "", 1))
	p, _ = s.CSIPluginByID(nil, "ebs")
	must.Eq(t, pluginCounts{0, 1, 0, 2}, counts(p))
	must.Eq(t, healthNodeDown, p.Controllers["n1"].HealthDescription)
	must.Eq(t, healthNodeDown, p.Nodes["n1"].HealthDescription)
	n, _ := s.NodeByID(nil, "n1")
	must.True(t, n.CSIControllerPlugins["ebs"].Healthy) // the node's own fingerprint is untouched

	// n1 is back: its fingerprint is restored.
	must.NoError(t, s.UpdateNodeStatus(15, "n1", structs.NodeStatusReady, "", 2))
	p, _ = s.CSIPluginByID(nil, "ebs")
	must.Eq(t, pluginCounts{1, 1, 1, 2}, counts(p))
	must.Eq(t, "healthy", p.Controllers["n1"].HealthDescription)

	// Deleting n1 removes its instances.
	must.NoError(t, s.DeleteNode(16, []string{"n1"}))
	p, _ = s.CSIPluginByID(nil, "ebs")
	must.Eq(t, pluginCounts{0, 0, 0, 1}, counts(p))
	must.MapNotContainsKey(t, p.Nodes, "n1")
	must.True(t, p.ControllerRequired) // still, from n2's node instance
}

func TestCSIPlugins_NodeRegistersDown(t *testing.T) {
	s := testStore(t)
	n := mockNode("n1")
	n.Status = structs.NodeStatusDown
	n.CSINodePlugins = map[string]*structs.CSIInfo{"ebs": csiInfo("ebs", false)}
	must.NoError(t, s.UpsertNode(1, n))
	p, err := s.CSIPluginByID(nil, "ebs")
	must.NoError(t, err)
	must.Eq(t, pluginCounts{0, 0, 0, 1}, counts(p))
}

func TestCSIPlugins_Delete(t *testing.T) {
	s := testStore(t)
	n := mockNode("n1")
	n.CSINodePlugins = map[string]*structs.CSIInfo{"ebs": csiInfo("ebs", false)}
	must.NoError(t, s.UpsertNode(1, n))

	err := s.DeleteCSIPlugin(2, "ebs")
	must.ErrorIs(t, err, structs.ErrConflict)
	must.StrContains(t, err.Error(), `"ebs"`)
	must.ErrorIs(t, s.DeleteCSIPlugin(2, "nope"), structs.ErrNotFound)

	n = mockNode("n1") // the plugin is gone from the node
	must.NoError(t, s.UpsertNode(3, n))
	must.NoError(t, s.DeleteCSIPlugin(4, "ebs"))
	p, err := s.CSIPluginByID(nil, "ebs")
	must.NoError(t, err)
	must.Nil(t, p)
	must.Eq(t, 4, mustIndex(t, s, TableCSIPlugins))
}

// TestPluginProfile: PublishUnpublish and PublishReadOnly come from what
// the controllers advertise, are false for a plugin that never had a
// controller (node-only, or a monolith declared type = "node"), and keep
// their value while the plugin's controllers are gone (a controller job
// restarting must not turn claims that were controller-published into
// ones that are not).
func TestPluginProfile(t *testing.T) {
	s := testStore(t)
	plugin := func() *structs.CSIPlugin {
		p, err := s.CSIPluginByID(nil, "p")
		must.NoError(t, err)
		must.NotNil(t, p)
		return p
	}
	n1 := mockNode("n1")
	n1.CSINodePlugins = map[string]*structs.CSIInfo{"p": csiInfo("p", false)}
	must.NoError(t, s.UpsertNode(1, n1))
	must.False(t, plugin().PublishUnpublish, must.Sprint("node-only: no controller ever advertised it"))
	must.True(t, plugin().ControllerRequired, must.Sprint("the plugin says it has a controller service"))

	c := csiInfo("p", true)
	c.ControllerInfo = &structs.CSIControllerInfo{SupportsAttachDetach: false}
	n2 := mockNode("n2")
	n2.CSIControllerPlugins = map[string]*structs.CSIInfo{"p": c}
	must.NoError(t, s.UpsertNode(2, n2))
	must.False(t, plugin().PublishUnpublish, must.Sprint("a controller without PUBLISH_UNPUBLISH_VOLUME"))

	n2 = n2.Copy()
	n2.CSIControllerPlugins["p"].ControllerInfo = &structs.CSIControllerInfo{SupportsAttachDetach: true, SupportsReadOnlyAttach: true}
	must.NoError(t, s.UpsertNode(3, n2))
	must.True(t, plugin().PublishUnpublish, must.Sprint("upgraded: re-read"))
	must.True(t, plugin().PublishReadOnly)

	n2 = n2.Copy()
	n2.CSIControllerPlugins = nil
	must.NoError(t, s.UpsertNode(4, n2))
	must.Eq(t, 0, plugin().ControllersExpected)
	must.True(t, plugin().PublishUnpublish, must.Sprint("kept while no controller instance is left"))
}
