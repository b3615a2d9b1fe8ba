package nomad_test

import (
	"errors"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/testutil/cluster"
)

func TestEval_GetAndList(t *testing.T) {
	s := cluster.NewServer(t, nil)
	a := registerJob(t, s, testJob("a"))
	b := registerJob(t, s, testJob("b"))
	prod := testJob("c")
	prod.Namespace = "prod"
	c := registerJob(t, s, prod)

	var one structs.SingleEvalResponse
	must.NoError(t, s.RPC("Eval.GetEval", &structs.EvalSpecificRequest{EvalID: a.EvalID}, &one))
	must.Eq(t, "a", one.Eval.JobID)
	must.Eq(t, one.Eval.ModifyIndex, one.Index)
	must.NoError(t, s.RPC("Eval.GetEval", &structs.EvalSpecificRequest{EvalID: c.EvalID}, &one))
	must.Eq(t, "c", one.Eval.JobID)
	must.NoError(t, s.RPC("Eval.GetEval", &structs.EvalSpecificRequest{EvalID: c.EvalID[:8]}, &one))
	must.Nil(t, one.Eval, must.Sprint("reads are exact"))
	must.NoError(t, s.RPC("Eval.GetEval", &structs.EvalSpecificRequest{EvalID: "not-an-eval"}, &one))
	must.Nil(t, one.Eval)
	err := s.RPC("Eval.GetEval", &structs.EvalSpecificRequest{}, &one)
	must.True(t, errors.Is(err, structs.ErrInvalid))

	list := func(q structs.QueryOptions) []string {
		var reply structs.EvalListResponse
		must.NoError(t, s.RPC("Eval.List", &structs.GenericRequest{QueryOptions: q}, &reply))
		ids := []string{}
		for _, e := range reply.Evaluations {
			ids = append(ids, e.JobID)
		}
		return ids
	}
	// The scheduler may add blocked evals of its own: count only ours.
	ours := `TriggeredBy == "job-register" and Status != "blocked"`
	must.SliceContainsAll(t, []string{"a", "b"}, list(structs.QueryOptions{Filter: ours}))
	must.SliceContainsAll(t, []string{"a", "b", "c"}, list(structs.QueryOptions{Namespace: "*", Filter: ours}))
	must.Eq(t, []string{"b"}, list(structs.QueryOptions{Filter: `JobID == "b" and ` + ours}))
	must.Eq(t, []string{"b"}, list(structs.QueryOptions{Prefix: b.EvalID[:8]}))
	must.SliceLen(t, 1, list(structs.QueryOptions{Namespace: "*", PerPage: 1}))
}
