package state

import (
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/structs"
)

func TestAllocs_PlanGetListDelete(t *testing.T) {
	s := testStore(t)
	web := mockJob("default", "web")
	db := mockJob("prod", "db")
	must.NoError(t, s.UpsertJob(1, web))
	must.NoError(t, s.UpsertJob(2, db))

	webAlloc := mockAlloc("aa1", web, "n1")
	webAlloc.Job = nil // plans may leave Job out: the store attaches its own
	must.NoError(t, s.UpsertPlanResults(3, &structs.ApplyPlanResultsRequest{
		AllocsUpdated: []*structs.Allocation{webAlloc, mockAlloc("aa2", web, "n2"), mockAlloc("bb1", db, "n1")},
		Timestamp:     500,
	}))

	a, err := s.AllocByID(nil, "aa1")
	must.NoError(t, err)
	must.Eq(t, 3, a.CreateIndex)
	must.Eq(t, 3, a.AllocModifyIndex)
	must.Eq(t, 500, a.CreateTime)
	must.NotNil(t, a.Job)
	must.Eq(t, "web", a.Job.ID)

	iter, err := s.Allocs(nil)
	must.Eq(t, []string{"aa1", "aa2", "bb1"}, ids(t, iter, err))
	iter, err = s.AllocsByIDPrefix(nil, "default", "a")
	must.Eq(t, []string{"aa1", "aa2"}, ids(t, iter, err))
	iter, err = s.AllocsByIDPrefix(nil, "default", "b")
	must.Eq(t, []string(nil), ids(t, iter, err))
	iter, err = s.AllocsByIDPrefix(nil, structs.AllNamespaces, "b")
	must.Eq(t, []string{"bb1"}, ids(t, iter, err))

	byJob, err := s.AllocsByJob(nil, "default", "web")
	must.NoError(t, err)
	must.Len(t, 2, byJob)
	byJob, err = s.AllocsByJob(nil, "default", "db") // wrong namespace
	must.NoError(t, err)
	must.Len(t, 0, byJob)
	byNode, err := s.AllocsByNode(nil, "n1")
	must.NoError(t, err)
	must.Eq(t, []string{"aa1", "bb1"}, []string{byNode[0].ID, byNode[1].ID})

	must.NoError(t, s.DeleteAllocs(4, []string{"aa1", "unknown"}))
	a, err = s.AllocByID(nil, "aa1")
	must.NoError(t, err)
	must.Nil(t, a)
	must.Eq(t, 4, mustIndex(t, s, TableAllocs))
}

func TestAllocs_UpdateFromClientMergesClientFields(t *testing.T) {
	s := testStore(t)
	job := mockJob("default", "web")
	must.NoError(t, s.UpsertPlanResults(1, &structs.ApplyPlanResultsRequest{
		AllocsUpdated: []*structs.Allocation{mockAlloc("a1", job, "n1")},
	}))

	upd := &structs.Allocation{
		ID:                "a1",
		ClientStatus:      structs.AllocClientStatusRunning,
		ClientDescription: "tasks are running",
		TaskStates:        map[string]*structs.TaskState{"web": {State: structs.TaskStateRunning, StartedAt: 42}},
		TasksExited:       false,
		ModifyTime:        600,
		// Server-owned fields in a client update are ignored.
		DesiredStatus: structs.AllocDesiredStatusStop,
		NodeID:        "elsewhere",
	}
	must.NoError(t, s.UpdateAllocsFromClient(2, []*structs.Allocation{upd, {ID: "unknown", ClientStatus: "running"}},
		mockEval("e1", "default", "web")))

	a, err := s.AllocByID(nil, "a1")
	must.NoError(t, err)
	must.Eq(t, structs.AllocClientStatusRunning, a.ClientStatus)
	must.Eq(t, "tasks are running", a.ClientDescription)
	must.Eq(t, 42, a.TaskStates["web"].StartedAt)
	must.Eq(t, 600, a.ModifyTime)
	must.Eq(t, structs.AllocDesiredStatusRun, a.DesiredStatus)
	must.Eq(t, "n1", a.NodeID)
	must.Eq(t, 1, a.CreateIndex)
	must.Eq(t, 1, a.AllocModifyIndex)
	must.Eq(t, 2, a.ModifyIndex)
	e, _ := s.EvalByID(nil, "e1")
	must.NotNil(t, e)

	// The client's TaskStates were copied, not shared.
	upd.TaskStates["web"].StartedAt = 7
	a, _ = s.AllocByID(nil, "a1")
	must.Eq(t, 42, a.TaskStates["web"].StartedAt)
}

// A client's report that an applied one overtook is dropped (seed 29427:
// a killed client's last report, held by a server until a leader was
// elected, landed after its restarted process reported the task started,
// and the servers saw the alloc pending for good). Reports that add
// nothing newer (a status or TasksExited without a new event) still
// apply.
func TestAllocs_ClientReportOvertakenIsDropped(t *testing.T) {
	s := testStore(t)
	job := mockJob("default", "web")
	must.NoError(t, s.UpsertPlanResults(1, &structs.ApplyPlanResultsRequest{
		AllocsUpdated: []*structs.Allocation{mockAlloc("a1", job, "n1")},
	}))
	report := func(status string, events ...int64) *structs.Allocation {
		ts := &structs.TaskState{State: structs.TaskStatePending}
		for _, at := range events {
			ts.Events = append(ts.Events, &structs.TaskEvent{Type: "e", Time: at})
		}
		return &structs.Allocation{ID: "a1", ClientStatus: status, TaskStates: map[string]*structs.TaskState{"web": ts}}
	}
	received := report(structs.AllocClientStatusPending, 100)
	started := report(structs.AllocClientStatusRunning, 100, 300)
	started.TaskStates["web"].State, started.TaskStates["web"].StartedAt = structs.TaskStateRunning, 300
	must.NoError(t, s.UpdateAllocsFromClient(2, []*structs.Allocation{started}))
	must.NoError(t, s.UpdateAllocsFromClient(3, []*structs.Allocation{received}))
	a, err := s.AllocByID(nil, "a1")
	must.NoError(t, err)
	must.Eq(t, structs.AllocClientStatusRunning, a.ClientStatus, must.Sprint("the overtaken report must not land"))
	must.Eq(t, 2, a.ModifyIndex)
	must.SliceLen(t, 2, a.TaskStates["web"].Events)

	// Nothing newer, but not older: applies.
	exited := report(structs.AllocClientStatusComplete, 100, 300)
	exited.TasksExited = true
	must.NoError(t, s.UpdateAllocsFromClient(4, []*structs.Allocation{exited}))
	a, _ = s.AllocByID(nil, "a1")
	must.Eq(t, structs.AllocClientStatusComplete, a.ClientStatus)
	must.True(t, a.TasksExited)
}

func TestAllocs_PlanUpdateKeepsClientFieldsAndStops(t *testing.T) {
	s := testStore(t)
	job := mockJob("default", "web")
	must.NoError(t, s.UpsertPlanResults(1, &structs.ApplyPlanResultsRequest{
		AllocsUpdated: []*structs.Allocation{mockAlloc("a1", job, "n1"), mockAlloc("a2", job, "n1")},
		Timestamp:     100,
	}))
	running := &structs.Allocation{ID: "a1", ClientStatus: structs.AllocClientStatusRunning}
	must.NoError(t, s.UpdateAllocsFromClient(2, []*structs.Allocation{running}))

	inPlace := mockAlloc("a1", job, "n1")
	inPlace.Resources = &structs.Resources{CPU: 200, MemoryMB: 256}
	must.NoError(t, s.UpsertPlanResults(3, &structs.ApplyPlanResultsRequest{
		AllocsUpdated: []*structs.Allocation{inPlace},
		AllocsStopped: []*structs.AllocStopUpdate{
			{AllocID: "a2", DesiredDescription: "node down", ClientStatus: structs.AllocClientStatusLost},
			{AllocID: "gone"},
		},
		Timestamp: 200,
	}))
	a1, _ := s.AllocByID(nil, "a1")
	must.Eq(t, structs.AllocClientStatusRunning, a1.ClientStatus) // a plan never rewinds it
	must.Eq(t, 200, a1.Resources.CPU)
	must.Eq(t, 1, a1.CreateIndex)
	must.Eq(t, 100, a1.CreateTime)
	must.Eq(t, 3, a1.AllocModifyIndex)
	must.Eq(t, 200, a1.ModifyTime)

	a2, _ := s.AllocByID(nil, "a2")
	must.Eq(t, structs.AllocDesiredStatusStop, a2.DesiredStatus)
	must.Eq(t, "node down", a2.DesiredDescription)
	must.Eq(t, structs.AllocClientStatusLost, a2.ClientStatus)
	must.Eq(t, 3, a2.AllocModifyIndex)
}

// A placement that replaces an alloc (PreviousAllocation) sets the old
// one's NextAllocation in the same write; a previous alloc already gone
// is skipped.
func TestAllocs_ReplacementLinksBothWays(t *testing.T) {
	s := testStore(t)
	web := mockJob("default", "web")
	must.NoError(t, s.UpsertJob(1, web))
	must.NoError(t, s.UpsertPlanResults(2, &structs.ApplyPlanResultsRequest{
		AllocsUpdated: []*structs.Allocation{mockAlloc("old", web, "n1")},
	}))
	repl := mockAlloc("new", web, "n2")
	repl.PreviousAllocation = "old"
	orphan := mockAlloc("orphan", web, "n2")
	orphan.PreviousAllocation = "collected-long-ago"
	must.NoError(t, s.UpsertPlanResults(3, &structs.ApplyPlanResultsRequest{
		AllocsStopped: []*structs.AllocStopUpdate{{AllocID: "old", DesiredDescription: "replaced"}},
		AllocsUpdated: []*structs.Allocation{repl, orphan},
	}))
	old, err := s.AllocByID(nil, "old")
	must.NoError(t, err)
	must.Eq(t, "new", old.NextAllocation)
	must.Eq(t, 3, old.ModifyIndex)
	must.Eq(t, structs.AllocDesiredStatusStop, old.DesiredStatus)
	got, err := s.AllocByID(nil, "new")
	must.NoError(t, err)
	must.Eq(t, "old", got.PreviousAllocation)
	gone, err := s.AllocByID(nil, "collected-long-ago")
	must.NoError(t, err)
	must.Nil(t, gone)
}
