package nomad

import (
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/state"
	"github.com/berth-io/berth/nomad/structs"
)

// The node operator RPCs are exercised end to end through the HTTP API
// (command/agent TestHTTP_Nodes), where the leader's drainer also runs;
// these tests pin down the decisions they make.

func TestDrainStrategyAt(t *testing.T) {
	now := time.Unix(1000, 0)
	cases := []struct {
		name      string
		in        structs.DrainStrategy
		wantForce int64
	}{
		{"deadline", structs.DrainStrategy{Deadline: time.Hour}, now.Add(time.Hour).UnixNano()},
		{"force at once", structs.DrainStrategy{Deadline: -1}, now.UnixNano()},
		{"no deadline", structs.DrainStrategy{}, 0},
		{"stale stamps are replaced", structs.DrainStrategy{Deadline: time.Minute, StartedAt: 1, ForceDeadline: 2},
			now.Add(time.Minute).UnixNano()},
		{"system jobs flag kept", structs.DrainStrategy{IgnoreSystemJobs: true}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := tc.in
			got := drainStrategyAt(&in, now)
			must.Eq(t, tc.in, in, must.Sprint("the request's strategy is not changed"))
			must.Eq(t, now.UnixNano(), got.StartedAt)
			must.Eq(t, tc.wantForce, got.ForceDeadline)
			must.Eq(t, tc.in.Deadline, got.Deadline)
			must.Eq(t, tc.in.IgnoreSystemJobs, got.IgnoreSystemJobs)
		})
	}
}

func opsJob(id, typ string) *structs.Job {
	return &structs.Job{
		ID: id, Name: id, Namespace: "default", Type: typ, Priority: 70, Datacenters: []string{"dc1"},
		TaskGroups: []*structs.TaskGroup{{Name: "g", Count: 1, Tasks: []*structs.Task{{Name: "t", Driver: "mock"}}}},
	}
}

func TestDrainAndEligibilityEvals(t *testing.T) {
	s, err := state.NewStateStore(nil)
	must.NoError(t, err)
	must.NoError(t, s.UpsertNode(1, &structs.Node{ID: "n1", Name: "n1", Datacenter: "dc1", Status: structs.NodeStatusReady}))
	web, batch, sys, stoppedSys := opsJob("web", "service"), opsJob("batch", "batch"), opsJob("agent", "system"), opsJob("old", "system")
	stoppedSys.Stop = true
	for i, j := range []*structs.Job{web, batch, sys, stoppedSys} {
		must.NoError(t, s.UpsertJob(uint64(2+i), j))
	}
	alloc := func(id string, j *structs.Job, node string) *structs.Allocation {
		return &structs.Allocation{ID: id, Namespace: "default", Name: j.ID + ".g[0]", NodeID: node, JobID: j.ID, TaskGroup: "g"}
	}
	must.NoError(t, s.UpsertPlanResults(10, &structs.ApplyPlanResultsRequest{AllocsUpdated: []*structs.Allocation{
		alloc("a1", web, "n1"), alloc("a2", web, "n1"), // two allocs of one job: one eval
		alloc("a3", batch, "n1"),
		alloc("a4", sys, "n2"), // another node
	}}))
	must.NoError(t, s.UpsertPlanResults(11, &structs.ApplyPlanResultsRequest{AllocsStopped: []*structs.AllocStopUpdate{{AllocID: "a3"}}}))
	snap, err := s.Snapshot()
	must.NoError(t, err)

	evals, err := nodeJobEvals(snap, "n1", structs.EvalTriggerNodeDrain, 42)
	must.NoError(t, err)
	must.SliceLen(t, 1, evals, must.Sprint("the stopped batch alloc needs no eval"))
	e := evals[0]
	must.Eq(t, "web", e.JobID)
	must.Eq(t, "n1", e.NodeID)
	must.Eq(t, structs.EvalTriggerNodeDrain, e.TriggeredBy)
	must.Eq(t, structs.EvalStatusPending, e.Status)
	must.Eq(t, 70, e.Priority)
	must.Eq(t, structs.JobTypeService, e.Type)
	must.Eq(t, int64(42), e.CreateTime)
	must.NotEq(t, "", e.ID)

	evals, err = systemJobEvals(snap, "n1", 42)
	must.NoError(t, err)
	must.SliceLen(t, 1, evals, must.Sprint("stopped system jobs are left alone"))
	must.Eq(t, "agent", evals[0].JobID)
	must.Eq(t, structs.EvalTriggerNodeUpdate, evals[0].TriggeredBy)
	must.Eq(t, []string{evals[0].ID}, evalIDs(evals))
}
