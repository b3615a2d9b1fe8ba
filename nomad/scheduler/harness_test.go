package scheduler

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/state"
	"github.com/berth-io/berth/nomad/structs"
)

// evalSeq numbers test evals.
var evalSeq atomic.Int64

// testNow is the harness clock.
var testNow = time.Unix(1_700_000_000, 0)

// harness is a Planner over a real state store: plans are committed with
// UpsertPlanResults, so an eval processed after another sees its result.
// RejectNodes makes the next plan drop every new alloc on those nodes, as
// the plan applier would for a node that changed under the plan.
type harness struct {
	t     *testing.T
	store *state.StateStore
	index uint64
	ids   int

	plans   []*structs.Plan
	updates []*structs.Evaluation // UpdateEval calls
	created []*structs.Evaluation // CreateEval calls

	rejectNodes map[string]bool
	maxPlace    int // Options.MaxPlacementsPerPlan
	// writeFinal commits a plan's Final eval with a plan committed
	// whole, as the leader's applier does; finals are those written.
	writeFinal bool
	finals     []*structs.Evaluation
	// wrap, when set, wraps every state handed to the scheduler.
	wrap func(State) State
}

func newHarness(t *testing.T) *harness {
	t.Helper()
	store, err := state.NewStateStore(nil)
	must.NoError(t, err)
	return &harness{t: t, store: store, index: 100}
}

func (h *harness) next() uint64 {
	h.index++
	return h.index
}

func (h *harness) newID() string {
	h.ids++
	return fmt.Sprintf("%08x-0000-4000-8000-%012d", h.ids, h.ids)
}

func (h *harness) SubmitPlan(_ context.Context, plan *structs.Plan) (*structs.PlanResult, State, error) {
	h.plans = append(h.plans, plan)
	result := &structs.PlanResult{NodeUpdate: plan.NodeUpdate, NodeAllocation: map[string][]*structs.Allocation{}}
	req := &structs.ApplyPlanResultsRequest{EvalID: plan.EvalID, Timestamp: testNow.UnixNano(), Evals: plan.Evals}
	for _, stops := range plan.NodeUpdate {
		req.AllocsStopped = append(req.AllocsStopped, stops...)
	}
	rejected := false
	for node, allocs := range plan.NodeAllocation {
		if h.rejectNodes[node] {
			rejected = true
			continue
		}
		result.NodeAllocation[node] = allocs
		req.AllocsUpdated = append(req.AllocsUpdated, allocs...)
		for _, a := range allocs {
			req.CSIClaims = append(req.CSIClaims, plan.CSIClaims[a.ID]...)
		}
	}
	h.rejectNodes = nil
	if h.writeFinal && !rejected && plan.Final != nil {
		req.Evals = append(slices.Clip(req.Evals), plan.Final)
		result.FinalWritten = true
		h.finals = append(h.finals, plan.Final)
	}
	index := h.next()
	must.NoError(h.t, h.store.UpsertPlanResults(index, req))
	result.AllocIndex = index
	if rejected {
		result.RefreshIndex = index
	}
	snap, err := h.store.Snapshot()
	must.NoError(h.t, err)
	if h.wrap != nil {
		return result, h.wrap(snap), nil
	}
	return result, snap, nil
}

func (h *harness) UpdateEval(_ context.Context, e *structs.Evaluation) error {
	h.updates = append(h.updates, e)
	return h.store.UpsertEvals(h.next(), []*structs.Evaluation{e})
}

func (h *harness) CreateEval(_ context.Context, e *structs.Evaluation) error {
	h.created = append(h.created, e)
	return h.store.UpsertEvals(h.next(), []*structs.Evaluation{e})
}

// process runs one eval at time now against a fresh snapshot and returns
// the eval as the scheduler finished it.
func (h *harness) processAt(eval *structs.Evaluation, now time.Time) *structs.Evaluation {
	h.t.Helper()
	must.NoError(h.t, h.store.UpsertEvals(h.next(), []*structs.Evaluation{eval}))
	snap, err := h.store.Snapshot()
	must.NoError(h.t, err)
	var st State = snap
	if h.wrap != nil {
		st = h.wrap(st)
	}
	s := New(st, h, Options{Now: func() time.Time { return now }, NewID: h.newID, MaxPlacementsPerPlan: h.maxPlace})
	must.NoError(h.t, s.Process(context.Background(), eval))
	if h.writeFinal && len(h.updates) == 0 {
		must.SliceNotEmpty(h.t, h.finals)
		return h.finals[len(h.finals)-1]
	}
	must.SliceNotEmpty(h.t, h.updates)
	return h.updates[len(h.updates)-1]
}

func (h *harness) process(eval *structs.Evaluation) *structs.Evaluation {
	return h.processAt(eval, testNow)
}

func (h *harness) upsertNode(n *structs.Node) {
	must.NoError(h.t, h.store.UpsertNode(h.next(), n))
}

func (h *harness) upsertJob(j *structs.Job) *structs.Job {
	must.NoError(h.t, h.store.UpsertJob(h.next(), j))
	stored, err := h.store.JobByID(nil, j.Namespace, j.ID)
	must.NoError(h.t, err)
	return stored
}

func (h *harness) upsertAllocs(allocs ...*structs.Allocation) {
	must.NoError(h.t, h.store.UpsertPlanResults(h.next(), &structs.ApplyPlanResultsRequest{AllocsUpdated: allocs, Timestamp: testNow.UnixNano()}))
}

func (h *harness) upsertVolume(v *structs.CSIVolume) {
	must.NoError(h.t, h.store.UpsertCSIVolumes(h.next(), []*structs.CSIVolume{v}))
}

func (h *harness) claim(ns, volID string, c *structs.CSIVolumeClaim) {
	must.NoError(h.t, h.store.UpdateCSIVolumeClaims(h.next(), []*structs.CSIVolumeClaimUpdate{{Namespace: ns, VolumeID: volID, Claim: c}}, testNow.UnixNano()))
}

// live returns the job's allocs the servers have not stopped, by name.
func (h *harness) live(job *structs.Job) []*structs.Allocation {
	allocs, err := h.store.AllocsByJob(nil, job.Namespace, job.ID)
	must.NoError(h.t, err)
	var out []*structs.Allocation
	for _, a := range allocs {
		if !a.TerminalStatus() {
			out = append(out, a)
		}
	}
	slices.SortFunc(out, func(a, b *structs.Allocation) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func (h *harness) alloc(id string) *structs.Allocation {
	a, err := h.store.AllocByID(nil, id)
	must.NoError(h.t, err)
	must.NotNil(h.t, a)
	return a
}

// setClientStatus writes a client update for alloc id.
func (h *harness) setClientStatus(id, status string, at time.Time) {
	a := h.alloc(id).Copy()
	a.ClientStatus = status
	a.ModifyTime = at.UnixNano()
	must.NoError(h.t, h.store.UpdateAllocsFromClient(h.next(), []*structs.Allocation{a}))
}

func testNode(i int) *structs.Node {
	return &structs.Node{
		ID:         fmt.Sprintf("%08d-0000-4000-8000-000000000000", i),
		SecretID:   fmt.Sprintf("secret-%d", i),
		Name:       fmt.Sprintf("node-%d", i),
		Datacenter: "dc1",
		Attributes: map[string]string{"kernel.name": "linux", "cpu.arch": "amd64"},
		Meta:       map[string]string{"rack": fmt.Sprintf("r%d", i%2)},
		NodeResources: &structs.NodeResources{
			CPU: 4000, MemoryMB: 8192,
		},
		Drivers: map[string]*structs.DriverInfo{
			"exec":     {Detected: true, Healthy: true, MountConfig: structs.MountConfigSupportAll},
			"raw_exec": {Detected: true, Healthy: true, MountConfig: structs.MountConfigSupportNone},
		},
		Status:                structs.NodeStatusReady,
		SchedulingEligibility: structs.NodeSchedulingEligible,
	}
}

func testJob(id string, count int) *structs.Job {
	return &structs.Job{
		ID:          id,
		Name:        id,
		Namespace:   structs.DefaultNamespace,
		Type:        structs.JobTypeService,
		Priority:    50,
		Datacenters: []string{"dc1"},
		TaskGroups: []*structs.TaskGroup{{
			Name:  "web",
			Count: count,
			Tasks: []*structs.Task{{
				Name:      "web",
				Driver:    "exec",
				Config:    map[string]any{"command": "/bin/sleep"},
				Resources: &structs.Resources{CPU: 500, MemoryMB: 256},
			}},
		}},
	}
}

func testEval(job *structs.Job, trigger string) *structs.Evaluation {
	return &structs.Evaluation{
		ID:             fmt.Sprintf("eval-%s-%d", job.ID, evalSeq.Add(1)),
		Namespace:      job.Namespace,
		Priority:       job.Priority,
		Type:           job.Type,
		TriggeredBy:    trigger,
		JobID:          job.ID,
		JobModifyIndex: job.JobModifyIndex,
		Status:         structs.EvalStatusPending,
	}
}

// csiNode is testNode(i) running a healthy node instance of plugin.
func csiNode(i int, plugin string, maxVolumes int64, topo map[string]string) *structs.Node {
	n := testNode(i)
	info := &structs.CSIInfo{
		PluginID: plugin, Healthy: true, HealthDescription: "healthy",
		NodeInfo: &structs.CSINodeInfo{ID: fmt.Sprintf("ext-%d", i), MaxVolumes: maxVolumes},
	}
	if topo != nil {
		info.NodeInfo.AccessibleTopology = &structs.CSITopology{Segments: topo}
	}
	n.CSINodePlugins = map[string]*structs.CSIInfo{plugin: info}
	return n
}

func testVolume(id, plugin string) *structs.CSIVolume {
	return &structs.CSIVolume{
		ID: id, Name: id, Namespace: structs.DefaultNamespace, PluginID: plugin,
		State: structs.CSIVolumeStateReady,
		RequestedCapabilities: []*structs.CSIVolumeCapability{
			{AccessMode: structs.CSIVolumeAccessModeSingleNodeWriter, AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem},
			{AccessMode: structs.CSIVolumeAccessModeMultiNodeReader, AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem},
		},
	}
}

// withVolume gives job's group a CSI volume request.
func withVolume(job *structs.Job, source string, perAlloc bool, access structs.CSIVolumeAccessMode) *structs.Job {
	tg := job.TaskGroups[0]
	tg.Volumes = map[string]*structs.VolumeRequest{"data": {
		Name: "data", Type: structs.VolumeTypeCSI, Source: source, PerAlloc: perAlloc,
		AccessMode: access, AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem,
		ReadOnly: access.ReadOnly(),
	}}
	tg.Tasks[0].VolumeMounts = []*structs.VolumeMount{{Volume: "data", Destination: "/data"}}
	return job
}
