package leader

import (
	"maps"
	"slices"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/state"
	"github.com/berth-io/berth/nomad/structs"
)

func planNode(id string) *structs.Node {
	return &structs.Node{
		ID: id, SecretID: "s-" + id, Name: id, Datacenter: "dc1",
		Status: structs.NodeStatusReady, SchedulingEligibility: structs.NodeSchedulingEligible,
		NodeResources: &structs.NodeResources{CPU: 1000, MemoryMB: 1000},
		CSINodePlugins: map[string]*structs.CSIInfo{"hp": {PluginID: "hp", Healthy: true,
			NodeInfo: &structs.CSINodeInfo{ID: "ext-" + id}}},
	}
}

func planAlloc(id, nodeID string, job *structs.Job, mem int64) *structs.Allocation {
	return &structs.Allocation{
		ID: id, Namespace: "default", Name: job.ID + ".web[0]", NodeID: nodeID, JobID: job.ID, Job: job, TaskGroup: "web",
		Resources:     &structs.Resources{CPU: 100, MemoryMB: mem},
		DesiredStatus: structs.AllocDesiredStatusRun, ClientStatus: structs.AllocClientStatusPending,
	}
}

func planClaim(vol, allocID, nodeID string) *structs.CSIVolumeClaimUpdate {
	return &structs.CSIVolumeClaimUpdate{Namespace: "default", VolumeID: vol, Claim: &structs.CSIVolumeClaim{
		AllocID: allocID, NodeID: nodeID, JobID: "web", Mode: structs.CSIVolumeClaimWrite,
		AccessMode: structs.CSIVolumeAccessModeSingleNodeWriter, AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem,
		Step: structs.CSIClaimReserved,
	}}
}

// TestEvaluatePlan_RejectsWhatNoLongerFits plays a plan made on old state
// against state that has moved on, one rejection rule per node.
func TestEvaluatePlan_RejectsWhatNoLongerFits(t *testing.T) {
	store, err := state.NewStateStore(nil)
	must.NoError(t, err)
	index := uint64(10)
	next := func() uint64 { index++; return index }
	for _, n := range []string{"n1", "n2", "n3", "n4"} {
		must.NoError(t, store.UpsertNode(next(), planNode(n)))
	}
	must.NoError(t, store.UpdateNodeStatus(next(), "n3", structs.NodeStatusDown, "", 1))
	must.NoError(t, store.UpdateNodeDrain(next(), "n4", &structs.DrainStrategy{}, false, 1))
	job := &structs.Job{ID: "web", Name: "web", Namespace: "default", Type: structs.JobTypeService, Priority: 50,
		Datacenters: []string{"dc1"}, TaskGroups: []*structs.TaskGroup{{Name: "web", Count: 1}}}
	must.NoError(t, store.UpsertJob(next(), job))
	stored, err := store.JobByID(nil, "default", "web")
	must.NoError(t, err)
	must.NoError(t, store.UpsertPlanResults(next(), &structs.ApplyPlanResultsRequest{AllocsUpdated: []*structs.Allocation{
		planAlloc("old", "n1", stored, 600),
		planAlloc("existing", "n1", stored, 100),
	}}))
	for _, v := range []string{"db", "free"} {
		must.NoError(t, store.UpsertCSIVolumes(next(), []*structs.CSIVolume{{ID: v, Namespace: "default", PluginID: "hp",
			State: structs.CSIVolumeStateReady}}))
	}
	held := planClaim("db", "holder", "n2")
	held.Claim.Step = structs.CSIClaimNodeDetached
	must.NoError(t, store.UpdateCSIVolumeClaims(next(), []*structs.CSIVolumeClaimUpdate{planClaim("db", "holder", "n2")}, 1))
	must.NoError(t, store.UpdateCSIVolumeClaims(next(), []*structs.CSIVolumeClaimUpdate{held}, 1))

	existing := planAlloc("existing", "n1", stored, 100)
	existing.EvalID = "e2" // an in-place update
	// The eval's end rides the plan only if the plan commits whole.
	plan := &structs.Plan{EvalID: "e2", Job: stored, Final: &structs.Evaluation{ID: "e2", Namespace: "default", JobID: "web",
		Status: structs.EvalStatusComplete}}
	plan.AppendStop("n1", &structs.AllocStopUpdate{AllocID: "old", DesiredStatus: structs.AllocDesiredStatusStop})
	plan.AppendAlloc(existing, nil)
	plan.AppendAlloc(planAlloc("p1", "n1", stored, 400), nil)
	plan.AppendAlloc(planAlloc("p2", "n1", stored, 400), nil)                                                            // fits only thanks to the stop
	plan.AppendAlloc(planAlloc("p3", "n1", stored, 200), nil)                                                            // no room left
	plan.AppendAlloc(planAlloc("p4", "n3", stored, 100), nil)                                                            // node down
	plan.AppendAlloc(planAlloc("p5", "n4", stored, 100), nil)                                                            // node draining
	plan.AppendAlloc(planAlloc("p6", "n2", stored, 100), []*structs.CSIVolumeClaimUpdate{planClaim("db", "p6", "n2")})   // claim held
	plan.AppendAlloc(planAlloc("p7", "n2", stored, 100), []*structs.CSIVolumeClaimUpdate{planClaim("free", "p7", "n2")}) // free
	plan.AppendAlloc(planAlloc("p8", "n2", stored, 100), []*structs.CSIVolumeClaimUpdate{planClaim("free", "p8", "n2")}) // taken by p7
	plan.AppendAlloc(planAlloc("p9", "gone", stored, 100), nil)                                                          // node deregistered

	snap, err := store.Snapshot()
	must.NoError(t, err)
	result, req, err := evaluatePlan(snap, plan, 42)
	must.NoError(t, err)

	must.Eq(t, []string{"p3", "p4", "p5", "p6", "p8", "p9"}, slices.Sorted(maps.Keys(result.Rejected)))
	must.StrContains(t, result.Rejected["p3"], "memory exhausted")
	must.StrContains(t, result.Rejected["p4"], "status down")
	must.StrContains(t, result.Rejected["p5"], "draining true")
	must.Eq(t, `volume "db": single-node-writer already claimed by alloc holder on node n2 (releasing: controller unpublish pending)`, result.Rejected["p6"])
	must.StrContains(t, result.Rejected["p8"], "already claimed by alloc p7")
	must.StrContains(t, result.Rejected["p9"], "no longer exists")
	full, expected, actual := result.FullCommit(plan)
	must.False(t, full)
	must.Eq(t, 11, expected)
	must.Eq(t, 5, actual)
	must.False(t, result.FinalWritten)
	must.SliceEmpty(t, req.Evals)

	must.SliceLen(t, 1, req.AllocsStopped)
	var updated []string
	for _, a := range req.AllocsUpdated {
		updated = append(updated, a.ID)
		must.Nil(t, a.Job) // the stored version: the store attaches it
	}
	must.Eq(t, []string{"existing", "p1", "p2", "p7"}, updated)
	must.SliceLen(t, 1, req.CSIClaims)
	must.Eq(t, "p7", req.CSIClaims[0].Claim.AllocID)
	must.Eq(t, int64(42), req.Timestamp)

	// What survives commits cleanly.
	must.NoError(t, store.UpsertPlanResults(next(), req))
	p7, err := store.AllocByID(nil, "p7")
	must.NoError(t, err)
	must.Eq(t, "web", p7.Job.ID)
	vol, err := store.CSIVolumeByID(nil, "default", "free")
	must.NoError(t, err)
	must.Eq(t, structs.CSIClaimReserved, vol.Claims["p7"].Step)
}
