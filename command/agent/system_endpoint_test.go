package agent

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/api"
	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/testutil"
)

func TestHTTP_VolumeDetach(t *testing.T) {
	a := newDevAgent(t)
	node := registerPluginNode(t, a, 1, "hostpath", false)
	registerVolume(t, a, apiVolume("vol-1", "hostpath"))
	claimVolume(t, a, "vol-1", "alloc-1", node.ID)
	path := "/v1/volume/csi/vol-1/detach?node="

	cases := []struct {
		name, method, path string
		code               int
		want               string
	}{
		{"missing node", "DELETE", "/v1/volume/csi/vol-1/detach", 400, "missing node"},
		{"bad force", "DELETE", path + node.ID + "&force=maybe", 400, "invalid force"},
		{"method", "PUT", path + node.ID, 405, "method PUT not allowed"},
		{"unknown volume", "DELETE", "/v1/volume/csi/nope/detach?node=" + node.ID, 404, `volume "nope" not found`},
		{"unknown node", "DELETE", path + "ffff", 404, `node "ffff" not found`},
		{"in use", "DELETE", path + node.ID[:8], 409, "alloc alloc-1 (taken): in use"},
		{"force in use", "DELETE", path + node.ID + "&force=true", 409, "still run on a live node"},
		{"other sub-paths stay unknown", "DELETE", "/v1/volume/csi/vol-1/detach/x?node=" + node.ID, 404, "no such endpoint"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := do(t, a, tc.method, tc.path, nil)
			must.Eq(t, tc.code, resp.StatusCode, must.Sprint(body))
			must.StrContains(t, body, tc.want)
		})
	}

	// Stopped, but its client never confirmed unpublish: -force releases it.
	raftApply(t, a, structs.AllocClientUpdateRequestType, &structs.AllocUpdateRequest{
		Alloc: []*structs.Allocation{{ID: "alloc-1", ClientStatus: structs.AllocClientStatusFailed}}})
	resp, body := do(t, a, http.MethodDelete, path+node.ID[:8]+"&force=true", nil)
	must.Eq(t, http.StatusOK, resp.StatusCode, must.Sprint(body))
	must.Positive(t, index(t, resp))
	vol, _ := decode[api.CSIVolume](t, a, http.MethodGet, "/v1/volume/csi/vol-1", nil)
	must.SliceEmpty(t, vol.Claims)
	must.SliceLen(t, 1, vol.PastClaims)
	must.Eq(t, "detach -force by operator", vol.PastClaims[0].ReleaseReason)
}

func TestHTTP_SystemGC(t *testing.T) {
	a := newDevAgent(t)
	registerPluginNode(t, a, 1, "gone", false)
	bare := &structs.Node{ID: "00000000-0000-4000-8000-000000000001", SecretID: "secret-1", Name: "node-1",
		Datacenter: "dc1", Status: structs.NodeStatusReady}
	must.NoError(t, a.Server().RPC("Node.Register", &structs.NodeRegisterRequest{Node: bare}, &structs.NodeUpdateResponse{}))

	resp, body := do(t, a, http.MethodPut, "/v1/system/gc", nil)
	must.Eq(t, http.StatusOK, resp.StatusCode, must.Sprint(body))
	must.Eq(t, "", body)
	resp, _ = do(t, a, http.MethodGet, "/v1/plugin/csi/gone", nil)
	must.Eq(t, http.StatusNotFound, resp.StatusCode)
	resp, _ = do(t, a, http.MethodGet, "/v1/system/gc", nil)
	must.Eq(t, http.StatusMethodNotAllowed, resp.StatusCode)

	// The volumewatcher's gauges, set on its first scan.
	testutil.WaitForResult(t, func() (bool, error) {
		_, body := do(t, a, http.MethodGet, "/v1/metrics?format=prometheus", nil)
		for _, want := range []string{"berth_csi_unpublish_backlog ", "berth_csi_unpublish_oldest_seconds "} {
			if !strings.Contains(body, want) {
				return false, fmt.Errorf("no %q in /v1/metrics", want)
			}
		}
		return true, nil
	})
}
