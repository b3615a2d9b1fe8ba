package api

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/shoenig/test/must"
)

// seen is one request the fake server received.
type seen struct {
	method string
	path   string
	query  url.Values
	header http.Header
	body   []byte
}

// fakeAgent answers every request with reply and records it.
type fakeAgent struct {
	mu    sync.Mutex // guards reqs
	reqs  []seen
	reply string
	code  int
}

func (f *fakeAgent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.reqs = append(f.reqs, seen{r.Method, r.URL.Path, r.URL.Query(), r.Header.Clone(), b})
	f.mu.Unlock()
	w.Header().Set("X-Nomad-Index", "77")
	if f.code != 0 {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(f.code)
	}
	io.WriteString(w, f.reply)
}

func (f *fakeAgent) last(t *testing.T) seen {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	must.Len(t, 1, f.reqs)
	return f.reqs[0]
}

func newFake(t *testing.T, reply string) (*Client, *fakeAgent) {
	t.Helper()
	f := &fakeAgent{reply: reply}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	c, err := NewClient(&Config{Address: srv.URL, Token: "secret-token"})
	must.NoError(t, err)
	return c, f
}

func TestClient_Requests(t *testing.T) {
	cases := []struct {
		name   string
		reply  string
		call   func(t *testing.T, c *Client)
		method string
		path   string
		query  url.Values
		body   string // JSON, compared semantically; "" means no body
		header map[string]string
	}{
		{
			name:  "jobs register",
			reply: `{"EvalID":"e1","EvalCreateIndex":5,"JobModifyIndex":5,"Warnings":""}`,
			call: func(t *testing.T, c *Client) {
				resp, wm, err := c.Jobs().Register(&Job{ID: pointerOf("web"), Type: pointerOf("batch")}, nil)
				must.NoError(t, err)
				must.Eq(t, "e1", resp.EvalID)
				must.Eq(t, uint64(77), wm.LastIndex)
			},
			method: "PUT", path: "/v1/jobs", query: url.Values{},
			body: `{"Job":{"Region":null,"Namespace":null,"ID":"web","Name":null,"Type":"batch","Priority":null,
				"Datacenters":null,"Constraints":null,"TaskGroups":null,"Reschedule":null,"Meta":null,"Stop":null,
				"ParentID":null,"Status":null,"StatusDescription":null,"Stable":null,"Version":null,"SubmitTime":null,
				"CreateIndex":null,"ModifyIndex":null,"JobModifyIndex":null}}`,
		},
		{
			name:  "jobs list with namespace and blocking query",
			reply: `[{"ID":"web"}]`,
			call: func(t *testing.T, c *Client) {
				l, qm, err := c.Jobs().List(&QueryOptions{Namespace: "prod", WaitIndex: 5, WaitTime: time.Second})
				must.NoError(t, err)
				must.Eq(t, "web", l[0].ID)
				must.Eq(t, uint64(77), qm.LastIndex)
			},
			method: "GET", path: "/v1/jobs",
			query: url.Values{"namespace": {"prod"}, "index": {"5"}, "wait": {"1s"}},
		},
		{
			name:  "jobs prefix list",
			reply: `[]`,
			call: func(t *testing.T, c *Client) {
				_, _, err := c.Jobs().PrefixList("we")
				must.NoError(t, err)
			},
			method: "GET", path: "/v1/jobs", query: url.Values{"prefix": {"we"}},
		},
		{
			name:  "jobs info",
			reply: `{"ID":"web","Type":"service"}`,
			call: func(t *testing.T, c *Client) {
				j, _, err := c.Jobs().Info("web", nil)
				must.NoError(t, err)
				must.Eq(t, "service", *j.Type)
			},
			method: "GET", path: "/v1/job/web", query: url.Values{},
		},
		{
			name:  "jobs deregister with purge",
			reply: `{"EvalID":"e2","EvalCreateIndex":6,"JobModifyIndex":6}`,
			call: func(t *testing.T, c *Client) {
				id, _, err := c.Jobs().Deregister("web", true, nil)
				must.NoError(t, err)
				must.Eq(t, "e2", id)
			},
			method: "DELETE", path: "/v1/job/web", query: url.Values{"purge": {"true"}},
		},
		{
			name:  "jobs allocations",
			reply: `[{"ID":"a1"}]`,
			call: func(t *testing.T, c *Client) {
				l, _, err := c.Jobs().Allocations("web", false, &QueryOptions{Params: map[string]string{"x": "y"}})
				must.NoError(t, err)
				must.Eq(t, "a1", l[0].ID)
			},
			method: "GET", path: "/v1/job/web/allocations", query: url.Values{"all": {"false"}, "x": {"y"}},
		},
		{
			name:  "jobs evaluations",
			reply: `[{"ID":"e1","Status":"blocked"}]`,
			call: func(t *testing.T, c *Client) {
				l, _, err := c.Jobs().Evaluations("web", nil)
				must.NoError(t, err)
				must.Eq(t, EvalStatusBlocked, l[0].Status)
			},
			method: "GET", path: "/v1/job/web/evaluations", query: url.Values{},
		},
		{
			name:  "allocations list",
			reply: `[{"ID":"a1","ClientStatus":"running"}]`,
			call: func(t *testing.T, c *Client) {
				l, _, err := c.Allocations().List(&QueryOptions{AllowStale: true})
				must.NoError(t, err)
				must.Eq(t, "running", l[0].ClientStatus)
			},
			method: "GET", path: "/v1/allocations", query: url.Values{"stale": {""}},
		},
		{
			name:  "allocations info",
			reply: `{"ID":"a1","TaskStates":{"t":{"State":"dead","FinishedAt":"2024-06-01T10:00:00Z"}}}`,
			call: func(t *testing.T, c *Client) {
				a, _, err := c.Allocations().Info("a1", nil)
				must.NoError(t, err)
				must.Eq(t, "dead", a.TaskStates["t"].State)
			},
			method: "GET", path: "/v1/allocation/a1", query: url.Values{},
		},
		{
			name:  "evaluations list",
			reply: `[]`,
			call: func(t *testing.T, c *Client) {
				_, _, err := c.Evaluations().List(&QueryOptions{Filter: `Status == "blocked"`, PerPage: 10, NextToken: "t"})
				must.NoError(t, err)
			},
			method: "GET", path: "/v1/evaluations",
			query: url.Values{"filter": {`Status == "blocked"`}, "per_page": {"10"}, "next_token": {"t"}},
		},
		{
			name:  "evaluations info",
			reply: `{"ID":"e1","FailedTGAllocs":{"g":{"NodesEvaluated":2}}}`,
			call: func(t *testing.T, c *Client) {
				e, _, err := c.Evaluations().Info("e1", nil)
				must.NoError(t, err)
				must.Eq(t, 2, e.FailedTGAllocs["g"].NodesEvaluated)
			},
			method: "GET", path: "/v1/evaluation/e1", query: url.Values{},
		},
		{
			name:  "nodes list",
			reply: `[{"ID":"n1","Status":"ready"}]`,
			call: func(t *testing.T, c *Client) {
				l, _, err := c.Nodes().List(nil)
				must.NoError(t, err)
				must.Eq(t, NodeStatusReady, l[0].Status)
			},
			method: "GET", path: "/v1/nodes", query: url.Values{},
		},
		{
			name:  "nodes info",
			reply: `{"ID":"n1","StatusUpdatedAt":1717235940}`,
			call: func(t *testing.T, c *Client) {
				n, _, err := c.Nodes().Info("n1", nil)
				must.NoError(t, err)
				must.Eq(t, int64(1717235940), n.StatusUpdatedAt)
			},
			method: "GET", path: "/v1/node/n1", query: url.Values{},
		},
		{
			name:  "nodes drain",
			reply: `{"NodeModifyIndex":9,"EvalIDs":["e1"],"EvalCreateIndex":9}`,
			call: func(t *testing.T, c *Client) {
				resp, err := c.Nodes().UpdateDrain("n1", &DrainSpec{Deadline: time.Hour, IgnoreSystemJobs: true}, false, nil)
				must.NoError(t, err)
				must.Eq(t, []string{"e1"}, resp.EvalIDs)
				must.Eq(t, uint64(77), resp.WriteMeta.LastIndex)
			},
			method: "PUT", path: "/v1/node/n1/drain", query: url.Values{},
			body: `{"NodeID":"n1","DrainSpec":{"Deadline":3600000000000,"IgnoreSystemJobs":true},"MarkEligible":false}`,
		},
		{
			name:  "nodes drain off",
			reply: `{"NodeModifyIndex":10}`,
			call: func(t *testing.T, c *Client) {
				_, err := c.Nodes().UpdateDrain("n1", nil, true, nil)
				must.NoError(t, err)
			},
			method: "PUT", path: "/v1/node/n1/drain", query: url.Values{},
			body: `{"NodeID":"n1","DrainSpec":null,"MarkEligible":true}`,
		},
		{
			name:  "nodes eligibility",
			reply: `{"NodeModifyIndex":11,"EvalIDs":null,"EvalCreateIndex":0}`,
			call: func(t *testing.T, c *Client) {
				resp, err := c.Nodes().ToggleEligibility("n1", false, nil)
				must.NoError(t, err)
				must.Eq(t, uint64(11), resp.NodeModifyIndex)
			},
			method: "PUT", path: "/v1/node/n1/eligibility", query: url.Values{},
			body: `{"NodeID":"n1","Eligibility":"ineligible"}`,
		},
		{
			name:  "nodes allocations",
			reply: `[{"ID":"a1","NodeID":"n1"}]`,
			call: func(t *testing.T, c *Client) {
				l, _, err := c.Nodes().Allocations("n1", nil)
				must.NoError(t, err)
				must.Eq(t, "n1", l[0].NodeID)
			},
			method: "GET", path: "/v1/node/n1/allocations", query: url.Values{},
		},
		{
			name:  "volumes list by plugin and node",
			reply: `[{"ID":"data","ResourceExhausted":null}]`,
			call: func(t *testing.T, c *Client) {
				l, _, err := c.CSIVolumes().List(&QueryOptions{Prefix: "d", Params: map[string]string{"plugin_id": "hostpath", "node_id": "n1"}})
				must.NoError(t, err)
				must.Eq(t, "data", l[0].ID)
			},
			method: "GET", path: "/v1/volumes",
			query: url.Values{"type": {"csi"}, "prefix": {"d"}, "plugin_id": {"hostpath"}, "node_id": {"n1"}},
		},
		{
			name:  "volumes plugin list",
			reply: `[]`,
			call: func(t *testing.T, c *Client) {
				_, _, err := c.CSIVolumes().PluginList("hostpath", nil)
				must.NoError(t, err)
			},
			method: "GET", path: "/v1/volumes", query: url.Values{"type": {"csi"}, "plugin_id": {"hostpath"}},
		},
		{
			name:  "volumes info",
			reply: `{"ID":"data","Claims":[{"AllocID":"a1","Step":"node-detached","Attempts":3}]}`,
			call: func(t *testing.T, c *Client) {
				v, _, err := c.CSIVolumes().Info("data", nil)
				must.NoError(t, err)
				must.Eq(t, CSIClaimNodeDetached, v.Claims[0].Step)
			},
			method: "GET", path: "/v1/volume/csi/data", query: url.Values{},
		},
		{
			name:  "volumes register",
			reply: `{"Volumes":[],"Warnings":""}`,
			call: func(t *testing.T, c *Client) {
				_, err := c.CSIVolumes().Register(&CSIVolume{ID: "data", PluginID: "hostpath"}, &WriteOptions{Namespace: "prod"})
				must.NoError(t, err)
			},
			method: "PUT", path: "/v1/volume/csi/data", query: url.Values{"namespace": {"prod"}},
			body: `{"Volumes":[{"ID":"data","PluginID":"hostpath"}]}`, // the fields set (requestJSON)
		},
		{
			name:  "volumes register with warnings",
			reply: `{"Volumes":null,"Warnings":"capacity_max is ignored by register"}`,
			call: func(t *testing.T, c *Client) {
				resp, _, err := c.CSIVolumes().RegisterOpts(&CSIVolumeRegisterRequest{Volumes: []*CSIVolume{{ID: "data", PluginID: "hostpath"}}}, nil)
				must.NoError(t, err)
				must.Eq(t, "capacity_max is ignored by register", resp.Warnings)
			},
			method: "PUT", path: "/v1/volume/csi/data", query: url.Values{},
			body: `{"Volumes":[{"ID":"data","PluginID":"hostpath"}]}`, // the fields set (requestJSON)
		},
		{
			name:  "volumes deregister",
			reply: ``,
			call: func(t *testing.T, c *Client) {
				must.NoError(t, c.CSIVolumes().Deregister("data", true, nil))
			},
			method: "DELETE", path: "/v1/volume/csi/data", query: url.Values{"force": {"true"}},
		},
		{
			name:  "volumes detach",
			reply: ``,
			call: func(t *testing.T, c *Client) {
				must.NoError(t, c.CSIVolumes().Detach("data", "n1", nil))
			},
			method: "DELETE", path: "/v1/volume/csi/data/detach", query: url.Values{"node": {"n1"}},
		},
		{
			name:  "volumes create",
			reply: `{"Volumes":[{"ID":"data","ExternalID":"ext-1","Capacity":10485760}]}`,
			call: func(t *testing.T, c *Client) {
				vols, _, err := c.CSIVolumes().Create(&CSIVolume{ID: "data", PluginID: "hostpath"}, nil)
				must.NoError(t, err)
				must.Eq(t, "ext-1", vols[0].ExternalID)
			},
			method: "PUT", path: "/v1/volume/csi/data/create", query: url.Values{},
			body: `{"Volumes":[` + volumeJSON("data", "hostpath") + `]}`,
		},
		{
			name:  "volumes delete with secrets",
			reply: ``,
			call: func(t *testing.T, c *Client) {
				err := c.CSIVolumes().DeleteOpts(&CSIVolumeDeleteRequest{ExternalVolumeID: "data", Secrets: CSISecrets{"user": "a", "pass": "b=c"}}, nil)
				must.NoError(t, err)
			},
			method: "DELETE", path: "/v1/volume/csi/data/delete", query: url.Values{},
			header: map[string]string{"X-Nomad-CSI-Secrets": "pass=b=c,user=a", "X-Nomad-Token": "secret-token"},
		},
		{
			name:  "volumes delete",
			reply: ``,
			call: func(t *testing.T, c *Client) {
				must.NoError(t, c.CSIVolumes().Delete("data", nil))
			},
			method: "DELETE", path: "/v1/volume/csi/data/delete", query: url.Values{},
			header: map[string]string{"X-Nomad-CSI-Secrets": ""},
		},
		{
			name:  "prefix lists",
			reply: `[]`,
			call: func(t *testing.T, c *Client) {
				_, _, err := c.Nodes().PrefixList("f7")
				must.NoError(t, err)
			},
			method: "GET", path: "/v1/nodes", query: url.Values{"prefix": {"f7"}},
		},
		{
			name:  "alloc prefix list",
			reply: `[]`,
			call: func(t *testing.T, c *Client) {
				_, _, err := c.Allocations().PrefixList("5a")
				must.NoError(t, err)
			},
			method: "GET", path: "/v1/allocations", query: url.Values{"prefix": {"5a"}},
		},
		{
			name:  "eval prefix list",
			reply: `[]`,
			call: func(t *testing.T, c *Client) {
				_, _, err := c.Evaluations().PrefixList("9c")
				must.NoError(t, err)
			},
			method: "GET", path: "/v1/evaluations", query: url.Values{"prefix": {"9c"}},
		},
		{
			name:  "plugins list",
			reply: `[{"ID":"hostpath","NodesHealthy":1}]`,
			call: func(t *testing.T, c *Client) {
				l, _, err := c.CSIPlugins().List(nil)
				must.NoError(t, err)
				must.Eq(t, 1, l[0].NodesHealthy)
			},
			method: "GET", path: "/v1/plugins", query: url.Values{"type": {"csi"}},
		},
		{
			name:  "plugins info",
			reply: `{"ID":"hostpath","Nodes":{"n1":{"PluginID":"hostpath","UpdateTime":"2024-06-01T10:00:00Z"}}}`,
			call: func(t *testing.T, c *Client) {
				p, _, err := c.CSIPlugins().Info("hostpath", nil)
				must.NoError(t, err)
				must.Eq(t, "hostpath", p.Nodes["n1"].PluginID)
			},
			method: "GET", path: "/v1/plugin/csi/hostpath", query: url.Values{},
		},
		{
			name:  "system gc",
			reply: ``,
			call: func(t *testing.T, c *Client) {
				must.NoError(t, c.System().GarbageCollect())
			},
			method: "PUT", path: "/v1/system/gc", query: url.Values{},
		},
		{
			name:  "agent self",
			reply: `{"Config":{"Region":"global"},"Member":{"Name":"dev","Port":4648},"Stats":{"raft":{"state":"Leader"}}}`,
			call: func(t *testing.T, c *Client) {
				s, err := c.Agent().Self()
				must.NoError(t, err)
				must.Eq(t, "Leader", s.Stats["raft"]["state"])
				must.Eq(t, uint16(4648), s.Member.Port)
			},
			method: "GET", path: "/v1/agent/self", query: url.Values{},
		},
		{
			name:  "agent health",
			reply: `{"client":{"ok":true,"message":"ok"},"server":{"ok":true,"message":"ok"}}`,
			call: func(t *testing.T, c *Client) {
				h, err := c.Agent().Health()
				must.NoError(t, err)
				must.True(t, h.Client.Ok)
				must.Eq(t, "ok", h.Server.Message)
			},
			method: "GET", path: "/v1/agent/health", query: url.Values{},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, f := newFake(t, tc.reply)
			tc.call(t, c)
			got := f.last(t)
			must.Eq(t, tc.method, got.method)
			must.Eq(t, tc.path, got.path)
			must.Eq(t, tc.query, got.query)
			must.Eq(t, "secret-token", got.header.Get("X-Nomad-Token"))
			if tc.body == "" {
				must.Eq(t, "", string(got.body))
			} else {
				var want, have any
				must.NoError(t, json.Unmarshal([]byte(tc.body), &want))
				must.NoError(t, json.Unmarshal(got.body, &have), must.Sprintf("body %s", got.body))
				must.Eq(t, want, have)
			}
			for k, v := range tc.header {
				must.Eq(t, v, got.header.Get(k), must.Sprintf("header %s", k))
			}
		})
	}
}

// volumeJSON is how a register request encodes a volume that sets only an
// ID and a plugin: every Nomad field is present, Berth's extras are not.
func volumeJSON(id, plugin string) string {
	b, _ := json.Marshal(&CSIVolume{ID: id, PluginID: plugin})
	return string(b)
}

func TestClient_StatusErrors(t *testing.T) {
	c, f := newFake(t, "volume not found")
	f.code = http.StatusNotFound
	_, _, err := c.CSIVolumes().Info("nope", nil)
	must.Error(t, err)
	must.True(t, IsNotFound(err))
	must.EqError(t, err, "Unexpected response code: 404 (volume not found)")

	err = c.CSIVolumes().Deregister("nope", false, nil)
	must.True(t, IsNotFound(err))
}

// TestClient_ParamsNotShared checks that adding the helper params does
// not write into the caller's options.
func TestClient_ParamsNotShared(t *testing.T) {
	c, _ := newFake(t, `[]`)
	q := &QueryOptions{Params: map[string]string{"node_id": "n1"}}
	_, _, err := c.CSIVolumes().List(q)
	must.NoError(t, err)
	must.Eq(t, map[string]string{"node_id": "n1"}, q.Params)

	w := &WriteOptions{}
	must.NoError(t, c.CSIVolumes().Deregister("x", true, w))
	must.Nil(t, w.Params)
}

func TestAllocation_Status(t *testing.T) {
	a := &Allocation{DesiredStatus: AllocDesiredStatusStop, ClientStatus: AllocClientStatusRunning,
		Job: &Job{Type: pointerOf("batch"), Version: pointerOf(uint64(2))}}
	must.True(t, a.ServerTerminalStatus())
	must.False(t, a.ClientTerminalStatus())
	a.ClientStatus = AllocClientStatusLost
	must.True(t, a.ClientTerminalStatus())
	s := a.Stub()
	must.Eq(t, "batch", s.JobType)
	must.Eq(t, uint64(2), s.JobVersion)
}

// TestClient_EscapesIDsInPaths: an ID is one path element on the wire,
// whatever it holds, so it can never address another endpoint.
func TestClient_EscapesIDsInPaths(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = append(got, r.URL.EscapedPath())
		io.WriteString(w, "{}")
	}))
	t.Cleanup(srv.Close)
	c, err := NewClient(&Config{Address: srv.URL})
	must.NoError(t, err)
	_, _, _ = c.Jobs().Info("a/../b?x", nil)
	_, _, _ = c.CSIVolumes().Info("v/1", nil)
	_, _, _ = c.Jobs().Plan(&Job{ID: ptrTo("p/q")}, nil)
	must.Eq(t, []string{"/v1/job/a%2F..%2Fb%3Fx", "/v1/volume/csi/v%2F1", "/v1/job/p%2Fq/plan"}, got)
}

func ptrTo[T any](v T) *T { return &v }
