package agent

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/api"
	"github.com/berth-io/berth/nomad/msgpack"
	"github.com/berth-io/berth/nomad/structs"
)

// do sends one request and returns the response and its body.
func do(t testing.TB, a *Agent, method, path string, body any) (*http.Response, string) {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		must.NoError(t, err)
		r = strings.NewReader(string(b))
	}
	req, err := http.NewRequest(method, "http://"+a.HTTPAddr()+path, r)
	must.NoError(t, err)
	resp, err := http.DefaultClient.Do(req)
	must.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	must.NoError(t, err)
	return resp, string(b)
}

// decode does a request that must succeed and decodes its JSON answer.
func decode[T any](t *testing.T, a *Agent, method, path string, body any) (T, *http.Response) {
	t.Helper()
	var out T
	resp, b := do(t, a, method, path, body)
	must.Eq(t, http.StatusOK, resp.StatusCode, must.Sprintf("%s %s: %s", method, path, b))
	must.NoError(t, json.Unmarshal([]byte(b), &out), must.Sprintf("body: %s", b))
	return out, resp
}

func index(t *testing.T, resp *http.Response) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(resp.Header.Get("X-Nomad-Index"), 10, 64)
	must.NoError(t, err, must.Sprint("X-Nomad-Index"))
	return n
}

// registerPluginNode registers a node that runs a healthy node instance
// (and, with controller, a controller instance) of plugin.
func registerPluginNode(t testing.TB, a *Agent, i int, plugin string, controller bool) *structs.Node {
	t.Helper()
	n := &structs.Node{
		ID:            fmt.Sprintf("00000000-0000-4000-8000-%012d", i),
		SecretID:      fmt.Sprintf("secret-%d", i),
		Name:          fmt.Sprintf("node-%d", i),
		Datacenter:    "dc1",
		Status:        structs.NodeStatusReady,
		Attributes:    map[string]string{"unique.network.ip-address": "10.0.0.1"},
		Drivers:       map[string]*structs.DriverInfo{"raw_exec": {Detected: true, Healthy: true}},
		NodeResources: &structs.NodeResources{CPU: 4000, MemoryMB: 8192},
		CSINodePlugins: map[string]*structs.CSIInfo{plugin: {
			PluginID: plugin, AllocID: fmt.Sprintf("plugin-alloc-%d", i), Healthy: true,
			Provider: "org.example." + plugin, ProviderVersion: "1.0.0", RequiresControllerPlugin: controller,
			NodeInfo: &structs.CSINodeInfo{ID: fmt.Sprintf("ext-%d", i)},
		}},
	}
	if controller {
		n.CSIControllerPlugins = map[string]*structs.CSIInfo{plugin: {
			PluginID: plugin, AllocID: fmt.Sprintf("plugin-alloc-%d", i), Healthy: false,
			HealthDescription: "probe failed", ControllerInfo: &structs.CSIControllerInfo{SupportsAttachDetach: true},
		}}
	}
	must.NoError(t, a.Server().RPC("Node.Register", &structs.NodeRegisterRequest{Node: n}, &structs.NodeUpdateResponse{}))
	return n
}

func apiVolume(id, plugin string) *api.CSIVolume {
	return &api.CSIVolume{
		ID: id, Name: id, PluginID: plugin,
		RequestedCapabilities: []*api.CSIVolumeCapability{{
			AccessMode: api.CSIVolumeAccessModeSingleNodeWriter, AttachmentMode: api.CSIVolumeAttachmentModeFilesystem,
		}},
		MountOptions: &api.CSIMountOptions{FSType: "ext4", MountFlags: []string{"uid=1000,password=swordfish"}},
		Secrets:      api.CSISecrets{"token": "top-secret-token"},
		Parameters:   map[string]string{"tier": "gold"},
	}
}

func registerVolume(t *testing.T, a *Agent, v *api.CSIVolume) uint64 {
	t.Helper()
	_, resp := decode[api.CSIVolumeRegisterResponse](t, a, http.MethodPut, "/v1/volume/csi/"+v.ID,
		api.CSIVolumeRegisterRequest{Volumes: []*api.CSIVolume{v}})
	return index(t, resp)
}

// raftApply commits a write whose RPC belongs to another issue (plans).
func raftApply(t *testing.T, a *Agent, mt structs.MessageType, req any) {
	t.Helper()
	buf, err := msgpack.Encode(mt, req)
	must.NoError(t, err)
	f := a.Server().Raft().Apply(buf, 5*time.Second)
	must.NoError(t, f.Error())
	if err, ok := f.Response().(error); ok {
		t.Fatalf("applying message type %d: %v", mt, err)
	}
}

// placeAlloc registers a job of the given type and places one alloc of it
// on node, with a taken claim on volID unless that is empty. The job's
// datacenter has no nodes, so the leader's scheduler never places allocs
// of its own next to it.
func placeAlloc(t *testing.T, a *Agent, jobType, volID, allocID, nodeID string) {
	t.Helper()
	job := &structs.Job{ID: "job-" + allocID, Name: "job", Namespace: "default", Type: jobType, Priority: 50,
		Datacenters: []string{"nowhere"}, TaskGroups: []*structs.TaskGroup{{Name: "g", Count: 1, Tasks: []*structs.Task{{Name: "t", Driver: "raw_exec"}}}}}
	must.NoError(t, a.Server().RPC("Job.Register", &structs.JobRegisterRequest{Job: job}, &structs.JobRegisterResponse{}))
	req := &structs.ApplyPlanResultsRequest{
		AllocsUpdated: []*structs.Allocation{{ID: allocID, Namespace: "default", Name: job.ID + ".g[0]", NodeID: nodeID, JobID: job.ID, TaskGroup: "g"}},
		Timestamp:     time.Now().UnixNano(),
	}
	if volID != "" {
		req.CSIClaims = []*structs.CSIVolumeClaimUpdate{{Namespace: "default", VolumeID: volID, Claim: &structs.CSIVolumeClaim{
			AllocID: allocID, JobID: job.ID, NodeID: nodeID, Mode: structs.CSIVolumeClaimWrite,
			AccessMode: structs.CSIVolumeAccessModeSingleNodeWriter, AttachmentMode: structs.CSIVolumeAttachmentModeFilesystem,
			Step: structs.CSIClaimTaken,
		}}}
	}
	raftApply(t, a, structs.ApplyPlanResultsRequestType, req)
}

// claimVolume places an alloc of a fresh service job on node with a taken
// claim on the volume.
func claimVolume(t *testing.T, a *Agent, volID, allocID, nodeID string) {
	t.Helper()
	placeAlloc(t, a, structs.JobTypeService, volID, allocID, nodeID)
}

func mustNotLeakSecrets(t *testing.T, body string) {
	t.Helper()
	must.StrNotContains(t, body, "top-secret-token")
	must.StrNotContains(t, body, "swordfish")
}

func TestHTTP_VolumeLifecycle(t *testing.T) {
	a := newDevAgent(t)
	node := registerPluginNode(t, a, 1, "hostpath", true)

	// Register: Nomad's reply shape, secrets stripped.
	resp, body := do(t, a, http.MethodPut, "/v1/volume/csi/vol-1", api.CSIVolumeRegisterRequest{Volumes: []*api.CSIVolume{apiVolume("vol-1", "hostpath")}})
	must.Eq(t, http.StatusOK, resp.StatusCode, must.Sprint(body))
	// The plugin's only controller is unhealthy: registered, with a
	// warning that the capabilities were not validated.
	must.StrContains(t, body, `"Warnings":"volume \"vol-1\" was not validated by a controller of plugin \"hostpath\"`)
	must.StrContains(t, body, `"Volumes":[{"ID":"vol-1"`)
	mustNotLeakSecrets(t, body)
	must.Positive(t, index(t, resp))

	claimVolume(t, a, "vol-1", "alloc-1", node.ID)

	// Read: plugin health, claims, allocs; no secrets.
	vol, resp := decode[api.CSIVolume](t, a, http.MethodGet, "/v1/volume/csi/vol-1", nil)
	must.Eq(t, "true", resp.Header.Get("X-Nomad-KnownLeader"))
	must.Eq(t, "org.example.hostpath", vol.Provider)
	must.True(t, vol.ControllerRequired)
	must.Eq(t, 0, vol.ControllersHealthy)
	must.Eq(t, 1, vol.ControllersExpected)
	must.Eq(t, 1, vol.NodesHealthy)
	must.False(t, vol.Schedulable, must.Sprint("the plugin's controller is unhealthy"))
	must.Eq(t, api.CSIVolumeStateReady, vol.State)
	must.Nil(t, vol.Secrets)
	must.Eq(t, []string{"[REDACTED]"}, vol.MountOptions.MountFlags)
	must.MapContainsKey(t, vol.WriteAllocs, "alloc-1")
	must.MapEmpty(t, vol.ReadAllocs)
	must.SliceLen(t, 1, vol.Allocations)
	must.Eq(t, "alloc-1", vol.Allocations[0].ID)
	must.SliceLen(t, 1, vol.Claims)
	must.Eq(t, api.CSIClaimTaken, vol.Claims[0].Step)
	must.Eq(t, node.ID, vol.Claims[0].NodeID)
	resp, body = do(t, a, http.MethodGet, "/v1/volume/csi/vol-1?pretty", nil)
	must.StrContains(t, body, `"WriteAllocs": {`)
	must.StrContains(t, body, `"alloc-1": null`)
	mustNotLeakSecrets(t, body)

	// List: health and state, no secrets.
	stubs, _ := decode[[]*api.CSIVolumeListStub](t, a, http.MethodGet, "/v1/volumes?type=csi", nil)
	must.SliceLen(t, 1, stubs)
	must.Eq(t, 1, stubs[0].Claims)
	must.Eq(t, 1, stubs[0].NodesHealthy)
	_, body = do(t, a, http.MethodGet, "/v1/volumes?type=csi", nil)
	mustNotLeakSecrets(t, body)

	// Deregister while claimed: 409 naming the alloc and the way out.
	resp, body = do(t, a, http.MethodDelete, "/v1/volume/csi/vol-1", nil)
	must.Eq(t, http.StatusConflict, resp.StatusCode)
	must.Eq(t, "text/plain; charset=utf-8", resp.Header.Get("Content-Type"))
	must.StrContains(t, body, "alloc-1")
	must.StrContains(t, body, "-force")
	resp, _ = do(t, a, http.MethodDelete, "/v1/volume/csi/vol-1?force=true", nil)
	must.Eq(t, http.StatusConflict, resp.StatusCode, must.Sprint("the alloc still runs"))

	raftApply(t, a, structs.AllocClientUpdateRequestType, &structs.AllocUpdateRequest{
		Alloc: []*structs.Allocation{{ID: "alloc-1", ClientStatus: structs.AllocClientStatusComplete}}})
	resp, body = do(t, a, http.MethodDelete, "/v1/volume/csi/vol-1?force=true", nil)
	must.Eq(t, http.StatusOK, resp.StatusCode, must.Sprint(body))
	must.Positive(t, index(t, resp))
	resp, body = do(t, a, http.MethodGet, "/v1/volume/csi/vol-1", nil)
	must.Eq(t, http.StatusNotFound, resp.StatusCode)
	must.Eq(t, "volume not found", body)
}

// A register of volumes of several plugins answers each volume with its
// own plugin's health (read once for the whole request) and, for a volume
// already claimed, the claiming allocs.
func TestHTTP_VolumeRegisterBatchAnswersEachVolumesPlugin(t *testing.T) {
	a := newDevAgent(t)
	node := registerPluginNode(t, a, 1, "alpha", false)
	registerPluginNode(t, a, 2, "alpha", false)
	registerPluginNode(t, a, 3, "beta", false)

	batch := api.CSIVolumeRegisterRequest{Volumes: []*api.CSIVolume{apiVolume("vol-a", "alpha"), apiVolume("vol-b", "beta")}}
	out, resp := decode[api.CSIVolumeRegisterResponse](t, a, http.MethodPut, "/v1/volume/csi/vol-a", batch)
	must.Eq(t, http.StatusOK, resp.StatusCode)
	must.SliceLen(t, 2, out.Volumes)
	byID := map[string]*api.CSIVolume{}
	for _, v := range out.Volumes {
		byID[v.ID] = v
	}
	must.Eq(t, 2, byID["vol-a"].NodesHealthy)
	must.Eq(t, 1, byID["vol-b"].NodesHealthy)
	must.True(t, byID["vol-b"].Schedulable)
	must.SliceEmpty(t, byID["vol-a"].Allocations)

	claimVolume(t, a, "vol-a", "alloc-1", node.ID)
	out, resp = decode[api.CSIVolumeRegisterResponse](t, a, http.MethodPut, "/v1/volume/csi/vol-a", batch)
	must.Eq(t, http.StatusOK, resp.StatusCode)
	for _, v := range out.Volumes {
		byID[v.ID] = v
	}
	must.SliceLen(t, 1, byID["vol-a"].Allocations, must.Sprint("the answer shows the alloc claiming vol-a"))
	must.Eq(t, "alloc-1", byID["vol-a"].Allocations[0].ID)
	must.SliceEmpty(t, byID["vol-b"].Allocations)
}

func TestHTTP_VolumeStatusCodes(t *testing.T) {
	a := newDevAgent(t)
	registerPluginNode(t, a, 1, "hostpath", false)
	registerVolume(t, a, apiVolume("data", "hostpath"))
	registerVolume(t, a, apiVolume("data-2", "hostpath"))

	noCaps := apiVolume("bad", "hostpath")
	noCaps.RequestedCapabilities = nil
	cases := []struct {
		name, method, path string
		body               any
		code               int
		want               string
	}{
		{"list without type is empty", "GET", "/v1/volumes", nil, 200, "[]"},
		{"list of host volumes is empty", "GET", "/v1/volumes?type=host", nil, 200, "[]"},
		{"get is exact", "GET", "/v1/volume/csi/data-2", nil, 200, `"ID":"data-2"`},
		{"a prefix names nothing", "GET", "/v1/volume/csi/data-", nil, 404, "volume not found"},
		{"unknown volume", "GET", "/v1/volume/csi/nope", nil, 404, "volume not found"},
		{"other namespace", "GET", "/v1/volume/csi/data?namespace=prod", nil, 404, "volume not found"},
		{"unknown plugin", "PUT", "/v1/volume/csi/x", api.CSIVolumeRegisterRequest{Volumes: []*api.CSIVolume{apiVolume("x", "nfs")}},
			400, `CSI plugin "nfs" is not known`},
		{"invalid volume", "PUT", "/v1/volume/csi/bad", api.CSIVolumeRegisterRequest{Volumes: []*api.CSIVolume{noCaps}},
			400, "must include at least one capability block"},
		{"no volumes", "PUT", "/v1/volume/csi/x", map[string]any{}, 400, "no volumes"},
		{"not json", "PUT", "/v1/volume/csi/x", "{", 400, "decoding request body"},
		{"fixed field", "PUT", "/v1/volume/csi/data", api.CSIVolumeRegisterRequest{Volumes: []*api.CSIVolume{func() *api.CSIVolume {
			v := apiVolume("data", "hostpath")
			v.ExternalID = "moved"
			return v
		}()}}, 400, "external_id cannot change"},
		{"bad filter", "GET", "/v1/volumes?type=csi&filter=" + url.QueryEscape("PluginID =="), nil, 400, "invalid filter"},
		{"bad index", "GET", "/v1/volumes?type=csi&index=x", nil, 400, "invalid index"},
		{"deregister unknown", "DELETE", "/v1/volume/csi/nope", nil, 404, `volume "nope" not found`},
		{"bad force", "DELETE", "/v1/volume/csi/data?force=maybe", nil, 400, "invalid force"},
		{"method", "PATCH", "/v1/volume/csi/data", nil, 405, "method PATCH not allowed"},
		{"list method", "POST", "/v1/volumes", nil, 405, "not allowed"},
		{"create without body", "PUT", "/v1/volume/csi/data/create", nil, 400, "missing request body"},
		{"create method", "GET", "/v1/volume/csi/data/create", nil, 405, "not allowed"},
		{"delete unknown", "DELETE", "/v1/volume/csi/nope/delete", nil, 404, `volume "nope" not found`},
		{"plugin list without type", "GET", "/v1/plugins", nil, 200, "[]"},
		{"unknown plugin get", "GET", "/v1/plugin/csi/nfs", nil, 404, "plugin not found"},
		{"plugin method", "DELETE", "/v1/plugin/csi/hostpath", nil, 405, "not allowed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var resp *http.Response
			var body string
			if s, ok := tc.body.(string); ok {
				req, err := http.NewRequest(tc.method, "http://"+a.HTTPAddr()+tc.path, strings.NewReader(s))
				must.NoError(t, err)
				resp, err = http.DefaultClient.Do(req)
				must.NoError(t, err)
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				body = string(b)
			} else {
				resp, body = do(t, a, tc.method, tc.path, tc.body)
			}
			must.Eq(t, tc.code, resp.StatusCode, must.Sprint(body))
			must.StrContains(t, body, tc.want)
			if tc.code >= 400 {
				must.Eq(t, "text/plain; charset=utf-8", resp.Header.Get("Content-Type"))
			}
		})
	}
}

func TestHTTP_VolumeListPagesAndFilters(t *testing.T) {
	a := newDevAgent(t)
	registerPluginNode(t, a, 1, "a", false)
	registerPluginNode(t, a, 2, "b", false)
	for i := range 5 {
		plugin := "a"
		if i%2 == 1 {
			plugin = "b"
		}
		registerVolume(t, a, apiVolume(fmt.Sprintf("vol-%d", i), plugin))
	}

	var ids []string
	var tokens []string
	path := "/v1/volumes?type=csi&per_page=2"
	for {
		stubs, resp := decode[[]*api.CSIVolumeListStub](t, a, http.MethodGet, path, nil)
		for _, s := range stubs {
			ids = append(ids, s.ID)
		}
		next := resp.Header.Get("X-Nomad-NextToken")
		tokens = append(tokens, next)
		if next == "" {
			break
		}
		must.SliceLen(t, 2, stubs)
		path = "/v1/volumes?type=csi&per_page=2&next_token=" + url.QueryEscape(next)
	}
	must.Eq(t, []string{"vol-0", "vol-1", "vol-2", "vol-3", "vol-4"}, ids)
	must.Eq(t, []string{"default.vol-2", "default.vol-4", ""}, tokens)

	stubs, _ := decode[[]*api.CSIVolumeListStub](t, a, http.MethodGet,
		"/v1/volumes?type=csi&filter="+url.QueryEscape(`PluginID == "b"`), nil)
	must.SliceLen(t, 2, stubs)
	for _, s := range stubs {
		must.Eq(t, "b", s.PluginID)
		must.True(t, s.Schedulable)
	}
	stubs, _ = decode[[]*api.CSIVolumeListStub](t, a, http.MethodGet, "/v1/volumes?type=csi&plugin_id=a&prefix=vol-4", nil)
	must.SliceLen(t, 1, stubs)
	must.Eq(t, "vol-4", stubs[0].ID)

	plugins, _ := decode[[]*api.CSIPluginListStub](t, a, http.MethodGet, "/v1/plugins?type=csi", nil)
	must.SliceLen(t, 2, plugins)
	plug, _ := decode[api.CSIPlugin](t, a, http.MethodGet, "/v1/plugin/csi/a", nil)
	must.Eq(t, 1, plug.NodesHealthy)
	must.MapContainsKey(t, plug.Nodes, "00000000-0000-4000-8000-000000000001")
	must.SliceEmpty(t, plug.Allocations) // the plugin's alloc is not in state
}

func TestHTTP_VolumeListBlocksUntilAWrite(t *testing.T) {
	a := newDevAgent(t)
	registerPluginNode(t, a, 1, "hostpath", false)
	first := registerVolume(t, a, apiVolume("v1", "hostpath"))

	type result struct {
		stubs []*api.CSIVolumeListStub
		index uint64
		err   error
	}
	done := make(chan result, 1)
	go func() {
		var r result
		resp, err := http.Get(fmt.Sprintf("http://%s/v1/volumes?type=csi&index=%d&wait=20s", a.HTTPAddr(), first))
		if err != nil {
			r.err = err
			done <- r
			return
		}
		defer resp.Body.Close()
		r.index, r.err = strconv.ParseUint(resp.Header.Get("X-Nomad-Index"), 10, 64)
		if r.err == nil {
			r.err = json.NewDecoder(resp.Body).Decode(&r.stubs)
		}
		done <- r
	}()
	second := registerVolume(t, a, apiVolume("v2", "hostpath"))
	select {
	case r := <-done:
		must.NoError(t, r.err)
		must.Greater(t, first, r.index)
		must.Eq(t, second, r.index)
		must.SliceLen(t, 2, r.stubs)
	case <-time.After(15 * time.Second):
		t.Fatal("blocking query did not return after a write")
	}
}
