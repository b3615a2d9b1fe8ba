package scheduler

import (
	"context"
	"fmt"
	"testing"

	"github.com/berth-io/berth/nomad/state"
	"github.com/berth-io/berth/nomad/structs"
)

// nopPlanner accepts every plan without writing it, so each iteration
// schedules the whole job from scratch.
type nopPlanner struct{ placed int }

func (p *nopPlanner) SubmitPlan(_ context.Context, plan *structs.Plan) (*structs.PlanResult, State, error) {
	_, allocs := plan.Counts()
	p.placed += allocs
	return &structs.PlanResult{NodeUpdate: plan.NodeUpdate, NodeAllocation: plan.NodeAllocation}, nil, nil
}
func (p *nopPlanner) UpdateEval(context.Context, *structs.Evaluation) error { return nil }
func (p *nopPlanner) CreateEval(context.Context, *structs.Evaluation) error { return nil }

// BenchmarkScheduleService1000 measures scheduling throughput: one eval
// placing a service job of 1,000 allocs over 100 nodes, through the
// scheduler against a state store snapshot (feasibility, ranking, plan
// building; no Raft). Reports placements per second.
func BenchmarkScheduleService1000(b *testing.B) {
	store, err := state.NewStateStore(nil)
	if err != nil {
		b.Fatal(err)
	}
	index := uint64(1)
	for i := range 100 {
		index++
		if err := store.UpsertNode(index, testNode(i)); err != nil {
			b.Fatal(err)
		}
	}
	j := testJob("bench", 1000)
	j.TaskGroups[0].Tasks[0].Resources = &structs.Resources{CPU: 100, MemoryMB: 64}
	index++
	if err := store.UpsertJob(index, j); err != nil {
		b.Fatal(err)
	}
	snap, err := store.Snapshot()
	if err != nil {
		b.Fatal(err)
	}
	job, _ := snap.JobByID(nil, j.Namespace, j.ID)
	eval := testEval(job, structs.EvalTriggerJobRegister)
	planner := &nopPlanner{}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if err := New(snap, planner, Options{}).Process(context.Background(), eval); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if planner.placed != 1000*b.N {
		b.Fatalf("placed %d allocs, want %d", planner.placed, 1000*b.N)
	}
	b.ReportMetric(float64(planner.placed)/b.Elapsed().Seconds(), "placements/s")
}

// BenchmarkPlacePerAllocClaims measures placing N allocs over M nodes in
// one eval, each alloc claiming its own single-node-writer volume
// (per_alloc), every node running the volumes' plugin: the shape
// cmd/berth-nodesim drives at scale. Reports claims (placements) per
// second of scheduler time. placer=scan checks every node for every
// placement (Scheduler.scanAll), as the placer did before rankings;
// placer=rank is the default.
//
//	go test ./nomad/scheduler -run XXX -bench PlacePerAllocClaims -benchtime 3x
func BenchmarkPlacePerAllocClaims(b *testing.B) {
	for _, size := range []struct{ allocs, nodes int }{{1000, 1000}, {10000, 5000}} {
		for _, scan := range []bool{true, false} {
			if scan && size.allocs > 1000 {
				continue // 99 s a run: 50 million node checks
			}
			name := fmt.Sprintf("allocs=%d/nodes=%d/placer=rank", size.allocs, size.nodes)
			if scan {
				name = fmt.Sprintf("allocs=%d/nodes=%d/placer=scan", size.allocs, size.nodes)
			}
			b.Run(name, func(b *testing.B) { benchPerAlloc(b, size.allocs, size.nodes, scan) })
		}
	}
}

func benchPerAlloc(b *testing.B, allocs, nodes int, scan bool) {
	store, err := state.NewStateStore(nil)
	if err != nil {
		b.Fatal(err)
	}
	index := uint64(1)
	for i := range nodes {
		index++
		if err := store.UpsertNode(index, csiNode(i, plugin, 0, nil)); err != nil {
			b.Fatal(err)
		}
	}
	var vols []*structs.CSIVolume
	for i := range allocs {
		vols = append(vols, testVolume(fmt.Sprintf("vol[%d]", i), plugin))
	}
	index++
	if err := store.UpsertCSIVolumes(index, vols); err != nil {
		b.Fatal(err)
	}
	j := withVolume(testJob("bench", allocs), "vol", true, structs.CSIVolumeAccessModeSingleNodeWriter)
	j.TaskGroups[0].Tasks[0].Resources = &structs.Resources{CPU: 10, MemoryMB: 10}
	index++
	if err := store.UpsertJob(index, j); err != nil {
		b.Fatal(err)
	}
	snap, err := store.Snapshot()
	if err != nil {
		b.Fatal(err)
	}
	job, _ := snap.JobByID(nil, j.Namespace, j.ID)
	eval := testEval(job, structs.EvalTriggerJobRegister)
	planner := &nopPlanner{}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		s := New(snap, planner, Options{})
		s.scanAll = scan
		if err := s.Process(context.Background(), eval); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if planner.placed != allocs*b.N {
		b.Fatalf("placed %d allocs, want %d", planner.placed, allocs*b.N)
	}
	b.ReportMetric(float64(planner.placed)/b.Elapsed().Seconds(), "claims/s")
}
