package state

import (
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/structs"
)

func TestEvals_UpsertGetListDelete(t *testing.T) {
	s := testStore(t)
	must.NoError(t, s.UpsertEvals(1, []*structs.Evaluation{
		mockEval("aa1", "default", "web"),
		mockEval("aa2", "default", "db"),
		mockEval("bb1", "prod", "web"),
	}))

	e, err := s.EvalByID(nil, "aa2")
	must.NoError(t, err)
	must.Eq(t, "db", e.JobID)
	must.Eq(t, 1, e.CreateIndex)

	iter, err := s.Evals(nil, "default")
	must.Eq(t, []string{"aa1", "aa2"}, ids(t, iter, err))
	iter, err = s.Evals(nil, structs.AllNamespaces)
	must.Eq(t, []string{"aa1", "aa2", "bb1"}, ids(t, iter, err))
	iter, err = s.EvalsByIDPrefix(nil, "default", "aa")
	must.Eq(t, []string{"aa1", "aa2"}, ids(t, iter, err))
	iter, err = s.EvalsByIDPrefix(nil, "prod", "aa")
	must.Eq(t, []string(nil), ids(t, iter, err))
	iter, err = s.EvalsByIDPrefix(nil, structs.AllNamespaces, "b")
	must.Eq(t, []string{"bb1"}, ids(t, iter, err))

	byJob, err := s.EvalsByJob(nil, "default", "web")
	must.NoError(t, err)
	must.Len(t, 1, byJob)
	must.Eq(t, "aa1", byJob[0].ID)

	// Update keeps CreateIndex and CreateTime.
	first := mockEval("aa1", "default", "web")
	first.CreateTime = 100
	must.NoError(t, s.UpsertEvals(2, []*structs.Evaluation{first}))
	upd := mockEval("aa1", "default", "web")
	upd.Status = structs.EvalStatusComplete
	must.NoError(t, s.UpsertEvals(3, []*structs.Evaluation{upd}))
	e, _ = s.EvalByID(nil, "aa1")
	must.Eq(t, structs.EvalStatusComplete, e.Status)
	must.Eq(t, 1, e.CreateIndex)
	must.Eq(t, 3, e.ModifyIndex)
	must.Eq(t, 100, e.CreateTime)

	must.NoError(t, s.DeleteEvals(4, []string{"aa1", "unknown"}))
	e, err = s.EvalByID(nil, "aa1")
	must.NoError(t, err)
	must.Nil(t, e)
	must.Eq(t, 4, mustIndex(t, s, TableEvals))
}
