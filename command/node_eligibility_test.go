package command

import (
	"encoding/json"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/api"
)

func TestNodeEligibility(t *testing.T) {
	f := newFakeAPI(t)
	seedCluster(f)

	code, out, _ := f.run("node", "eligibility", "-disable", "9a0b1")
	must.Eq(t, 0, code)
	must.StrContains(t, out, `Node "`+nodeA+`" scheduling eligibility set: ineligible for scheduling`)
	write, body, _ := f.lastWrite()
	must.Eq(t, "PUT /v1/node/"+nodeA+"/eligibility", write)
	var req api.NodeUpdateEligibilityRequest
	must.NoError(t, json.Unmarshal([]byte(body), &req))
	must.Eq(t, api.NodeSchedulingIneligible, req.Eligibility)

	code, out, _ = f.run("node", "eligibility", "-enable", nodeA)
	must.Eq(t, 0, code)
	must.StrContains(t, out, "eligible for scheduling")

	code, _, errOut := f.run("node", "eligibility", "9a0b1")
	must.Eq(t, 1, code)
	must.StrContains(t, errOut, "Give exactly one of -enable and -disable.")

	code, _, errOut = f.run("node", "eligibility", "-enable", "9a0b")
	must.Eq(t, 1, code)
	must.StrContains(t, errOut, `Prefix "9a0b" matched multiple nodes`)
}
