package state

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/hashicorp/go-memdb"
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
// their value while the plugin's controllers are gone or none could say
// what it advertises (a controller job restarting, or a failed
// ControllerGetCapabilities, must not turn claims that were
// controller-published into ones that are not).
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

	// Seed 6719: a controller whose ControllerGetCapabilities failed
	// fingerprints unhealthy with every capability false; it must not
	// turn the plugin into one that does not attach.
	n2 = n2.Copy()
	n2.CSIControllerPlugins["p"].Healthy = false
	n2.CSIControllerPlugins["p"].HealthDescription = "ControllerGetCapabilities failed: DeadlineExceeded"
	n2.CSIControllerPlugins["p"].ControllerInfo = &structs.CSIControllerInfo{}
	n2.CSIControllerPlugins["p"].ControllerCapsUnknown = true
	must.NoError(t, s.UpsertNode(4, n2))
	must.Eq(t, 0, plugin().ControllersHealthy)
	must.True(t, plugin().PublishUnpublish, must.Sprint("kept while no controller says"))
	must.True(t, plugin().PublishReadOnly)

	// An unhealthy controller that did say counts: the scheduler must know
	// the plugin attaches, to wait for a healthy controller.
	n2 = n2.Copy()
	n2.CSIControllerPlugins["p"].ControllerCapsUnknown = false
	must.NoError(t, s.UpsertNode(5, n2))
	must.False(t, plugin().PublishUnpublish, must.Sprint("an unhealthy controller that says it does not attach"))

	n2 = n2.Copy()
	n2.CSIControllerPlugins["p"].Healthy = true
	n2.CSIControllerPlugins["p"].ControllerInfo = &structs.CSIControllerInfo{SupportsAttachDetach: true}
	must.NoError(t, s.UpsertNode(6, n2))
	must.True(t, plugin().PublishUnpublish)

	n2 = n2.Copy()
	n2.CSIControllerPlugins = nil
	must.NoError(t, s.UpsertNode(7, n2))
	must.Eq(t, 0, plugin().ControllersExpected)
	must.True(t, plugin().PublishUnpublish, must.Sprint("kept while no controller instance is left"))
}

// BenchmarkNodePluginWrite measures one node write against a plugin that K
// nodes already run (issue 20: each write used to deep-copy and compare the
// whole plugin, making N node registrations cost O(N²)).
//
//	unchanged: the K-th node re-registers with the same fingerprint
//	changed:   the K-th node's instance flips health
//	register:  a new node joins (and, untimed, leaves again)
func BenchmarkNodePluginWrite(b *testing.B) {
	for _, k := range []int{100, 1000, 5000} {
		b.Run(fmt.Sprintf("K=%d", k), func(b *testing.B) {
			for _, kind := range []string{"unchanged", "changed", "register"} {
				b.Run(kind, func(b *testing.B) {
					s, index := benchPluginStore(b, k)
					last := benchPluginNode(fmt.Sprintf("n%05d", k-1))
					flipped := benchPluginNode(last.ID)
					flipped.CSINodePlugins["ebs"].Healthy = false
					b.ReportAllocs()
					b.ResetTimer()
					for i := range b.N {
						index++
						var err error
						switch kind {
						case "unchanged":
							err = s.UpsertNode(index, last)
						case "changed":
							n := last
							if i%2 == 0 {
								n = flipped
							}
							err = s.UpsertNode(index, n)
						case "register":
							err = s.UpsertNode(index, benchPluginNode("new"))
							b.StopTimer()
							index++
							if err == nil {
								err = s.DeleteNode(index, []string{"new"})
							}
							b.StartTimer()
						}
						if err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		})
	}
}

func benchPluginNode(id string) *structs.Node {
	n := mockNode(id)
	n.CSINodePlugins = map[string]*structs.CSIInfo{"ebs": csiInfo("ebs", false)}
	return n
}

// benchPluginStore returns a store where k ready nodes run plugin ebs's
// node instance, built by restore (building it by k node writes would
// itself cost what is being measured), and the next free index.
func benchPluginStore(b *testing.B, k int) (*StateStore, uint64) {
	b.Helper()
	s, err := NewStateStore(nil)
	if err != nil {
		b.Fatal(err)
	}
	r, err := s.Restore()
	if err != nil {
		b.Fatal(err)
	}
	p := &structs.CSIPlugin{ID: "ebs", Nodes: map[string]*structs.CSIInfo{}, CreateIndex: 1, ModifyIndex: 1}
	for i := range k {
		n := benchPluginNode(fmt.Sprintf("n%05d", i))
		n.CreateIndex, n.ModifyIndex = 1, 1
		n.SchedulingEligibility = structs.NodeSchedulingEligible
		if err := r.NodeRestore(n); err != nil {
			b.Fatal(err)
		}
		p.Nodes[n.ID] = n.CSINodePlugins["ebs"].Copy()
	}
	info := csiInfo("ebs", false)
	p.Provider, p.Version, p.ControllerRequired = info.Provider, info.ProviderVersion, true
	p.RecountHealth()
	if err := r.CSIPluginRestore(p); err != nil {
		b.Fatal(err)
	}
	if err := r.Commit(); err != nil {
		b.Fatal(err)
	}
	// The store must hold exactly what node writes would have made it:
	// re-registering a node unchanged leaves the plugin alone.
	last := benchPluginNode(fmt.Sprintf("n%05d", k-1))
	if err := s.UpsertNode(2, last); err != nil {
		b.Fatal(err)
	}
	if got, _ := s.CSIPluginByID(nil, "ebs"); got.ModifyIndex != 1 {
		b.Fatalf("benchmark store differs from what node writes build: plugin rewritten at %d", got.ModifyIndex)
	}
	return s, 3
}

// TestCSIPlugins_InstanceWriteIsCopyOnWrite: a node write compares only
// that node's instances (issue 20). An unchanged one writes nothing; a
// changed one is stored in a new plugin object, while a reader still
// holding the old object sees it exactly as it was.
func TestCSIPlugins_InstanceWriteIsCopyOnWrite(t *testing.T) {
	s := testStore(t)
	n1 := mockNode("n1")
	n1.CSIControllerPlugins = map[string]*structs.CSIInfo{"ebs": csiInfo("ebs", true)}
	n1.CSINodePlugins = map[string]*structs.CSIInfo{"ebs": csiInfo("ebs", false)}
	must.NoError(t, s.UpsertNode(10, n1))
	n2 := mockNode("n2")
	n2.CSINodePlugins = map[string]*structs.CSIInfo{"ebs": csiInfo("ebs", false)}
	must.NoError(t, s.UpsertNode(11, n2))

	old, err := s.CSIPluginByID(nil, "ebs")
	must.NoError(t, err)
	must.Eq(t, 11, old.ModifyIndex)
	before := old.Copy()

	// Unchanged fingerprint: the plugin and its table index stay put.
	must.NoError(t, s.UpsertNode(12, n2))
	p, _ := s.CSIPluginByID(nil, "ebs")
	must.Eq(t, 11, p.ModifyIndex)
	must.Eq(t, 11, mustIndex(t, s, TableCSIPlugins))

	// n2's node instance turns unhealthy and n1 drops its controller.
	n2 = mockNode("n2")
	bad := csiInfo("ebs", false)
	bad.Healthy, bad.HealthDescription = false, "probe failed"
	n2.CSINodePlugins = map[string]*structs.CSIInfo{"ebs": bad}
	must.NoError(t, s.UpsertNode(13, n2))
	n1 = mockNode("n1")
	n1.CSINodePlugins = map[string]*structs.CSIInfo{"ebs": csiInfo("ebs", false)}
	must.NoError(t, s.UpsertNode(14, n1))

	p, _ = s.CSIPluginByID(nil, "ebs")
	must.Eq(t, 14, p.ModifyIndex)
	must.Eq(t, 14, mustIndex(t, s, TableCSIPlugins))
	must.Eq(t, pluginCounts{0, 0, 1, 2}, counts(p))
	must.False(t, p.Nodes["n2"].Healthy)
	must.Eq(t, "probe failed", p.Nodes["n2"].HealthDescription)
	must.True(t, p.Nodes["n1"].Healthy)
	must.MapNotContainsKey(t, p.Controllers, "n1")
	must.True(t, p.PublishUnpublish) // kept while no controller runs

	// The object read before the writes is untouched: maps, instances
	// and counts.
	must.Eq(t, before, old)
	must.True(t, old.Nodes["n2"].Healthy)
	must.MapContainsKey(t, old.Controllers, "n1")
}

// TestCSIPlugins_NodeWriteTouchesOnlyItsOwnRows: the instances live in
// their own table (issue 20), so a node write changes that node's
// instance row and the plugin's summary row, nothing sized by the
// cluster: the other nodes' rows are the very objects they were, and the
// summary holds no instance maps.
func TestCSIPlugins_NodeWriteTouchesOnlyItsOwnRows(t *testing.T) {
	s := testStore(t)
	for i, id := range []string{"n1", "n2", "n3"} {
		n := mockNode(id)
		n.CSINodePlugins = map[string]*structs.CSIInfo{"ebs": csiInfo("ebs", false)}
		must.NoError(t, s.UpsertNode(uint64(10+i), n))
	}
	n1, _ := s.CSIPluginInstance(nil, "ebs", "n1")
	n3, _ := s.CSIPluginInstance(nil, "ebs", "n3")
	must.NotNil(t, n1)

	var changed []memdb.Change
	s.SetCommitHook(func(_ uint64, ch memdb.Changes) { changed = append(changed, ch...) })
	n2 := mockNode("n2")
	bad := csiInfo("ebs", false)
	bad.Healthy = false
	n2.CSINodePlugins = map[string]*structs.CSIInfo{"ebs": bad}
	must.NoError(t, s.UpsertNode(20, n2))

	var tables []string
	for _, ch := range changed {
		tables = append(tables, ch.Table)
		if in, ok := ch.After.(*structs.CSIPluginInstance); ok {
			must.Eq(t, "n2", in.NodeID)
			must.Eq(t, 20, in.ModifyIndex)
		}
	}
	slices.Sort(tables)
	must.Eq(t, []string{TableCSIPluginInstances, TableCSIPlugins, TableIndex, TableIndex, TableIndex, TableNodes}, tables)
	again1, _ := s.CSIPluginInstance(nil, "ebs", "n1")
	again3, _ := s.CSIPluginInstance(nil, "ebs", "n3")
	must.True(t, n1 == again1 && n3 == again3, must.Sprint("other nodes' rows rewritten"))

	summary, err := s.CSIPluginSummary(nil, "ebs")
	must.NoError(t, err)
	must.Nil(t, summary.Nodes)
	must.Nil(t, summary.Controllers)
	must.Eq(t, pluginCounts{0, 0, 2, 3}, counts(summary))
	must.Eq(t, 20, summary.ModifyIndex)
}

// TestCSIPlugins_SummaryMatchesInstances: the summary's counts and flags,
// kept one node write at a time, always equal what every instance says,
// computed from scratch, over a long random run of node registrations,
// status changes and deletions; and a restore, which recounts, agrees.
func TestCSIPlugins_SummaryMatchesInstances(t *testing.T) {
	s := testStore(t)
	rng := rand.New(rand.NewPCG(20, 1))
	info := func(controller bool) *structs.CSIInfo {
		if rng.IntN(4) == 0 {
			return nil
		}
		c := csiInfo("p", controller)
		c.Healthy = rng.IntN(3) > 0
		c.RequiresControllerPlugin = rng.IntN(2) == 0
		if controller {
			c.ControllerInfo = &structs.CSIControllerInfo{SupportsAttachDetach: rng.IntN(2) == 0, SupportsReadOnlyAttach: rng.IntN(2) == 0}
			if !c.Healthy && rng.IntN(2) == 0 {
				// ControllerGetCapabilities failed: it says nothing.
				c.ControllerInfo, c.ControllerCapsUnknown = &structs.CSIControllerInfo{}, true
			}
		}
		return c
	}
	// want computes the summary from the instance maps alone. A flag
	// keeps its previous value where the plugin has no instance to say
	// (ControllerRequired: none at all; the publish flags: no controller
	// that said what it advertises).
	var prev *structs.CSIPlugin
	want := func(full *structs.CSIPlugin) *structs.CSIPlugin {
		w := &structs.CSIPlugin{Controllers: full.Controllers, Nodes: full.Nodes}
		w.RecountHealth()
		if prev != nil {
			w.ControllerRequired, w.PublishUnpublish, w.PublishReadOnly = prev.ControllerRequired, prev.PublishUnpublish, prev.PublishReadOnly
		}
		if len(full.Controllers)+len(full.Nodes) > 0 {
			w.ControllerRequired = false
			for _, m := range []map[string]*structs.CSIInfo{full.Controllers, full.Nodes} {
				for _, in := range m {
					w.ControllerRequired = w.ControllerRequired || in.RequiresControllerPlugin
				}
			}
		}
		said := func(in *structs.CSIInfo) bool { return !in.ControllerCapsUnknown }
		if slices.ContainsFunc(slices.Collect(maps.Values(full.Controllers)), said) {
			w.PublishUnpublish, w.PublishReadOnly = false, false
			for _, in := range full.Controllers {
				w.PublishUnpublish = w.PublishUnpublish || said(in) && in.ControllerInfo.SupportsAttachDetach
				w.PublishReadOnly = w.PublishReadOnly || said(in) && in.ControllerInfo.SupportsReadOnlyAttach
			}
		}
		w.Controllers, w.Nodes = nil, nil
		return w
	}
	summaryOf := func(p *structs.CSIPlugin) [7]any {
		return [7]any{p.ControllersHealthy, p.ControllersExpected, p.NodesHealthy, p.NodesExpected,
			p.ControllerRequired, p.PublishUnpublish, p.PublishReadOnly}
	}
	registered := map[string]bool{}
	for index := uint64(1); index <= 600; index++ {
		id := fmt.Sprintf("n%d", rng.IntN(12))
		switch op := rng.IntN(10); {
		case op < 6 || !registered[id]:
			n := mockNode(id)
			if c := info(true); c != nil {
				n.CSIControllerPlugins = map[string]*structs.CSIInfo{"p": c}
			}
			if c := info(false); c != nil {
				n.CSINodePlugins = map[string]*structs.CSIInfo{"p": c}
			}
			must.NoError(t, s.UpsertNode(index, n))
			registered[id] = true
		case op < 9:
			status := structs.NodeStatusDown
			if rng.IntN(2) == 0 {
				status = structs.NodeStatusReady
			}
			must.NoError(t, s.UpdateNodeStatus(index, id, status, "", int64(index)))
		default:
			must.NoError(t, s.DeleteNode(index, []string{id}))
			delete(registered, id)
		}
		full, err := s.CSIPluginByID(nil, "p")
		must.NoError(t, err)
		if full == nil {
			continue
		}
		w := want(full)
		must.Eq(t, summaryOf(w), summaryOf(full), must.Sprintf("after write %d", index))
		prev = w
	}

	// A restore recounts from the instance rows and gets the same.
	dst := testStore(t)
	r, err := dst.Restore()
	must.NoError(t, err)
	snap, _ := s.Snapshot()
	iter, err := snap.CSIPlugins(nil)
	must.NoError(t, err)
	for raw := iter.Next(); raw != nil; raw = iter.Next() {
		must.NoError(t, r.CSIPluginRestore(raw.(*structs.CSIPlugin)))
	}
	iter, err = snap.AllCSIPluginInstances(nil)
	must.NoError(t, err)
	for raw := iter.Next(); raw != nil; raw = iter.Next() {
		must.NoError(t, r.CSIPluginInstanceRestore(raw.(*structs.CSIPluginInstance)))
	}
	must.NoError(t, r.Commit())
	got, _ := dst.CSIPluginByID(nil, "p")
	orig, _ := s.CSIPluginByID(nil, "p")
	must.Eq(t, summaryOf(orig), summaryOf(got))
	must.Eq(t, orig.Nodes, got.Nodes)
	must.Eq(t, orig.Controllers, got.Controllers)
}

// TestCSIPlugins_RestoreMovesOldInstances: a snapshot written before the
// instances had their own table carries them in the plugin's maps; the
// restore moves them into instance rows and stores the summary, and node
// writes after it adjust counts that are right.
func TestCSIPlugins_RestoreMovesOldInstances(t *testing.T) {
	s := testStore(t)
	r, err := s.Restore()
	must.NoError(t, err)
	n1, n2 := mockNode("n1"), mockNode("n2")
	n1.CSIControllerPlugins = map[string]*structs.CSIInfo{"ebs": csiInfo("ebs", true)}
	n1.CSINodePlugins = map[string]*structs.CSIInfo{"ebs": csiInfo("ebs", false)}
	n2.CSINodePlugins = map[string]*structs.CSIInfo{"ebs": csiInfo("ebs", false)}
	for _, n := range []*structs.Node{n1, n2} {
		n.CreateIndex, n.ModifyIndex = 5, 5
		must.NoError(t, r.NodeRestore(n))
	}
	// As an older server stored it: every instance in the plugin, counts
	// as it last computed them.
	old := &structs.CSIPlugin{ID: "ebs", Provider: "org.example.ebs", Version: "1.0.0", ControllerRequired: true,
		PublishUnpublish: true,
		Controllers:      map[string]*structs.CSIInfo{"n1": csiInfo("ebs", true)},
		Nodes:            map[string]*structs.CSIInfo{"n1": csiInfo("ebs", false), "n2": csiInfo("ebs", false)},
		CreateIndex:      5, ModifyIndex: 5}
	old.RecountHealth()
	must.NoError(t, r.CSIPluginRestore(old))
	must.NoError(t, r.Commit())

	summary, _ := s.CSIPluginSummary(nil, "ebs")
	must.Nil(t, summary.Nodes)
	must.Eq(t, pluginCounts{1, 1, 2, 2}, counts(summary))
	row, _ := s.CSIPluginInstance(nil, "ebs", "n1")
	must.NotNil(t, row.Controller)
	must.NotNil(t, row.Node)
	full, _ := s.CSIPluginByID(nil, "ebs")
	must.Eq(t, old.Nodes, full.Nodes)
	must.Eq(t, old.Controllers, full.Controllers)

	// Unchanged fingerprint: nothing written, as on the store that wrote
	// the snapshot.
	must.NoError(t, s.UpsertNode(6, n2))
	again, _ := s.CSIPluginSummary(nil, "ebs")
	must.Eq(t, 5, again.ModifyIndex)
	// n1 goes, and the controller's flags stay while none is left.
	must.NoError(t, s.DeleteNode(7, []string{"n1"}))
	summary, _ = s.CSIPluginSummary(nil, "ebs")
	must.Eq(t, pluginCounts{0, 0, 1, 1}, counts(summary))
	must.True(t, summary.PublishUnpublish)
	row, _ = s.CSIPluginInstance(nil, "ebs", "n1")
	must.Nil(t, row)
}
