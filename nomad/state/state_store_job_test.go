package state

import (
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/structs"
)

func TestJobs_UpsertGetListDelete(t *testing.T) {
	s := testStore(t)
	must.NoError(t, s.UpsertJob(1, mockJob("default", "web")))
	must.NoError(t, s.UpsertJob(2, mockJob("default", "worker")))
	must.NoError(t, s.UpsertJob(3, mockJob("prod", "web")))
	must.NoError(t, s.UpsertJob(4, mockJob("default2", "web")))

	j, err := s.JobByID(nil, "prod", "web")
	must.NoError(t, err)
	must.Eq(t, 3, j.CreateIndex)
	must.Eq(t, 3, j.JobModifyIndex)
	must.Eq(t, 0, j.Version)
	must.Eq(t, structs.JobStatusPending, j.Status)

	iter, err := s.Jobs(nil, "default")
	must.Eq(t, []string{"default/web", "default/worker"}, ids(t, iter, err)) // not default2
	iter, err = s.Jobs(nil, structs.AllNamespaces)
	must.Eq(t, []string{"default/web", "default/worker", "default2/web", "prod/web"}, ids(t, iter, err))
	iter, err = s.JobsByIDPrefix(nil, "default", "w")
	must.Eq(t, []string{"default/web", "default/worker"}, ids(t, iter, err))
	iter, err = s.JobsByIDPrefix(nil, "default", "wo")
	must.Eq(t, []string{"default/worker"}, ids(t, iter, err))
	iter, err = s.JobsByIDPrefix(nil, structs.AllNamespaces, "we")
	must.Eq(t, []string{"default/web", "default2/web", "prod/web"}, ids(t, iter, err))

	must.NoError(t, s.DeleteJob(5, "default", "web"))
	j, err = s.JobByID(nil, "default", "web")
	must.NoError(t, err)
	must.Nil(t, j)
	must.Eq(t, 5, mustIndex(t, s, TableJobs))
	must.ErrorIs(t, s.DeleteJob(6, "default", "web"), structs.ErrNotFound)
}

func TestJobs_VersionOnChange(t *testing.T) {
	cases := []struct {
		name        string
		change      func(j *structs.Job)
		wantVersion uint64
		wantJMI     uint64
	}{
		{name: "same spec, new submit time", change: func(j *structs.Job) { j.SubmitTime = 2000 }, wantVersion: 0, wantJMI: 1},
		{name: "priority changed", change: func(j *structs.Job) { j.Priority = 70 }, wantVersion: 1, wantJMI: 2},
		{name: "group count changed", change: func(j *structs.Job) { j.TaskGroups[0].Count = 3 }, wantVersion: 1, wantJMI: 2},
		{name: "server fields ignored", change: func(j *structs.Job) { j.Version, j.Status, j.CreateIndex = 9, "dead", 99 }, wantVersion: 0, wantJMI: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := testStore(t)
			must.NoError(t, s.UpsertJob(1, mockJob("default", "web")))
			j := mockJob("default", "web")
			tc.change(j)
			must.NoError(t, s.UpsertJob(2, j))
			got, err := s.JobByID(nil, "default", "web")
			must.NoError(t, err)
			must.Eq(t, tc.wantVersion, got.Version)
			must.Eq(t, tc.wantJMI, got.JobModifyIndex)
			must.Eq(t, 1, got.CreateIndex)
			must.Eq(t, 2, got.ModifyIndex)
			must.Eq(t, structs.JobStatusPending, got.Status)
		})
	}
}

func TestJobs_RegisterWithEvalIsAtomic(t *testing.T) {
	s := testStore(t)
	must.NoError(t, s.UpsertJob(1, mockJob("default", "web"), mockEval("e1", "default", "web")))
	e, err := s.EvalByID(nil, "e1")
	must.NoError(t, err)
	must.Eq(t, 1, e.CreateIndex)
	must.Eq(t, 1, mustIndex(t, s, TableEvals))
	must.Eq(t, 1, mustIndex(t, s, TableJobs))

	// A bad eval fails the job write too.
	j := mockJob("default", "web")
	j.Priority = 99
	err = s.UpsertJob(2, j, &structs.Evaluation{})
	must.ErrorIs(t, err, structs.ErrInvalid)
	got, _ := s.JobByID(nil, "default", "web")
	must.Eq(t, 50, got.Priority)
}

func TestJobs_Stop(t *testing.T) {
	s := testStore(t)
	must.NoError(t, s.UpsertJob(1, mockJob("default", "web")))
	must.NoError(t, s.StopJob(2, "default", "web", mockEval("e1", "default", "web")))
	j, err := s.JobByID(nil, "default", "web")
	must.NoError(t, err)
	must.True(t, j.Stop)
	must.Eq(t, 1, j.Version)
	must.Eq(t, 2, j.JobModifyIndex)
	e, _ := s.EvalByID(nil, "e1")
	must.NotNil(t, e)
	must.ErrorIs(t, s.StopJob(3, "default", "nope"), structs.ErrNotFound)
}

func TestJobs_StatusFollowsAllocsAndEvals(t *testing.T) {
	s := testStore(t)
	job := mockJob("default", "web")
	must.NoError(t, s.UpsertJob(1, job, mockEval("e1", "default", "web")))
	status := func() string {
		j, err := s.JobByID(nil, "default", "web")
		must.NoError(t, err)
		return j.Status
	}
	must.Eq(t, structs.JobStatusPending, status())

	// The plan places an alloc and completes the eval.
	done := mockEval("e1", "default", "web")
	done.Status = structs.EvalStatusComplete
	must.NoError(t, s.UpsertPlanResults(2, &structs.ApplyPlanResultsRequest{
		AllocsUpdated: []*structs.Allocation{mockAlloc("a1", job, "n1")},
		Evals:         []*structs.Evaluation{done},
	}))
	must.Eq(t, structs.JobStatusRunning, status())

	// The alloc completes: nothing left to run.
	a := mockAlloc("a1", job, "n1")
	a.ClientStatus = structs.AllocClientStatusComplete
	must.NoError(t, s.UpdateAllocsFromClient(3, []*structs.Allocation{a}))
	must.Eq(t, structs.JobStatusDead, status())
	j, _ := s.JobByID(nil, "default", "web")
	must.Eq(t, 3, j.ModifyIndex)
	must.Eq(t, 3, mustIndex(t, s, TableJobs))

	// A new pending eval makes it pending again.
	must.NoError(t, s.UpsertEvals(4, []*structs.Evaluation{mockEval("e2", "default", "web")}))
	must.Eq(t, structs.JobStatusPending, status())
}
