package command

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/api"
)

func TestJobPlan(t *testing.T) {
	cases := []struct {
		name     string
		resp     api.JobPlanResponse
		wantCode int
		wantOut  []string
	}{
		{
			name: "places",
			resp: api.JobPlanResponse{Annotations: &api.PlanAnnotations{DesiredTGUpdates: map[string]*api.DesiredUpdates{
				"hello": {Place: 1},
			}}},
			wantCode: 1,
			wantOut:  []string{"hello       1", "All tasks successfully allocated."},
		},
		{
			name: "no change",
			resp: api.JobPlanResponse{JobModifyIndex: 7, Annotations: &api.PlanAnnotations{DesiredTGUpdates: map[string]*api.DesiredUpdates{
				"hello": {Ignore: 1},
			}}},
			wantCode: 0,
			wantOut:  []string{"Job Modify Index: 7"},
		},
		{
			name: "placement failure",
			resp: api.JobPlanResponse{FailedTGAllocs: map[string]*api.AllocationMetric{
				"hello": {NodesEvaluated: 1, ConstraintFiltered: map[string]int{`volume "data": not found`: 1}},
			}},
			wantCode: 0,
			wantOut:  []string{"Failed to place all allocations", `volume \"data\": not found`},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var gotPath, gotMethod string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				gotPath, gotMethod = r.URL.Path, r.Method
				json.NewEncoder(w).Encode(c.resp)
			}))
			t.Cleanup(srv.Close)
			var out, errOut bytes.Buffer
			code := Run([]string{"job", "plan", "-address", srv.URL, "../examples/hello.hcl"}, &out, &errOut)
			must.Eq(t, c.wantCode, code, must.Sprintf("stderr: %s", errOut.String()))
			must.Eq(t, "/v1/job/hello/plan", gotPath)
			must.Eq(t, http.MethodPut, gotMethod)
			for _, w := range c.wantOut {
				must.StrContains(t, out.String(), w)
			}
		})
	}

	var out, errOut bytes.Buffer
	must.Eq(t, 255, Run([]string{"job", "plan", "-address", "http://127.0.0.1:1", "nope.hcl"}, &out, &errOut))
	must.StrContains(t, errOut.String(), "nope.hcl")
}
