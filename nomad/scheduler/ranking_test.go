package scheduler

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/structs"
)

// recorder is a Planner that keeps the plan and the evals it is given and
// commits nothing, so two schedulers can plan against one snapshot.
type recorder struct {
	plans   []*structs.Plan
	updates []*structs.Evaluation
}

func (r *recorder) SubmitPlan(_ context.Context, plan *structs.Plan) (*structs.PlanResult, State, error) {
	r.plans = append(r.plans, plan)
	return &structs.PlanResult{NodeUpdate: plan.NodeUpdate, NodeAllocation: plan.NodeAllocation}, nil, nil
}
func (r *recorder) UpdateEval(_ context.Context, e *structs.Evaluation) error {
	r.updates = append(r.updates, e)
	return nil
}
func (r *recorder) CreateEval(context.Context, *structs.Evaluation) error { return nil }

// placedView is what a plan decided for one alloc, by alloc name: its
// node, its claims and the nodes its metric shows as the best.
type placedView struct {
	node   string
	claims []string
	top    []string
	scores []float64
}

func viewPlan(plan *structs.Plan) map[string]placedView {
	out := map[string]placedView{}
	for node, allocs := range plan.NodeAllocation {
		for _, a := range allocs {
			v := placedView{node: node}
			for _, c := range plan.CSIClaims[a.ID] {
				v.claims = append(v.claims, fmt.Sprintf("%s:%s:%s", c.VolumeID, c.Claim.NodeID, c.Claim.AccessMode))
			}
			for _, m := range a.Metrics.ScoreMetaData {
				v.top = append(v.top, m.NodeID)
				v.scores = append(v.scores, m.NormScore)
			}
			out[a.Name] = v
		}
	}
	return out
}

// TestRanking_SameAsScan plans random clusters twice, once through the
// rankings and once checking every node for every placement, and wants
// the same plan: each alloc on the same node with the same claims and the
// same best nodes in its metric, and the same failures and their reasons.
// The clusters mix what rankings must get right: nodes without the plugin
// or with it unhealthy, topologies, MaxVolumes, volumes already claimed
// by another job (the node is skipped for this alloc only), missing
// volumes, full nodes, constraints and distinct_hosts.
func TestRanking_SameAsScan(t *testing.T) {
	for seed := range 150 {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rnd := rand.New(rand.NewPCG(uint64(seed), 20))
			h := newHarness(t)
			nodes := 1 + rnd.IntN(30)
			for i := range nodes {
				var topo map[string]string
				if rnd.IntN(3) == 0 {
					topo = map[string]string{"zone": fmt.Sprintf("z%d", rnd.IntN(3))}
				}
				var maxVols int64
				if rnd.IntN(4) == 0 {
					maxVols = 1 + rnd.Int64N(3)
				}
				n := csiNode(i, plugin, maxVols, topo)
				n.NodeResources.CPU = 500 + rnd.Int64N(4000)
				n.NodeResources.MemoryMB = 500 + rnd.Int64N(4000)
				switch rnd.IntN(10) {
				case 0:
					delete(n.CSINodePlugins, plugin)
				case 1:
					n.CSINodePlugins[plugin].Healthy = false
				case 2:
					delete(n.Drivers, "exec")
				}
				h.upsertNode(n)
			}
			count := 1 + rnd.IntN(40)
			for i := range count + 5 {
				if rnd.IntN(12) == 0 {
					continue // missing
				}
				v := testVolume(fmt.Sprintf("vol[%d]", i), plugin)
				if rnd.IntN(4) == 0 {
					v.Topologies = []*structs.CSITopology{{Segments: map[string]string{"zone": fmt.Sprintf("z%d", rnd.IntN(3))}}}
				}
				h.upsertVolume(v)
			}
			// Another job holds some of the volumes and some room.
			if k := rnd.IntN(count + 1); k > 0 {
				other := withVolume(testJob("other", k), "vol", true, structs.CSIVolumeAccessModeSingleNodeWriter)
				other.TaskGroups[0].Tasks[0].Resources = &structs.Resources{CPU: 100 + rnd.Int64N(800), MemoryMB: 100 + rnd.Int64N(800)}
				other = h.upsertJob(other)
				h.process(testEval(other, structs.EvalTriggerJobRegister))
			}
			job := withVolume(testJob("web", count), "vol", true, structs.CSIVolumeAccessModeSingleNodeWriter)
			job.TaskGroups[0].Tasks[0].Resources = &structs.Resources{CPU: 50 + rnd.Int64N(700), MemoryMB: 50 + rnd.Int64N(700)}
			if rnd.IntN(4) == 0 {
				job.TaskGroups[0].Constraints = []*structs.Constraint{{Operand: opDistinctHosts, RTarget: "true"}}
			}
			if rnd.IntN(4) == 0 {
				job.TaskGroups[0].Constraints = append(job.TaskGroups[0].Constraints,
					&structs.Constraint{LTarget: "${meta.rack}", Operand: "=", RTarget: "r1"})
			}
			if rnd.IntN(3) == 0 {
				// A second group without volumes shares the nodes.
				tg := job.TaskGroups[0].Copy()
				tg.Name = "plain"
				tg.Count = 1 + rnd.IntN(10)
				tg.Volumes, tg.Tasks[0].VolumeMounts, tg.Constraints = nil, nil, nil
				job.TaskGroups = append(job.TaskGroups, tg)
			}
			job = h.upsertJob(job)
			eval := testEval(job, structs.EvalTriggerJobRegister)
			snap, err := h.store.Snapshot()
			must.NoError(t, err)

			plan := func(scanAll bool) *recorder {
				r := &recorder{}
				ids := 0
				s := New(snap, r, Options{Now: func() time.Time { return testNow }, NewID: func() string {
					ids++
					return fmt.Sprintf("%08x-0000-4000-8000-%012d", ids, ids)
				}})
				s.scanAll = scanAll
				must.NoError(t, s.Process(context.Background(), eval))
				must.SliceLen(t, 1, r.updates)
				return r
			}
			ranked, scanned := plan(false), plan(true)
			must.Eq(t, len(scanned.plans), len(ranked.plans))
			if len(scanned.plans) > 0 {
				must.Eq(t, viewPlan(scanned.plans[0]), viewPlan(ranked.plans[0]))
			}
			want, got := scanned.updates[0], ranked.updates[0]
			must.Eq(t, want.QueuedAllocations, got.QueuedAllocations)
			must.Eq(t, want.FailedTGAllocs, got.FailedTGAllocs)
		})
	}
}

// Volumes each pinned to their own topology make every placement a new
// shape: past maxRankings the placer scans instead of keeping a ranking
// (a pass and memory per candidate) for each, and still places them all.
func TestRanking_BoundedWhenEveryVolumeHasItsOwnTopology(t *testing.T) {
	h := newHarness(t)
	const n = maxRankings + 8
	for i := range n {
		h.upsertNode(csiNode(i, plugin, 0, map[string]string{"host": fmt.Sprint(i)}))
		v := testVolume(fmt.Sprintf("vol[%d]", i), plugin)
		v.Topologies = []*structs.CSITopology{{Segments: map[string]string{"host": fmt.Sprint(i)}}}
		h.upsertVolume(v)
	}
	job := h.upsertJob(withVolume(testJob("web", n), "vol", true, structs.CSIVolumeAccessModeSingleNodeWriter))
	snap, err := h.store.Snapshot()
	must.NoError(t, err)
	_, _, nodes, err := readJobState(snap, testEval(job, structs.EvalTriggerJobRegister))
	must.NoError(t, err)
	p := newPlacer(snap, testEval(job, structs.EvalTriggerJobRegister), job, nodes, h.newID)
	for i := range n {
		a, m, err := p.place(placeRequest{tg: job.TaskGroups[0], name: allocName(job.ID, "web", i), index: i}, nil)
		must.NoError(t, err)
		must.Nil(t, m)
		must.Eq(t, testNode(i).ID, a.NodeID, must.Sprintf("vol[%d] is only reachable from node %d", i, i))
	}
	must.MapLen(t, maxRankings, p.rankings)
}
