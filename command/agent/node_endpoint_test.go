package agent

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/api"
	"github.com/berth-io/berth/nomad/structs"
)

func TestHTTP_Nodes(t *testing.T) {
	a := newDevAgent(t)
	n1 := registerPluginNode(t, a, 1, "hostpath", false)
	n2 := registerPluginNode(t, a, 200000000000, "hostpath", false)
	registerVolume(t, a, apiVolume("v", "hostpath"))
	claimVolume(t, a, "v", "alloc-1", n1.ID)
	// A batch alloc stays on a draining node until the drain's deadline,
	// so the leader's drainer cannot finish the drains below under us.
	placeAlloc(t, a, structs.JobTypeBatch, "", "batch-1", n1.ID)

	// The dev agent's own client may have registered a node too.
	stubs, _ := decode[[]*api.NodeListStub](t, a, http.MethodGet, "/v1/nodes?prefix=00000000-0000-4000-8000-", nil)
	must.SliceLen(t, 2, stubs)
	must.Eq(t, "10.0.0.1", stubs[0].Address)
	stubs, _ = decode[[]*api.NodeListStub](t, a, http.MethodGet, "/v1/nodes?prefix="+n1.ID[:30], nil)
	must.SliceLen(t, 1, stubs)

	node, _ := decode[api.Node](t, a, http.MethodGet, "/v1/node/"+n1.ID, nil)
	must.Eq(t, "node-1", node.Name)
	must.MapContainsKey(t, node.CSINodePlugins, "hostpath")
	must.True(t, node.CSINodePlugins["hostpath"].Healthy)
	_, body := do(t, a, http.MethodGet, "/v1/node/"+n1.ID, nil)
	must.StrNotContains(t, body, "secret-1", must.Sprint("the node secret never leaves the servers"))

	node, _ = decode[api.Node](t, a, http.MethodGet, "/v1/node/00000000-0000-4000-8000-2", nil)
	must.Eq(t, n2.ID, node.ID, must.Sprint("unique prefix"))
	resp, body := do(t, a, http.MethodGet, "/v1/node/00000000", nil)
	must.Eq(t, http.StatusBadRequest, resp.StatusCode)
	must.StrContains(t, body, "matches 2 nodes")
	resp, body = do(t, a, http.MethodGet, "/v1/node/ffff", nil)
	must.Eq(t, http.StatusNotFound, resp.StatusCode)
	must.Eq(t, "node not found", body)

	// Nomad's client decodes these as whole allocations.
	allocs, _ := decode[[]*api.Allocation](t, a, http.MethodGet, "/v1/node/"+n1.ID+"/allocations", nil)
	must.SliceLen(t, 2, allocs)
	must.Eq(t, "alloc-1", allocs[0].ID)
	alloc, _ := decode[api.Allocation](t, a, http.MethodGet, "/v1/allocation/alloc-1", nil)
	must.Eq(t, "alloc-1", alloc.ID)
	must.NotNil(t, alloc.Job)
	list, _ := decode[[]*api.AllocationListStub](t, a, http.MethodGet, "/v1/allocations?filter="+url.QueryEscape(`JobID == "job-alloc-1"`), nil)
	must.SliceLen(t, 1, list)

	// Drain with a deadline, then stop it and mark eligible.
	drain, resp := decode[api.NodeDrainUpdateResponse](t, a, http.MethodPut, "/v1/node/"+n1.ID+"/drain",
		api.NodeUpdateDrainRequest{NodeID: n1.ID, DrainSpec: &api.DrainSpec{Deadline: time.Hour}})
	must.Eq(t, index(t, resp), drain.NodeModifyIndex)
	must.SliceLen(t, 2, drain.EvalIDs, must.Sprint("one per job with a live alloc on the node"))
	node, _ = decode[api.Node](t, a, http.MethodGet, "/v1/node/"+n1.ID, nil)
	must.True(t, node.Drain)
	must.Eq(t, time.Hour, node.DrainStrategy.Deadline)
	must.Eq(t, time.Hour, node.DrainStrategy.ForceDeadline.Sub(node.DrainStrategy.StartedAt))
	must.Eq(t, "ineligible", node.SchedulingEligibility)
	decode[api.NodeDrainUpdateResponse](t, a, http.MethodPut, "/v1/node/"+n1.ID+"/drain",
		api.NodeUpdateDrainRequest{NodeID: n1.ID, MarkEligible: true})
	node, _ = decode[api.Node](t, a, http.MethodGet, "/v1/node/"+n1.ID, nil)
	must.False(t, node.Drain)
	must.Eq(t, "eligible", node.SchedulingEligibility)

	decode[api.NodeEligibilityUpdateResponse](t, a, http.MethodPut, "/v1/node/"+n1.ID+"/eligibility",
		api.NodeUpdateEligibilityRequest{NodeID: n1.ID, Eligibility: "ineligible"})
	node, _ = decode[api.Node](t, a, http.MethodGet, "/v1/node/"+n1.ID, nil)
	must.Eq(t, "ineligible", node.SchedulingEligibility)

	// A drain without a deadline: the batch alloc keeps it open.
	decode[api.NodeDrainUpdateResponse](t, a, http.MethodPut, "/v1/node/"+n1.ID+"/drain",
		api.NodeUpdateDrainRequest{NodeID: n1.ID, DrainSpec: &api.DrainSpec{}})
	node, _ = decode[api.Node](t, a, http.MethodGet, "/v1/node/"+n1.ID, nil)
	must.True(t, node.Drain)
	must.True(t, node.DrainStrategy.ForceDeadline.IsZero())
	resp, body = do(t, a, http.MethodPut, "/v1/node/"+n1.ID+"/eligibility", api.NodeUpdateEligibilityRequest{Eligibility: "eligible"})
	must.Eq(t, http.StatusBadRequest, resp.StatusCode)
	must.StrContains(t, body, "cancel the drain first")

	cases := []struct {
		name, method, path string
		body               any
		code               int
		want               string
	}{
		{"bad eligibility", "PUT", "/v1/node/" + n1.ID + "/eligibility", api.NodeUpdateEligibilityRequest{Eligibility: "sometimes"}, 400, `eligibility "sometimes" is not valid`},
		{"drain unknown node", "PUT", "/v1/node/nope/drain", api.NodeUpdateDrainRequest{}, 404, `node "nope" not found`},
		{"drain without body", "PUT", "/v1/node/" + n1.ID + "/drain", nil, 400, "missing request body"},
		{"drain method", "GET", "/v1/node/" + n1.ID + "/drain", nil, 405, "not allowed"},
		{"node method", "DELETE", "/v1/node/" + n1.ID, nil, 405, "not allowed"},
		{"nodes method", "PUT", "/v1/nodes", nil, 405, "not allowed"},
		{"unknown action", "GET", "/v1/node/" + n1.ID + "/purge", nil, 404, "no such endpoint"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := do(t, a, tc.method, tc.path, tc.body)
			must.Eq(t, tc.code, resp.StatusCode, must.Sprint(body))
			must.StrContains(t, body, tc.want)
		})
	}
}
