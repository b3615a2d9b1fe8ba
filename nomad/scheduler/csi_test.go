package scheduler

import (
	"fmt"
	"testing"

	"github.com/hashicorp/go-memdb"
	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/structs"
)

const plugin = "hostpath"

func TestCSI_SingleNodeWriterPlacedOnceSecondJobBlocked(t *testing.T) {
	h := newHarness(t)
	for i := range 2 {
		h.upsertNode(csiNode(i, plugin, 0, nil))
	}
	h.upsertVolume(testVolume("db", plugin))

	a := h.upsertJob(withVolume(testJob("a", 1), "db", false, structs.CSIVolumeAccessModeSingleNodeWriter))
	evalA := h.process(testEval(a, structs.EvalTriggerJobRegister))
	must.Nil(t, evalA.FailedTGAllocs)
	placed := h.live(a)
	must.SliceLen(t, 1, placed)

	// The claim is reserved with the placement, in the same plan.
	vol, err := h.store.CSIVolumeByID(nil, structs.DefaultNamespace, "db")
	must.NoError(t, err)
	must.MapLen(t, 1, vol.Claims)
	claim := vol.Claims[placed[0].ID]
	must.NotNil(t, claim)
	must.Eq(t, structs.CSIClaimReserved, claim.Step)
	must.Eq(t, structs.CSIVolumeClaimWrite, claim.Mode)
	must.Eq(t, structs.CSIVolumeAccessModeSingleNodeWriter, claim.AccessMode)
	must.Eq(t, structs.CSIVolumeAttachmentModeFilesystem, claim.AttachmentMode)
	must.Eq(t, placed[0].NodeID, claim.NodeID)
	must.Eq(t, "a", claim.JobID)

	b := h.upsertJob(withVolume(testJob("b", 1), "db", false, structs.CSIVolumeAccessModeSingleNodeWriter))
	evalB := h.process(testEval(b, structs.EvalTriggerJobRegister))
	must.SliceEmpty(t, h.live(b))
	must.NotEq(t, "", evalB.BlockedEval)
	want := fmt.Sprintf(`volume "db": single-node-writer already claimed by alloc %s on node %s (reserved, waiting for the alloc to start)`,
		placed[0].ID[:8], placed[0].NodeID[:8])
	must.Eq(t, map[string]int{want: 2}, evalB.FailedTGAllocs["web"].ConstraintFiltered)

	// While the claim is being released the message says so.
	c := claim.Copy()
	c.Step = structs.CSIClaimNodeDetached
	h.claim(structs.DefaultNamespace, "db", c)
	evalB = h.process(testEval(b, structs.EvalTriggerQueuedAllocs))
	want = fmt.Sprintf(`volume "db": single-node-writer already claimed by alloc %s on node %s (releasing: controller unpublish pending)`,
		placed[0].ID[:8], placed[0].NodeID[:8])
	must.MapContainsKey(t, evalB.FailedTGAllocs["web"].ConstraintFiltered, want)

	// Once it is freed, b places.
	c = c.Copy()
	c.Step = structs.CSIClaimControllerDetached
	h.claim(structs.DefaultNamespace, "db", c)
	c = c.Copy()
	c.Step = structs.CSIClaimFreed
	h.claim(structs.DefaultNamespace, "db", c)
	evalB = h.process(testEval(b, structs.EvalTriggerQueuedAllocs))
	must.Nil(t, evalB.FailedTGAllocs)
	must.SliceLen(t, 1, h.live(b))
}

func TestCSI_ClaimsInOnePlanCount(t *testing.T) {
	// Two groups of one job want the same single-node-writer volume: the
	// second sees the first's reservation in the same plan.
	h := newHarness(t)
	for i := range 2 {
		h.upsertNode(csiNode(i, plugin, 0, nil))
	}
	h.upsertVolume(testVolume("db", plugin))
	j := withVolume(testJob("a", 1), "db", false, structs.CSIVolumeAccessModeSingleNodeWriter)
	tg2 := j.TaskGroups[0].Copy()
	tg2.Name = "second"
	j.TaskGroups = append(j.TaskGroups, tg2)
	job := h.upsertJob(j)
	eval := h.process(testEval(job, structs.EvalTriggerJobRegister))
	must.SliceLen(t, 1, h.live(job))
	must.MapLen(t, 1, eval.FailedTGAllocs)
}

func TestCSI_PerAllocResolution(t *testing.T) {
	h := newHarness(t)
	for i := range 2 {
		h.upsertNode(csiNode(i, plugin, 0, nil))
	}
	h.upsertVolume(testVolume("db[0]", plugin))
	h.upsertVolume(testVolume("db[2]", plugin))
	job := h.upsertJob(withVolume(testJob("a", 3), "db", true, structs.CSIVolumeAccessModeSingleNodeWriter))
	eval := h.process(testEval(job, structs.EvalTriggerJobRegister))

	live := h.live(job)
	must.SliceLen(t, 2, live)
	must.Eq(t, "a.web[0]", live[0].Name)
	must.Eq(t, "a.web[2]", live[1].Name)
	for _, a := range live {
		vol, err := h.store.CSIVolumeByID(nil, structs.DefaultNamespace, fmt.Sprintf("db[%d]", a.Index()))
		must.NoError(t, err)
		must.MapContainsKey(t, vol.Claims, a.ID)
	}
	m := eval.FailedTGAllocs["web"]
	must.Eq(t, map[string]int{`volume "db[1]": not found in namespace "default"`: 2}, m.ConstraintFiltered)
	must.Eq(t, map[string]int{"web": 1}, eval.QueuedAllocations)
}

func TestCSI_NodeChecks(t *testing.T) {
	cases := []struct {
		name string
		// edit0 makes node 0 fail the check; node 1, when there, passes.
		edit0  func(n *structs.Node)
		vol    func(v *structs.CSIVolume)
		setup  func(h *harness)
		reason string
	}{
		{
			name:   "plugin missing",
			edit0:  func(n *structs.Node) { n.CSINodePlugins = nil },
			reason: `volume "db": CSI plugin "hostpath" is not running on the node`,
		},
		{
			name:   "plugin unhealthy",
			edit0:  func(n *structs.Node) { n.CSINodePlugins[plugin].Healthy = false },
			reason: `volume "db": CSI plugin "hostpath" is unhealthy on the node`,
		},
		{
			name: "max volumes",
			edit0: func(n *structs.Node) {
				n.CSINodePlugins[plugin].NodeInfo.MaxVolumes = 1
			},
			setup: func(h *harness) {
				h.upsertVolume(testVolume("other", plugin))
				h.claim(structs.DefaultNamespace, "other", &structs.CSIVolumeClaim{
					AllocID: "other-alloc", NodeID: testNode(0).ID, Mode: structs.CSIVolumeClaimWrite,
					AccessMode: structs.CSIVolumeAccessModeSingleNodeWriter, Step: structs.CSIClaimTaken,
				})
			},
			reason: `volume "db": CSI plugin "hostpath" already has its maximum of 1 volumes on the node`,
		},
		{
			name: "topology",
			edit0: func(n *structs.Node) {
				n.CSINodePlugins[plugin].NodeInfo.AccessibleTopology = &structs.CSITopology{Segments: map[string]string{"zone": "b"}}
			},
			vol: func(v *structs.CSIVolume) {
				v.Topologies = []*structs.CSITopology{{Segments: map[string]string{"zone": "a"}}, {Segments: map[string]string{"zone": "c", "rack": "r1"}}}
			},
			reason: `volume "db": the node's topology zone=b is not one of the volume's (zone=a or rack=r1,zone=c)`,
		},
	}
	for _, tc := range cases {
		for _, only0 := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/only failing node %v", tc.name, only0), func(t *testing.T) {
				h := newHarness(t)
				n0 := csiNode(0, plugin, 0, nil)
				tc.edit0(n0)
				h.upsertNode(n0)
				if !only0 {
					h.upsertNode(csiNode(1, plugin, 1, map[string]string{"zone": "a"}))
				}
				if tc.setup != nil {
					tc.setup(h)
				}
				v := testVolume("db", plugin)
				if tc.vol != nil {
					tc.vol(v)
				}
				h.upsertVolume(v)
				job := h.upsertJob(withVolume(testJob("a", 1), "db", false, structs.CSIVolumeAccessModeSingleNodeWriter))
				eval := h.process(testEval(job, structs.EvalTriggerJobRegister))
				if only0 {
					must.SliceEmpty(t, h.live(job))
					must.Eq(t, map[string]int{tc.reason: 1}, eval.FailedTGAllocs["web"].ConstraintFiltered)
					return
				}
				live := h.live(job)
				must.SliceLen(t, 1, live)
				must.Eq(t, testNode(1).ID, live[0].NodeID)
			})
		}
	}
}

// A node whose plugin reports more segments than the volume's topology
// (zone and rack, for a volume of a zone) reaches it; a volume without
// topologies is reachable from a node that reports none.
func TestCSI_TopologyIsMatchedBySegments(t *testing.T) {
	h := newHarness(t)
	h.upsertNode(csiNode(0, plugin, 0, map[string]string{"zone": "b", "rack": "r1"}))
	h.upsertNode(csiNode(1, plugin, 0, map[string]string{"zone": "a", "rack": "r7"}))
	h.upsertNode(csiNode(2, plugin, 0, nil))
	v := testVolume("db", plugin)
	v.Topologies = []*structs.CSITopology{{Segments: map[string]string{"zone": "a"}}}
	h.upsertVolume(v)
	job := h.upsertJob(withVolume(testJob("a", 1), "db", false, structs.CSIVolumeAccessModeSingleNodeWriter))
	h.process(testEval(job, structs.EvalTriggerJobRegister))
	live := h.live(job)
	must.SliceLen(t, 1, live)
	must.Eq(t, testNode(1).ID, live[0].NodeID)

	must.True(t, (&structs.CSITopology{}).AccessibleFrom(nil))
	must.False(t, v.Topologies[0].AccessibleFrom(nil))
	must.False(t, v.Topologies[0].AccessibleFrom(&structs.CSITopology{Segments: map[string]string{"region": "a"}}))
}

// TestCSI_SingleNodeReaderIsClaimedOnce: single-node-reader-only is one
// claim in total, so a second reader is filtered on every node, the
// holder's node included. CSI says SINGLE_NODE_READER_ONLY "can only be
// published once as readonly on a single node", and unlike the writer
// modes (SINGLE_NODE_SINGLE_WRITER / _MULTI_WRITER) it has no variant for
// several workloads on one node; Nomad grants it one reader too. Seeds
// 3864 and 7383 reported this as a job starved on the holder's node; the
// holder was a live job whose stop the servers had refused (the
// simulator's TestRunsCheck_ARefusedStopLeavesTheJobLive).
func TestCSI_SingleNodeReaderIsClaimedOnce(t *testing.T) {
	h := newHarness(t)
	for i := range 2 {
		h.upsertNode(csiNode(i, plugin, 0, nil))
	}
	vol := testVolume("cfg", plugin)
	vol.RequestedCapabilities = []*structs.CSIVolumeCapability{
		{AccessMode: structs.CSIVolumeAccessModeSingleNodeReader, AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem}}
	h.upsertVolume(vol)

	a := h.upsertJob(withVolume(testJob("a", 1), "cfg", false, structs.CSIVolumeAccessModeSingleNodeReader))
	must.Nil(t, h.process(testEval(a, structs.EvalTriggerJobRegister)).FailedTGAllocs)
	placed := h.live(a)
	must.SliceLen(t, 1, placed)

	b := h.upsertJob(withVolume(testJob("b", 1), "cfg", false, structs.CSIVolumeAccessModeSingleNodeReader))
	evalB := h.process(testEval(b, structs.EvalTriggerJobRegister))
	must.SliceEmpty(t, h.live(b))
	want := fmt.Sprintf(`volume "cfg": single-node-reader-only already claimed by alloc %s on node %s (reserved, waiting for the alloc to start)`,
		placed[0].ID[:8], placed[0].NodeID[:8])
	must.Eq(t, map[string]int{want: 2}, evalB.FailedTGAllocs["web"].ConstraintFiltered)
}

func TestCSI_MultiNodeReaderSharesVolume(t *testing.T) {
	h := newHarness(t)
	for i := range 3 {
		h.upsertNode(csiNode(i, plugin, 0, nil))
	}
	h.upsertVolume(testVolume("shared", plugin))
	job := h.upsertJob(withVolume(testJob("a", 3), "shared", false, structs.CSIVolumeAccessModeMultiNodeReader))
	eval := h.process(testEval(job, structs.EvalTriggerJobRegister))
	must.Nil(t, eval.FailedTGAllocs)
	must.SliceLen(t, 3, h.live(job))
	vol, err := h.store.CSIVolumeByID(nil, structs.DefaultNamespace, "shared")
	must.NoError(t, err)
	must.MapLen(t, 3, vol.Claims)
	for _, c := range vol.Claims {
		must.Eq(t, structs.CSIVolumeClaimRead, c.Mode)
	}
}

func TestCSI_UnsupportedAccessMode(t *testing.T) {
	h := newHarness(t)
	h.upsertNode(csiNode(0, plugin, 0, nil))
	h.upsertVolume(testVolume("db", plugin))
	job := h.upsertJob(withVolume(testJob("a", 1), "db", false, structs.CSIVolumeAccessModeMultiNodeMultiWriter))
	eval := h.process(testEval(job, structs.EvalTriggerJobRegister))
	must.Eq(t, map[string]int{`volume "db": does not support access mode multi-node-multi-writer with attachment mode file-system`: 1},
		eval.FailedTGAllocs["web"].ConstraintFiltered)
}

// TestCSI_PluginMustServeClaims: a volume whose plugin attaches through
// its controller (PUBLISH_UNPUBLISH_VOLUME) is infeasible while no
// controller instance is healthy, with a reason that names the plugin and
// what to check; a node-only plugin (a monolith declared type = "node":
// it says it has a controller service, but no controller instance ever
// fingerprinted) places with node instances alone; a volume that is not
// ready places nowhere.
func TestCSI_PluginMustServeClaims(t *testing.T) {
	for _, tc := range []struct {
		name       string
		controller *structs.CSIInfo // on node 0, nil for none
		state      structs.CSIVolumeState
		want       string // the placement failure, "" when placed
	}{
		{name: "node-only plugin places"},
		{name: "controller without PUBLISH_UNPUBLISH places",
			controller: &structs.CSIInfo{PluginID: plugin, Healthy: true, ControllerInfo: &structs.CSIControllerInfo{}}},
		{name: "attaching controller, healthy, places",
			controller: &structs.CSIInfo{PluginID: plugin, Healthy: true,
				ControllerInfo: &structs.CSIControllerInfo{SupportsAttachDetach: true}}},
		{name: "attaching controller, unhealthy, is infeasible",
			controller: &structs.CSIInfo{PluginID: plugin, Healthy: false,
				ControllerInfo: &structs.CSIControllerInfo{SupportsAttachDetach: true}},
			want: `volume "db": CSI plugin "hostpath" attaches volumes through its controller, and none of its 1 controller instances is healthy; check the plugin's controller job`},
		{name: "a volume being created is infeasible", state: structs.CSIVolumeStateCreating,
			want: `volume "db": is creating, not ready for claims`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			n := csiNode(0, plugin, 0, nil)
			n.CSINodePlugins[plugin].RequiresControllerPlugin = true
			if tc.controller != nil {
				n.CSIControllerPlugins = map[string]*structs.CSIInfo{plugin: tc.controller}
			}
			h.upsertNode(n)
			v := testVolume("db", plugin)
			if tc.state != "" {
				v.State = tc.state
			}
			h.upsertVolume(v)
			job := h.upsertJob(withVolume(testJob("a", 1), "db", false, structs.CSIVolumeAccessModeSingleNodeWriter))
			eval := h.process(testEval(job, structs.EvalTriggerJobRegister))
			if tc.want == "" {
				must.Nil(t, eval.FailedTGAllocs)
				must.SliceLen(t, 1, h.live(job))
				return
			}
			must.SliceEmpty(t, h.live(job))
			must.NotEq(t, "", eval.BlockedEval, must.Sprint("it waits for the plugin, blocked"))
			must.Eq(t, map[string]int{tc.want: 1}, eval.FailedTGAllocs["web"].ConstraintFiltered)
		})
	}
}

// TestCSI_SingleNodeMultiWriterNeedsTheCapability: the single-node-single-
// and -multi-writer access modes go only to nodes whose plugin advertises
// SINGLE_NODE_MULTI_WRITER (the CSI spec forbids them otherwise); other
// modes do not care.
func TestCSI_SingleNodeMultiWriterNeedsTheCapability(t *testing.T) {
	for _, tc := range []struct {
		access  structs.CSIVolumeAccessMode
		capable bool
		placed  bool
	}{
		{structs.CSIVolumeAccessModeSingleNodeMultiWriter, false, false},
		{structs.CSIVolumeAccessModeSingleNodeMultiWriter, true, true},
		{structs.CSIVolumeAccessModeSingleNodeSingleWriter, false, false},
		{structs.CSIVolumeAccessModeSingleNodeWriter, false, true},
	} {
		t.Run(fmt.Sprintf("%s/%v", tc.access, tc.capable), func(t *testing.T) {
			h := newHarness(t)
			n := csiNode(0, plugin, 0, nil)
			n.CSINodePlugins[plugin].NodeInfo.SupportsSingleNodeMultiWriter = tc.capable
			h.upsertNode(n)
			v := testVolume("db", plugin)
			v.RequestedCapabilities = append(v.RequestedCapabilities, &structs.CSIVolumeCapability{
				AccessMode: tc.access, AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem})
			h.upsertVolume(v)
			job := h.upsertJob(withVolume(testJob("a", 1), "db", false, tc.access))
			eval := h.process(testEval(job, structs.EvalTriggerJobRegister))
			if tc.placed {
				must.Nil(t, eval.FailedTGAllocs)
				return
			}
			must.SliceEmpty(t, h.live(job))
			want := fmt.Sprintf(`volume "db": CSI plugin "hostpath" on the node does not support access mode %s `+
				"(it lacks the SINGLE_NODE_MULTI_WRITER capability); use single-node-writer", tc.access)
			must.Eq(t, map[string]int{want: 1}, eval.FailedTGAllocs["web"].ConstraintFiltered)
		})
	}
}

// countingState counts the scheduler's reads of a job's allocs: one per
// planning pass.
type countingState struct {
	State
	reads *int
}

func (c *countingState) AllocsByJob(ws memdb.WatchSet, ns, jobID string) ([]*structs.Allocation, error) {
	*c.reads++
	return c.State.AllocsByJob(ws, ns, jobID)
}

// A plan is one Raft entry, bounded in size: an eval with more placements
// than MaxPlacementsPerPlan commits them in several plans, cut from one
// planning pass (not one pass per plan, each re-reading the job and
// rebuilding its rankings), and places every alloc with its own claim
// once.
func TestCSI_PlacementsBeyondOnePlanGoInSeveral(t *testing.T) {
	h := newHarness(t)
	h.maxPlace = 10
	reads := 0
	h.wrap = func(st State) State { return &countingState{State: st, reads: &reads} }
	for i := range 5 {
		h.upsertNode(csiNode(i, plugin, 0, nil))
	}
	for i := range 25 {
		h.upsertVolume(testVolume(fmt.Sprintf("db[%d]", i), plugin))
	}
	job := h.upsertJob(withVolume(testJob("a", 25), "db", true, structs.CSIVolumeAccessModeSingleNodeWriter))
	job.TaskGroups[0].Tasks[0].Resources = &structs.Resources{CPU: 10, MemoryMB: 10}
	job = h.upsertJob(job)
	eval := h.process(testEval(job, structs.EvalTriggerJobRegister))
	must.Eq(t, structs.EvalStatusComplete, eval.Status)
	must.Nil(t, eval.FailedTGAllocs)
	must.SliceLen(t, 3, h.plans)
	for i, want := range []int{10, 10, 5} {
		_, n := h.plans[i].Counts()
		must.Eq(t, want, n, must.Sprintf("plan %d", i))
		must.Eq(t, h.plans[0].SnapshotIndex, h.plans[i].SnapshotIndex, must.Sprintf("plan %d made on another state", i))
	}
	must.Positive(t, h.plans[0].SnapshotIndex)
	must.Eq(t, 1, reads, must.Sprint("planning passes"))
	must.Nil(t, h.plans[0].Final)
	must.Nil(t, h.plans[1].Final)
	must.NotNil(t, h.plans[2].Final, must.Sprint("the eval ends with its last part"))
	live := h.live(job)
	must.SliceLen(t, 25, live)
	perNode := map[string]int{}
	for _, a := range live {
		perNode[a.NodeID]++
		vol, err := h.store.CSIVolumeByID(nil, structs.DefaultNamespace, fmt.Sprintf("db[%d]", a.Index()))
		must.NoError(t, err)
		must.MapLen(t, 1, vol.Claims)
		must.NotNil(t, vol.Claims[a.ID])
	}
	// Each plan saw the ones before: the allocs are spread evenly.
	must.Eq(t, map[string]int{testNode(0).ID: 5, testNode(1).ID: 5, testNode(2).ID: 5, testNode(3).ID: 5, testNode(4).ID: 5}, perNode)
}

// A part of a cut plan that the applier partly rejects ends the pass: the
// parts after it, planned on the same state, are not submitted, and the
// eval plans what is left again against the state the commit produced.
func TestCSI_RejectedPartPlansTheRestAgain(t *testing.T) {
	h := newHarness(t)
	h.maxPlace = 10
	for i := range 5 {
		h.upsertNode(csiNode(i, plugin, 0, nil))
	}
	for i := range 25 {
		h.upsertVolume(testVolume(fmt.Sprintf("db[%d]", i), plugin))
	}
	job := withVolume(testJob("a", 25), "db", true, structs.CSIVolumeAccessModeSingleNodeWriter)
	job.TaskGroups[0].Tasks[0].Resources = &structs.Resources{CPU: 10, MemoryMB: 10}
	job = h.upsertJob(job)
	// The first part holds node 0's and node 1's allocs (nodes in ID
	// order): the applier drops node 0's.
	h.rejectNodes = map[string]bool{testNode(0).ID: true}
	eval := h.process(testEval(job, structs.EvalTriggerJobRegister))
	must.Eq(t, structs.EvalStatusComplete, eval.Status)
	must.Nil(t, eval.FailedTGAllocs)
	must.SliceLen(t, 3, h.plans, must.Sprint("the rejected part, then the 20 left in two"))
	first := h.plans[0].SnapshotIndex
	for i, want := range []int{10, 10, 10} {
		_, n := h.plans[i].Counts()
		must.Eq(t, want, n, must.Sprintf("plan %d", i))
	}
	must.Greater(t, first, h.plans[1].SnapshotIndex, must.Sprint("the rest is planned on the newer state"))
	must.Eq(t, h.plans[1].SnapshotIndex, h.plans[2].SnapshotIndex)
	live := h.live(job)
	must.SliceLen(t, 25, live)
	for _, a := range live {
		vol, err := h.store.CSIVolumeByID(nil, structs.DefaultNamespace, fmt.Sprintf("db[%d]", a.Index()))
		must.NoError(t, err)
		must.MapLen(t, 1, vol.Claims, must.Sprintf("volume of %s", a.Name))
		must.NotNil(t, vol.Claims[a.ID])
	}
}
