package leader

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/state"
	"github.com/berth-io/berth/nomad/structs"
)

// storeRaft commits the leader's writes to a state store at increasing
// indexes, as the FSM does. beforePlan, when set, runs once just before
// the next plan is committed, with the index source: a write that commits
// between a scheduler's snapshot and its plan.
type storeRaft struct {
	store *state.StateStore

	mu         sync.Mutex
	index      uint64
	beforePlan func(next func() uint64)
	// types are the entries applied, in order.
	types []structs.MessageType
}

func (r *storeRaft) next() uint64 { r.index++; return r.index }

func (r *storeRaft) Apply(t structs.MessageType, msg any) (uint64, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.types = append(r.types, t)
	switch t {
	case structs.ApplyPlanResultsRequestType:
		if r.beforePlan != nil {
			r.beforePlan(r.next)
			r.beforePlan = nil
		}
		index := r.next()
		return index, r.store.UpsertPlanResults(index, msg.(*structs.ApplyPlanResultsRequest))
	case structs.EvalUpdateRequestType:
		index := r.next()
		return index, r.store.UpsertEvals(index, msg.(*structs.EvalUpdateRequest).Evals)
	}
	return 0, fmt.Errorf("storeRaft: unexpected message type %v", t)
}

// TestWorker_BlockedEvalRetriedForAClaimFreedWhileItsPlanCommitted is
// seed 1384's check 5 (three servers): a per_alloc job placed one alloc,
// and the other was filtered on every node by a claim being released
// ("releasing: controller unpublish pending"). That claim was freed
// while the plan placing the first alloc was committing. The worker
// hinted the blocked eval with the state SubmitPlan returned, which
// already had the claim freed, so the capacity watcher dated the free
// before the eval's snapshot and never retried it: the job stayed at one
// of two allocs with the volume free. The hint is now the state the
// failed placement was judged on.
func TestWorker_BlockedEvalRetriedForAClaimFreedWhileItsPlanCommitted(t *testing.T) {
	store, err := state.NewStateStore(nil)
	must.NoError(t, err)
	r := &storeRaft{store: store}

	node := planNode("n1")
	node.Drivers = map[string]*structs.DriverInfo{"exec": {Detected: true, Healthy: true, MountConfig: structs.MountConfigSupportAll}}
	must.NoError(t, store.UpsertNode(r.next(), node))
	for _, id := range []string{"db[0]", "db[1]"} {
		must.NoError(t, store.UpsertCSIVolumes(r.next(), []*structs.CSIVolume{{ID: id, Name: id, Namespace: "default",
			PluginID: "hp", State: structs.CSIVolumeStateReady,
			RequestedCapabilities: []*structs.CSIVolumeCapability{{AccessMode: structs.CSIVolumeAccessModeSingleNodeWriter,
				AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem}}}}))
	}
	// A stopped alloc's claim on db[1], releasing: node side done, the
	// controller unpublish pending.
	held := planClaim("db[1]", "holder", "n1")
	must.NoError(t, store.UpdateCSIVolumeClaims(r.next(), []*structs.CSIVolumeClaimUpdate{held}, 1))
	held = planClaim("db[1]", "holder", "n1")
	held.Claim.Step = structs.CSIClaimNodeDetached
	must.NoError(t, store.UpdateCSIVolumeClaims(r.next(), []*structs.CSIVolumeClaimUpdate{held}, 1))

	job := &structs.Job{ID: "web", Name: "web", Namespace: "default", Type: structs.JobTypeService, Priority: 50,
		Datacenters: []string{"dc1"}, TaskGroups: []*structs.TaskGroup{{
			Name: "web", Count: 2,
			Volumes: map[string]*structs.VolumeRequest{"data": {Name: "data", Type: structs.VolumeTypeCSI, Source: "db",
				PerAlloc: true, AccessMode: structs.CSIVolumeAccessModeSingleNodeWriter,
				AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem}},
			Tasks: []*structs.Task{{Name: "web", Driver: "exec", Config: map[string]any{"command": "/bin/sleep"},
				Resources:    &structs.Resources{CPU: 100, MemoryMB: 100},
				VolumeMounts: []*structs.VolumeMount{{Volume: "data", Destination: "/data"}}}},
		}}}
	must.NoError(t, store.UpsertJob(r.next(), job))
	stored, err := store.JobByID(nil, "default", "web")
	must.NoError(t, err)
	eval := &structs.Evaluation{ID: "e1", Namespace: "default", Priority: 50, Type: structs.JobTypeService,
		TriggeredBy: structs.EvalTriggerJobRegister, JobID: "web", JobModifyIndex: stored.JobModifyIndex,
		Status: structs.EvalStatusPending}
	must.NoError(t, store.UpsertEvals(r.next(), []*structs.Evaluation{eval}))

	sc := NewTerm(Config{State: func() *state.StateStore { return store }, Raft: r, RaftTimeout: 30 * time.Second})
	watched, _, err := readCapacity(store, nil) // the capacity watcher's last pass before the eval runs
	must.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { sc.srv.applyPlans(ctx, sc) })
	t.Cleanup(func() { cancel(); wg.Wait() })

	// The holder's release finishes while the plan placing web[0] commits.
	var freedAt uint64
	r.beforePlan = func(next func() uint64) {
		for _, step := range []structs.CSIClaimStep{structs.CSIClaimControllerDetached, structs.CSIClaimFreed} {
			c := planClaim("db[1]", "holder", "n1")
			c.Claim.Step = step
			freedAt = next()
			must.NoError(t, store.UpdateCSIVolumeClaims(freedAt, []*structs.CSIVolumeClaimUpdate{c}, 1))
		}
	}

	pending, err := store.EvalByID(nil, "e1")
	must.NoError(t, err)
	w := &worker{srv: sc.srv, sc: sc, logger: hclog.NewNullLogger()}
	must.NoError(t, w.process(ctx, pending))
	must.NotEq(t, 0, freedAt, must.Sprint("the plan was never committed"))

	done, err := store.EvalByID(nil, "e1")
	must.NoError(t, err)
	must.Eq(t, structs.EvalStatusComplete, done.Status)
	must.NotEq(t, "", done.BlockedEval, must.Sprint("web[1] should have been blocked by the holder's claim"))
	must.MapContainsKey(t, done.FailedTGAllocs["web"].ConstraintFiltered,
		`volume "db[1]": single-node-writer already claimed by alloc holder on node n1 (releasing: controller unpublish pending)`)
	blocked, err := store.EvalByID(nil, done.BlockedEval)
	must.NoError(t, err)
	allocs, err := store.AllocsByJob(nil, "default", "web")
	must.NoError(t, err)
	must.SliceLen(t, 1, allocs)

	// The feeder tracks the blocked eval and the watcher's next pass sees
	// the freed claim: the eval is retried.
	sc.blocked.Track(blocked)
	_, err = sc.srv.capacityPass(sc, watched)
	must.NoError(t, err)
	unblock, _ := sc.blocked.take()
	must.Eq(t, []string{blocked.ID}, ids(unblock), must.Sprintf("claim freed at %d", freedAt))
}

// TestWorker_EvalEndsInItsPlansEntry: an eval whose last plan commits
// whole ends in that plan's Raft entry — complete, with the job's older
// blocked eval cancelled — and the worker writes nothing after it, so a
// new alloc's Claim never queues in Raft behind its eval's update (issue
// 20's K=1 trace: the claim waited for that entry's fsync in half the
// runs). A plan the applier cuts short leaves the eval to UpdateEval, as
// before (TestEvaluatePlan_RejectsWhatNoLongerFits,
// scheduler's TestProcess_FinalOnlyWithAWholeCommit).
func TestWorker_EvalEndsInItsPlansEntry(t *testing.T) {
	store, err := state.NewStateStore(nil)
	must.NoError(t, err)
	r := &storeRaft{store: store}
	node := planNode("n1")
	node.Drivers = map[string]*structs.DriverInfo{"exec": {Detected: true, Healthy: true}}
	must.NoError(t, store.UpsertNode(r.next(), node))
	job := &structs.Job{ID: "web", Name: "web", Namespace: "default", Type: structs.JobTypeService, Priority: 50,
		Datacenters: []string{"dc1"}, TaskGroups: []*structs.TaskGroup{{
			Name: "web", Count: 1,
			Tasks: []*structs.Task{{Name: "web", Driver: "exec", Config: map[string]any{"command": "/bin/sleep"},
				Resources: &structs.Resources{CPU: 100, MemoryMB: 100}}},
		}}}
	must.NoError(t, store.UpsertJob(r.next(), job))
	stored, err := store.JobByID(nil, "default", "web")
	must.NoError(t, err)
	older := &structs.Evaluation{ID: "blocked-before", Namespace: "default", Priority: 50, Type: structs.JobTypeService,
		TriggeredBy: structs.EvalTriggerQueuedAllocs, JobID: "web", Status: structs.EvalStatusBlocked}
	eval := &structs.Evaluation{ID: "e1", Namespace: "default", Priority: 50, Type: structs.JobTypeService,
		TriggeredBy: structs.EvalTriggerJobRegister, JobID: "web", JobModifyIndex: stored.JobModifyIndex,
		Status: structs.EvalStatusPending}
	must.NoError(t, store.UpsertEvals(r.next(), []*structs.Evaluation{older, eval}))

	sc := NewTerm(Config{State: func() *state.StateStore { return store }, Raft: r, RaftTimeout: 30 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { sc.srv.applyPlans(ctx, sc) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	w := &worker{srv: sc.srv, sc: sc, logger: hclog.NewNullLogger()}
	must.NoError(t, w.process(ctx, eval))

	must.Eq(t, []structs.MessageType{structs.ApplyPlanResultsRequestType}, r.types)
	allocs, err := store.AllocsByJob(nil, "default", "web")
	must.NoError(t, err)
	must.SliceLen(t, 1, allocs)
	done, err := store.EvalByID(nil, "e1")
	must.NoError(t, err)
	must.Eq(t, structs.EvalStatusComplete, done.Status)
	must.Eq(t, allocs[0].CreateIndex, done.ModifyIndex)
	must.Eq(t, "", done.BlockedEval)
	cancelled, err := store.EvalByID(nil, "blocked-before")
	must.NoError(t, err)
	must.Eq(t, structs.EvalStatusCancelled, cancelled.Status)
	must.Eq(t, descPlacedAll, cancelled.StatusDescription)
	must.Eq(t, done.ModifyIndex, cancelled.ModifyIndex)
}
