package nomad_test

import (
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/testutil/cluster"
)

// placeAllocs places one alloc of job per ID on node, without claims.
func placeAllocs(t *testing.T, s *cluster.Server, job *structs.Job, nodeID string, ids ...string) {
	t.Helper()
	req := &structs.ApplyPlanResultsRequest{}
	for _, id := range ids {
		req.AllocsUpdated = append(req.AllocsUpdated, &structs.Allocation{
			ID: id, Namespace: job.Namespace, EvalID: "eval-" + id, Name: job.ID + ".web[0]",
			NodeID: nodeID, JobID: job.ID, Job: job, TaskGroup: "web",
		})
	}
	raftApply(t, s, structs.ApplyPlanResultsRequestType, req)
}

func TestAlloc_GetAndList(t *testing.T) {
	s := cluster.NewServer(t, nil)
	node := registerPluginNode(t, s, 1)
	web := testJob("web")
	registerJob(t, s, web)
	placeAllocs(t, s, getJob(t, s, "", "web"), node.ID, "aaaa-1", "aaaa-2", "bbbb-1")
	prod := testJob("web")
	prod.Namespace = "prod"
	registerJob(t, s, prod)
	placeAllocs(t, s, getJob(t, s, "prod", "web"), node.ID, "cccc-1")

	get := func(id string) (*structs.Allocation, error) {
		var reply structs.SingleAllocResponse
		err := s.RPC("Alloc.GetAlloc", &structs.AllocSpecificRequest{AllocID: id}, &reply)
		return reply.Alloc, err
	}
	a, err := get("aaaa-2")
	must.NoError(t, err)
	must.Eq(t, "aaaa-2", a.ID)
	must.NotNil(t, a.Job)
	a, err = get("bb")
	must.NoError(t, err)
	must.Nil(t, a, must.Sprint("a prefix names nothing: reads are exact"))
	a, err = get("cccc-1") // alloc IDs are unique across namespaces
	must.NoError(t, err)
	must.Eq(t, "prod", a.Namespace)
	a, err = get("zz")
	must.NoError(t, err)
	must.Nil(t, a)
	a, err = get("aaaa")
	must.NoError(t, err)
	must.Nil(t, a)

	list := func(q structs.QueryOptions) ([]string, string) {
		var reply structs.AllocListResponse
		must.NoError(t, s.RPC("Alloc.List", &structs.GenericRequest{QueryOptions: q}, &reply))
		ids := []string{}
		for _, a := range reply.Allocations {
			ids = append(ids, a.ID)
		}
		return ids, reply.NextToken
	}
	ids, _ := list(structs.QueryOptions{})
	must.Eq(t, []string{"aaaa-1", "aaaa-2", "bbbb-1"}, ids)
	ids, _ = list(structs.QueryOptions{Namespace: "*"})
	must.Eq(t, []string{"aaaa-1", "aaaa-2", "bbbb-1", "cccc-1"}, ids)
	ids, next := list(structs.QueryOptions{Namespace: "*", PerPage: 2, Prefix: "a"})
	must.Eq(t, []string{"aaaa-1", "aaaa-2"}, ids)
	must.Eq(t, "", next)
	ids, next = list(structs.QueryOptions{Namespace: "*", PerPage: 3})
	must.Eq(t, "cccc-1", next)
	ids, _ = list(structs.QueryOptions{Namespace: "*", Filter: `Namespace == "prod" and ClientStatus == "pending"`})
	must.Eq(t, []string{"cccc-1"}, ids)
}
