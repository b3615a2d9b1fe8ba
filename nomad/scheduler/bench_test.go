package scheduler

import (
	"context"
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
