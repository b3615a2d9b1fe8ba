package agent

import (
	"net/http"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/nomad/explain"
)

func TestHTTP_VolumeExplain(t *testing.T) {
	a := newDevAgent(t)
	node := registerPluginNode(t, a, 1, "hostpath", true)
	registerVolume(t, a, apiVolume("vol-1", "hostpath"))

	e, _ := decode[explain.Explanation](t, a, http.MethodGet, "/v1/volume/csi/vol-1/explain", nil)
	must.Eq(t, "vol-1", e.VolumeID)
	// registerPluginNode's controller instance is not healthy.
	must.Eq(t, "volume vol-1 has no live claims; it cannot be claimed now: controller plugin hostpath has 0 healthy instances (of 1 expected)", e.Summary)
	must.Eq(t, "check its controller job", e.Findings[0].Action)

	claimVolume(t, a, "vol-1", "a1", node.ID)
	e, _ = decode[explain.Explanation](t, a, http.MethodGet, "/v1/volume/csi/vol-1/explain", nil)
	must.Len(t, 2, e.Findings)
	f := e.Findings[1]
	must.Eq(t, "a1", f.AllocID)
	must.Eq(t, "in-use", f.Kind)
	must.Eq(t, "alloc a1 is still running on node "+node.ID[:8], f.Why)
	must.Eq(t, "stop it (`berth job stop job-a1`), or wait; release will follow", f.Action)

	resp, body := do(t, a, http.MethodGet, "/v1/volume/csi/nope/explain", nil)
	must.Eq(t, http.StatusNotFound, resp.StatusCode, must.Sprint(body))
	resp, _ = do(t, a, http.MethodPut, "/v1/volume/csi/vol-1/explain", nil)
	must.Eq(t, http.StatusMethodNotAllowed, resp.StatusCode)
}
