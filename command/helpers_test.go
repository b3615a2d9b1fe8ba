package command

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/api"
)

// ---- the fake HTTP API -----------------------------------------------------

// fakeAPI serves the HTTP routes the CLI calls, in Nomad's JSON shapes,
// from maps the test fills. Every change bumps one index, sent as
// X-Nomad-Index. A blocking query (?index=N) that finds nothing newer
// than N runs the next scripted step (so time passes only while the CLI
// waits, and a CLI that polls without blocking never advances the
// script); with no step left it waits for a change, ?wait, or the
// client to go away.
type fakeAPI struct {
	t   *testing.T
	srv *httptest.Server

	// mu guards everything below.
	mu      sync.Mutex
	index   uint64
	changed chan struct{} // closed and replaced on every change
	jobs    map[string]*api.Job
	allocs  map[string]*api.Allocation
	evals   map[string]*api.Evaluation
	nodes   map[string]*api.Node
	volumes map[string]*api.CSIVolume
	plugins map[string]*api.CSIPlugin
	// logs are task logs by "<alloc>/<task>/<stdout|stderr>".
	logs map[string]string
	// steps are applied one per blocking query that would otherwise wait.
	steps []func(f *fakeAPI)
	// blocking counts blocking queries; writes records "METHOD path?query"
	// of each write, and bodies their bodies.
	blocking int
	writes   []string
	bodies   []string
	headers  []http.Header
	// failWith, when set, answers every request with this status and body.
	failCode int
	failBody string
}

func newFakeAPI(t *testing.T) *fakeAPI {
	t.Helper()
	f := &fakeAPI{
		t: t, index: 10, changed: make(chan struct{}),
		jobs: map[string]*api.Job{}, allocs: map[string]*api.Allocation{}, evals: map[string]*api.Evaluation{},
		nodes: map[string]*api.Node{}, volumes: map[string]*api.CSIVolume{}, plugins: map[string]*api.CSIPlugin{},
		logs: map[string]string{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/jobs", f.jobList)
	mux.HandleFunc("PUT /v1/jobs", f.jobRegister)
	mux.HandleFunc("GET /v1/job/{id}", f.jobGet)
	mux.HandleFunc("DELETE /v1/job/{id}", f.jobDeregister)
	mux.HandleFunc("GET /v1/job/{id}/allocations", f.jobAllocs)
	mux.HandleFunc("GET /v1/job/{id}/evaluations", f.jobEvals)
	mux.HandleFunc("GET /v1/evaluation/{id}", f.evalGet)
	mux.HandleFunc("GET /v1/allocations", f.allocList)
	mux.HandleFunc("GET /v1/allocation/{id}", f.allocGet)
	mux.HandleFunc("GET /v1/nodes", f.nodeList)
	mux.HandleFunc("GET /v1/node/{id}", f.nodeGet)
	mux.HandleFunc("GET /v1/node/{id}/allocations", f.nodeAllocs)
	mux.HandleFunc("PUT /v1/node/{id}/drain", f.nodeDrain)
	mux.HandleFunc("PUT /v1/node/{id}/eligibility", f.nodeEligibility)
	mux.HandleFunc("GET /v1/volumes", f.volumeList)
	mux.HandleFunc("GET /v1/volume/csi/{id}", f.volumeGet)
	mux.HandleFunc("PUT /v1/volume/csi/{id}", f.volumeRegister)
	mux.HandleFunc("DELETE /v1/volume/csi/{id}", f.volumeDeregister)
	mux.HandleFunc("PUT /v1/volume/csi/{id}/create", f.volumeCreate)
	mux.HandleFunc("DELETE /v1/volume/csi/{id}/detach", f.volumeDetach)
	mux.HandleFunc("DELETE /v1/volume/csi/{id}/delete", f.volumeDelete)
	mux.HandleFunc("GET /v1/plugins", f.pluginList)
	mux.HandleFunc("GET /v1/plugin/csi/{id}", f.pluginGet)
	mux.HandleFunc("PUT /v1/system/gc", f.recordWrite)
	mux.HandleFunc("GET /v1/client/fs/logs/{id}", f.logsGet)
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		code, body := f.failCode, f.failBody
		f.mu.Unlock()
		if code != 0 {
			http.Error(w, body, code)
			return
		}
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(f.srv.Close)
	t.Setenv("BERTH_ADDR", f.srv.URL)
	t.Setenv("BERTH_TOKEN", "")
	t.Setenv("BERTH_NAMESPACE", "")
	return f
}

// run runs the CLI with args and returns the exit code and output.
func (f *fakeAPI) run(args ...string) (int, string, string) {
	f.t.Helper()
	var out, errOut bytes.Buffer
	code := Run(args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// script queues steps for blocking queries to apply.
func (f *fakeAPI) script(steps ...func(f *fakeAPI)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.steps = append(f.steps, steps...)
}

// update changes the state under the lock and bumps the index.
func (f *fakeAPI) update(fn func(f *fakeAPI)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
	f.bumpLocked()
}

func (f *fakeAPI) bumpLocked() {
	f.index++
	close(f.changed)
	f.changed = make(chan struct{})
}

// block implements the blocking half of a read.
func (f *fakeAPI) block(r *http.Request) {
	q := r.URL.Query()
	idx, _ := strconv.ParseUint(q.Get("index"), 10, 64)
	if idx == 0 {
		return
	}
	wait := 5 * time.Minute
	if w, err := time.ParseDuration(q.Get("wait")); err == nil && w > 0 {
		wait = w
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	f.mu.Lock()
	f.blocking++
	for f.index <= idx {
		if len(f.steps) > 0 {
			step := f.steps[0]
			f.steps = f.steps[1:]
			step(f)
			f.bumpLocked()
			continue
		}
		ch := f.changed
		f.mu.Unlock()
		select {
		case <-ch:
		case <-timer.C:
			return
		case <-r.Context().Done():
			return
		}
		f.mu.Lock()
	}
	f.mu.Unlock()
}

// reply writes obj as JSON with the current index.
func (f *fakeAPI) reply(w http.ResponseWriter, obj any) {
	f.mu.Lock()
	idx := f.index
	b, err := json.Marshal(obj)
	f.mu.Unlock()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("X-Nomad-Index", strconv.FormatUint(idx, 10))
	w.Header().Set("Content-Type", "application/json")
	w.Write(b)
}

// recordWrite notes a write and bumps the index; it answers {} when
// nothing else does.
func (f *fakeAPI) recordWrite(w http.ResponseWriter, r *http.Request) {
	f.noteWrite(r)
	if w != nil {
		f.reply(w, map[string]any{})
	}
}

func (f *fakeAPI) noteWrite(r *http.Request) []byte {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	defer f.mu.Unlock()
	line := r.Method + " " + r.URL.Path
	if r.URL.RawQuery != "" {
		line += "?" + r.URL.RawQuery
	}
	f.writes = append(f.writes, line)
	f.bodies = append(f.bodies, string(body))
	f.headers = append(f.headers, r.Header.Clone())
	f.bumpLocked()
	return body
}

func (f *fakeAPI) lastWrite() (string, string, http.Header) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.writes) == 0 {
		return "", "", nil
	}
	n := len(f.writes) - 1
	return f.writes[n], f.bodies[n], f.headers[n]
}

func prefixOf(r *http.Request) string { return r.URL.Query().Get("prefix") }

// ---- jobs, evals, allocs ---------------------------------------------------

func (f *fakeAPI) jobList(w http.ResponseWriter, r *http.Request) {
	f.block(r)
	f.mu.Lock()
	out := []*api.JobListStub{}
	for _, j := range f.jobs {
		if strings.HasPrefix(*j.ID, prefixOf(r)) {
			out = append(out, &api.JobListStub{ID: *j.ID, Name: deref(j.Name), Namespace: deref(j.Namespace), Type: deref(j.Type),
				Priority: *j.Priority, Status: deref(j.Status), Stop: j.Stop != nil && *j.Stop, SubmitTime: derefI64(j.SubmitTime)})
		}
	}
	f.mu.Unlock()
	f.reply(w, out)
}

func derefI64(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

func (f *fakeAPI) jobRegister(w http.ResponseWriter, r *http.Request) {
	body := f.noteWrite(r)
	var req api.JobRegisterRequest
	if err := json.Unmarshal(body, &req); err != nil || req.Job == nil {
		http.Error(w, "bad job", http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	job := req.Job
	job.Status = ptrTo("pending")
	f.jobs[*job.ID] = job
	evalID := fmt.Sprintf("e0a1b2c3-0000-4000-8000-%012d", len(f.evals)+1)
	f.evals[evalID] = &api.Evaluation{ID: evalID, JobID: *job.ID, Namespace: deref(job.Namespace), Status: api.EvalStatusPending,
		TriggeredBy: "job-register", CreateIndex: f.index}
	f.mu.Unlock()
	f.reply(w, &api.JobRegisterResponse{EvalID: evalID})
}

func (f *fakeAPI) jobGet(w http.ResponseWriter, r *http.Request) {
	f.block(r)
	f.mu.Lock()
	j := f.jobs[r.PathValue("id")]
	f.mu.Unlock()
	if j == nil {
		http.Error(w, "job not found", http.StatusNotFound)
		return
	}
	f.reply(w, j)
}

func (f *fakeAPI) jobDeregister(w http.ResponseWriter, r *http.Request) {
	f.noteWrite(r)
	f.mu.Lock()
	j := f.jobs[r.PathValue("id")]
	if j == nil {
		f.mu.Unlock()
		http.Error(w, "job not found", http.StatusNotFound)
		return
	}
	j.Stop = ptrTo(true)
	evalID := fmt.Sprintf("e0a1b2c3-0000-4000-8000-%012d", len(f.evals)+1)
	f.evals[evalID] = &api.Evaluation{ID: evalID, JobID: *j.ID, Status: api.EvalStatusPending, TriggeredBy: "job-deregister", CreateIndex: f.index}
	f.mu.Unlock()
	f.reply(w, &api.JobDeregisterResponse{EvalID: evalID})
}

func (f *fakeAPI) jobAllocs(w http.ResponseWriter, r *http.Request) {
	f.block(r)
	f.mu.Lock()
	if f.jobs[r.PathValue("id")] == nil {
		f.mu.Unlock()
		http.Error(w, "job not found", http.StatusNotFound)
		return
	}
	out := []*api.AllocationListStub{}
	for _, a := range f.allocs {
		if a.JobID == r.PathValue("id") {
			out = append(out, a.Stub())
		}
	}
	f.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	f.reply(w, out)
}

func (f *fakeAPI) jobEvals(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	out := []*api.Evaluation{}
	for _, e := range f.evals {
		if e.JobID == r.PathValue("id") {
			out = append(out, e)
		}
	}
	f.mu.Unlock()
	f.reply(w, out)
}

func (f *fakeAPI) evalGet(w http.ResponseWriter, r *http.Request) {
	f.block(r)
	f.mu.Lock()
	e := f.evals[r.PathValue("id")]
	f.mu.Unlock()
	if e == nil {
		http.Error(w, "eval not found", http.StatusNotFound)
		return
	}
	f.reply(w, e)
}

func (f *fakeAPI) allocList(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	out := []*api.AllocationListStub{}
	for _, a := range f.allocs {
		if strings.HasPrefix(a.ID, prefixOf(r)) {
			out = append(out, a.Stub())
		}
	}
	f.mu.Unlock()
	f.reply(w, out)
}

func (f *fakeAPI) allocGet(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	a := f.allocs[r.PathValue("id")]
	f.mu.Unlock()
	if a == nil {
		http.Error(w, "alloc not found", http.StatusNotFound)
		return
	}
	f.reply(w, a)
}

// ---- nodes ---------------------------------------------------------------

func (f *fakeAPI) nodeList(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	out := []*api.NodeListStub{}
	for _, n := range f.nodes {
		if strings.HasPrefix(n.ID, prefixOf(r)) {
			out = append(out, &api.NodeListStub{ID: n.ID, Name: n.Name, Datacenter: n.Datacenter, NodeClass: n.NodeClass, Drain: n.Drain,
				SchedulingEligibility: n.SchedulingEligibility, Status: n.Status, Address: n.HTTPAddr})
		}
	}
	f.mu.Unlock()
	f.reply(w, out)
}

func (f *fakeAPI) nodeGet(w http.ResponseWriter, r *http.Request) {
	f.block(r)
	f.mu.Lock()
	n := f.nodes[r.PathValue("id")]
	var obj any = n
	if n != nil {
		// Add a MountConfig to each driver, as the agent will send it.
		b, _ := json.Marshal(n)
		var m map[string]any
		json.Unmarshal(b, &m)
		if ds, ok := m["Drivers"].(map[string]any); ok {
			for name, d := range ds {
				if dm, ok := d.(map[string]any); ok {
					dm["MountConfig"] = map[bool]string{true: "all", false: "none"}[name == "exec"]
				}
			}
		}
		obj = m
	}
	f.mu.Unlock()
	if n == nil {
		http.Error(w, "node not found", http.StatusNotFound)
		return
	}
	f.reply(w, obj)
}

func (f *fakeAPI) nodeAllocs(w http.ResponseWriter, r *http.Request) {
	f.block(r)
	f.mu.Lock()
	out := []*api.Allocation{}
	for _, a := range f.allocs {
		if a.NodeID == r.PathValue("id") {
			out = append(out, a)
		}
	}
	f.mu.Unlock()
	f.reply(w, out)
}

func (f *fakeAPI) nodeDrain(w http.ResponseWriter, r *http.Request) {
	body := f.noteWrite(r)
	var req api.NodeUpdateDrainRequest
	json.Unmarshal(body, &req)
	f.mu.Lock()
	if n := f.nodes[r.PathValue("id")]; n != nil {
		n.Drain = req.DrainSpec != nil
		if req.DrainSpec != nil {
			n.DrainStrategy = &api.DrainStrategy{DrainSpec: *req.DrainSpec}
			n.SchedulingEligibility = api.NodeSchedulingIneligible
		} else {
			n.DrainStrategy = nil
		}
	}
	f.mu.Unlock()
	f.reply(w, &api.NodeDrainUpdateResponse{})
}

func (f *fakeAPI) nodeEligibility(w http.ResponseWriter, r *http.Request) {
	f.noteWrite(r)
	f.reply(w, &api.NodeEligibilityUpdateResponse{})
}

// ---- volumes and plugins ---------------------------------------------------

func (f *fakeAPI) volumeList(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f.mu.Lock()
	out := []*api.CSIVolumeListStub{}
	for _, v := range f.volumes {
		if !strings.HasPrefix(v.ID, prefixOf(r)) || (q.Get("plugin_id") != "" && v.PluginID != q.Get("plugin_id")) {
			continue
		}
		if n := q.Get("node_id"); n != "" {
			on := false
			for _, c := range v.Claims {
				on = on || c.NodeID == n
			}
			if !on {
				continue
			}
		}
		out = append(out, &api.CSIVolumeListStub{ID: v.ID, Name: v.Name, Namespace: v.Namespace, PluginID: v.PluginID,
			Schedulable: v.Schedulable, AccessMode: v.AccessMode, Claims: len(v.Claims), State: v.State})
	}
	f.mu.Unlock()
	f.reply(w, out)
}

func (f *fakeAPI) volumeGet(w http.ResponseWriter, r *http.Request) {
	f.block(r)
	f.mu.Lock()
	v := f.volumes[r.PathValue("id")]
	f.mu.Unlock()
	if v == nil {
		http.Error(w, "volume not found", http.StatusNotFound)
		return
	}
	f.reply(w, v)
}

func (f *fakeAPI) volumeRegister(w http.ResponseWriter, r *http.Request) {
	body := f.noteWrite(r)
	var req api.CSIVolumeRegisterRequest
	json.Unmarshal(body, &req)
	f.mu.Lock()
	for _, v := range req.Volumes {
		f.volumes[v.ID] = v
	}
	f.mu.Unlock()
	f.reply(w, &api.CSIVolumeRegisterResponse{Volumes: req.Volumes})
}

func (f *fakeAPI) volumeCreate(w http.ResponseWriter, r *http.Request) {
	body := f.noteWrite(r)
	var req api.CSIVolumeCreateRequest
	json.Unmarshal(body, &req)
	var outcomes []string
	f.mu.Lock()
	for _, v := range req.Volumes {
		// A volume that exists is expanded (a larger capacity_min) or
		// modified, as the servers do.
		outcome := api.CSIVolumeCreated
		if old := f.volumes[v.ID]; old != nil && old.ExternalID != "" {
			outcome = api.CSIVolumeModified
			if v.RequestedCapacityMin > old.Capacity {
				outcome = api.CSIVolumeExpanded
			}
		}
		outcomes = append(outcomes, outcome)
		v.ExternalID = "ext-" + v.ID
		v.Capacity = v.RequestedCapacityMin
		v.Topologies = []*api.CSITopology{{Segments: map[string]string{"rack": "R1"}}}
		f.volumes[v.ID] = v
	}
	f.mu.Unlock()
	f.reply(w, &api.CSIVolumeCreateResponse{Volumes: req.Volumes, Outcomes: outcomes})
}

func (f *fakeAPI) volumeDeregister(w http.ResponseWriter, r *http.Request) {
	f.noteWrite(r)
	f.mu.Lock()
	v := f.volumes[r.PathValue("id")]
	f.mu.Unlock()
	if v != nil && len(v.Claims) > 0 && r.URL.Query().Get("force") != "true" {
		http.Error(w, "volume in use: 1 claim", http.StatusBadRequest)
		return
	}
	w.WriteHeader(http.StatusOK)
}

func (f *fakeAPI) volumeDetach(w http.ResponseWriter, r *http.Request) {
	f.noteWrite(r)
	w.WriteHeader(http.StatusOK)
}

func (f *fakeAPI) volumeDelete(w http.ResponseWriter, r *http.Request) {
	f.noteWrite(r)
	w.WriteHeader(http.StatusOK)
}

func (f *fakeAPI) pluginList(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	out := []*api.CSIPluginListStub{}
	for _, p := range f.plugins {
		if strings.HasPrefix(p.ID, prefixOf(r)) {
			out = append(out, &api.CSIPluginListStub{ID: p.ID, Provider: p.Provider, ControllersHealthy: p.ControllersHealthy,
				ControllersExpected: p.ControllersExpected, NodesHealthy: p.NodesHealthy, NodesExpected: p.NodesExpected})
		}
	}
	f.mu.Unlock()
	f.reply(w, out)
}

func (f *fakeAPI) pluginGet(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	p := f.plugins[r.PathValue("id")]
	f.mu.Unlock()
	if p == nil {
		http.Error(w, "plugin not found", http.StatusNotFound)
		return
	}
	f.reply(w, p)
}

// logsGet serves plain logs, honouring origin and offset.
func (f *fakeAPI) logsGet(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f.mu.Lock()
	data, ok := f.logs[r.PathValue("id")+"/"+q.Get("task")+"/"+q.Get("type")]
	f.mu.Unlock()
	if !ok {
		http.Error(w, fmt.Sprintf("alloc %s has no task %q", r.PathValue("id"), q.Get("task")), http.StatusBadRequest)
		return
	}
	off, _ := strconv.ParseInt(q.Get("offset"), 10, 64)
	off = min(off, int64(len(data)))
	if q.Get("origin") == "end" {
		data = data[int64(len(data))-off:]
	} else {
		data = data[off:]
	}
	io.WriteString(w, data)
}

// ---- fixtures --------------------------------------------------------------

func ptrTo[T any](v T) *T { return &v }

const (
	nodeA   = "9a0b1c2d-1111-4000-8000-000000000001"
	nodeB   = "9a0b7777-2222-4000-8000-000000000002"
	allocA  = "5e6f7a8b-aaaa-4000-8000-000000000001"
	allocA2 = "5e6f7a8b-bbbb-4000-8000-000000000002"
	allocC  = "c0ffee00-cccc-4000-8000-000000000003"
)

// webJob is a one-group job with a CSI volume mounted at /srv/data.
func webJob(id string) *api.Job {
	j := &api.Job{
		ID: ptrTo(id), Type: ptrTo("service"),
		TaskGroups: []*api.TaskGroup{{
			Name:  ptrTo("g"),
			Count: ptrTo(1),
			Volumes: map[string]*api.VolumeRequest{
				"data": {Name: "data", Type: "csi", Source: "data", AccessMode: "single-node-writer", AttachmentMode: "file-system"},
			},
			Tasks: []*api.Task{{
				Name: "web", Driver: "exec",
				VolumeMounts: []*api.VolumeMount{{Volume: ptrTo("data"), Destination: ptrTo("/srv/data")}},
			}},
		}},
	}
	j.Canonicalize()
	j.Status = ptrTo("running")
	j.SubmitTime = ptrTo(time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC).UnixNano())
	return j
}

func testAlloc(id, jobID, evalID, nodeID, status string) *api.Allocation {
	now := time.Now().UnixNano()
	return &api.Allocation{
		ID: id, EvalID: evalID, Name: jobID + ".g[0]", NodeID: nodeID, NodeName: "node-a", JobID: jobID, Namespace: "default",
		TaskGroup: "g", DesiredStatus: api.AllocDesiredStatusRun, ClientStatus: status, CreateTime: now, ModifyTime: now,
		TaskStates: map[string]*api.TaskState{},
	}
}

func testNode(id, name string) *api.Node {
	return &api.Node{
		ID: id, Name: name, Datacenter: "dc1", Status: api.NodeStatusReady, SchedulingEligibility: api.NodeSchedulingEligible,
		Drivers: map[string]*api.DriverInfo{
			"exec":     {Detected: true, Healthy: true, HealthDescription: "Healthy"},
			"raw_exec": {Detected: true, Healthy: true, HealthDescription: "Healthy"},
		},
		CSINodePlugins: map[string]*api.CSIInfo{
			"hostpath": {PluginID: "hostpath", Healthy: false, HealthDescription: "plugins unavailable: not root"},
		},
	}
}

// ---- assertions --------------------------------------------------------------

// mustJSON checks that out is valid JSON and decodes it into v when v is
// not nil.
func mustJSON(t *testing.T, out string, v any) {
	t.Helper()
	must.True(t, json.Valid([]byte(out)), must.Sprintf("not JSON: %q", out))
	if v != nil {
		must.NoError(t, json.Unmarshal([]byte(out), v))
	}
}

// mustOrder checks that the parts appear in s in this order.
func mustOrder(t *testing.T, s string, parts ...string) {
	t.Helper()
	rest := s
	for _, p := range parts {
		i := strings.Index(rest, p)
		must.True(t, i >= 0, must.Sprintf("%q missing (or out of order) in:\n%s", p, s))
		rest = rest[i+len(p):]
	}
}

// ---- helper unit tests -----------------------------------------------------

func TestPickByPrefix(t *testing.T) {
	ids := []string{"data", "data2", "logs", "abc1", "abc2"}
	id := func(s string) string { return s }
	cases := []struct {
		name    string
		prefix  string
		want    string
		matches int
	}{
		{"exact wins over longer IDs", "data", "data", 0},
		{"unique prefix", "lo", "logs", 0},
		{"ambiguous", "abc", "", 2},
		{"none", "zzz", "", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			one, matches, ok := pickByPrefix(tc.prefix, ids, id)
			must.Eq(t, tc.want != "", ok)
			must.Eq(t, tc.want, one)
			must.Len(t, tc.matches, matches)
		})
	}
}

func TestPrettyTimeDiff(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	cases := []struct {
		name string
		ago  time.Duration
		want string
	}{
		{"seconds", 12 * time.Second, "12s ago"},
		{"minutes and seconds", 5*time.Minute + 10*time.Second, "5m10s ago"},
		{"whole hour", time.Hour, "1h ago"},
		{"days and hours", 3*24*time.Hour + 2*time.Hour + 7*time.Minute, "3d2h ago"},
		{"now", 0, "just now"},
		{"future", -5 * time.Minute, "in 5m"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			must.Eq(t, tc.want, prettyTimeDiff(now.Add(-tc.ago), now))
		})
	}
	must.Eq(t, "", prettyTimeDiff(time.Time{}, now))
}

func TestHumanBytes(t *testing.T) {
	must.Eq(t, "", humanBytes(0))
	must.Eq(t, "100 B", humanBytes(100))
	must.Eq(t, "10 GiB", humanBytes(10<<30))
	must.Eq(t, "1.5 KiB", humanBytes(1536))
}

func TestKV_AlignsAndShowsNone(t *testing.T) {
	got := kv([][2]string{{"ID", "x"}, {"Long Name", ""}})
	must.Eq(t, "ID        = x\nLong Name = <none>", got)
}

func TestPlacementFailures_NamesCSIReasons(t *testing.T) {
	got := placementFailures(map[string]*api.AllocationMetric{
		"g": {NodesEvaluated: 2, CoalescedFailures: 1, ConstraintFiltered: map[string]int{
			"CSI volume data has exhausted its available writer claims": 2,
		}, DimensionExhausted: map[string]int{"memory": 1}},
	}, "  ")
	must.StrContains(t, got, `  Task Group "g" (failed to place 2 allocations):`)
	must.StrContains(t, got, `    * Constraint "CSI volume data has exhausted its available writer claims": 2 nodes excluded by filter`)
	must.StrContains(t, got, `Dimension "memory" exhausted on 1 nodes`)
}

func TestKVFlag(t *testing.T) {
	f := kvFlag{}
	must.NoError(t, f.Set("a=b=c"))
	must.Eq(t, "b=c", f["a"])
	must.Error(t, f.Set("novalue"))
}

func TestAPIErr_ConnectionRefusedSaysWhereItLooked(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	addr := srv.URL
	srv.Close()
	t.Setenv("BERTH_ADDR", addr)
	var out, errOut bytes.Buffer
	must.Eq(t, 1, Run([]string{"job", "status"}, &out, &errOut))
	must.StrContains(t, errOut.String(), "Is a Berth agent running at "+addr)
}

func TestRawGet_StatusErrorIsAPIs(t *testing.T) {
	newFakeAPI(t)
	m := &Meta{}
	_, err := m.rawGet(t.Context(), "", "/v1/node/nope", url.Values{})
	must.True(t, api.IsNotFound(err), must.Sprintf("err: %v", err))
	must.ErrorContains(t, err, "node not found")
}

func TestHelpAndUsage(t *testing.T) {
	for _, name := range []string{"job run", "job status", "job stop", "alloc status", "alloc logs", "node status",
		"node drain", "node eligibility", "volume init", "volume register", "volume create", "volume deregister",
		"volume delete", "volume detach", "volume status", "plugin status", "system gc"} {
		var out, errOut bytes.Buffer
		must.Eq(t, 0, Run(append(strings.Fields(name), "-h"), &out, &errOut), must.Sprintf("%s", name))
		must.StrHasPrefix(t, "Usage: berth "+name, out.String())
	}
	var out, errOut bytes.Buffer
	must.Eq(t, 1, Run([]string{"volume"}, &out, &errOut))
	for _, sub := range []string{"create", "delete", "deregister", "detach", "init", "register", "status"} {
		must.StrContains(t, errOut.String(), "volume "+sub)
	}
}

// seedCluster fills the fake with a small cluster:
//
//	jobs    web, worker, writer           ("w" is ambiguous)
//	allocs  5e6f7a8b-aaaa (web, running)  5e6f7a8b-bbbb (web, failed)  c0ffee00 (worker)
//	nodes   9a0b1c2d (node-a)  9a0b7777 (node-b)
//	volumes data (2 claims, 1 past)  data-2  logs
//	plugins hostpath (node instance unhealthy: not root)  host-b
func seedCluster(f *fakeAPI) {
	f.update(func(f *fakeAPI) {
		for _, id := range []string{"web", "worker", "writer"} {
			f.jobs[id] = webJob(id)
		}
		now := time.Now()
		a := testAlloc(allocA, "web", "e0a1b2c3-0000-4000-8000-000000000001", nodeA, api.AllocClientStatusRunning)
		a.Job = f.jobs["web"]
		a.ClientDescription = "Tasks are running"
		a.TaskStates["web"] = &api.TaskState{State: "running", StartedAt: now.Add(-time.Minute), Events: []*api.TaskEvent{
			{Type: api.TaskReceived, Time: now.Add(-2 * time.Minute).UnixNano()},
			{Type: api.TaskSetup, Message: "Building Task Directory", Time: now.Add(-2 * time.Minute).UnixNano()},
			{Type: api.TaskStarted, Time: now.Add(-time.Minute).UnixNano()},
		}}
		f.allocs[allocA] = a
		a2 := testAlloc(allocA2, "web", "e0a1b2c3-0000-4000-8000-000000000001", nodeA, api.AllocClientStatusFailed)
		a2.Job = f.jobs["web"]
		a2.NextAllocation = allocA // a replaced a2
		a.PreviousAllocation = allocA2
		f.allocs[allocA2] = a2
		f.allocs[allocC] = testAlloc(allocC, "worker", "e0a1b2c3-0000-4000-8000-000000000002", nodeB, api.AllocClientStatusRunning)

		f.evals["e0a1b2c3-0000-4000-8000-000000000001"] = &api.Evaluation{
			ID: "e0a1b2c3-0000-4000-8000-000000000001", JobID: "web", Status: api.EvalStatusComplete, CreateIndex: 5,
			BlockedEval:       "b10cced0-0000-4000-8000-000000000009",
			QueuedAllocations: map[string]int{"g": 1},
			FailedTGAllocs: map[string]*api.AllocationMetric{"g": {NodesEvaluated: 2,
				ConstraintFiltered: map[string]int{"CSI volume data has exhausted its available writer claims": 2}}},
		}
		f.evals["b10cced0-0000-4000-8000-000000000009"] = &api.Evaluation{
			ID: "b10cced0-0000-4000-8000-000000000009", JobID: "web", Status: api.EvalStatusBlocked, CreateIndex: 6,
		}

		f.nodes[nodeA] = testNode(nodeA, "node-a")
		f.nodes[nodeA].HTTPAddr = strings.TrimPrefix(f.srv.URL, "http://")
		f.nodes[nodeB] = testNode(nodeB, "node-b")

		f.volumes["data"] = &api.CSIVolume{
			ID: "data", Name: "data", Namespace: "default", ExternalID: "ext-data", PluginID: "hostpath", Provider: "hostpath.berth.io",
			ProviderVersion: "0.1.0", State: api.CSIVolumeStateReady, Capacity: 10 << 20, Schedulable: true,
			ControllersHealthy: 1, ControllersExpected: 1, NodesHealthy: 0, NodesExpected: 1,
			AccessMode: api.CSIVolumeAccessModeSingleNodeWriter, AttachmentMode: api.CSIVolumeAttachmentModeFilesystem,
			Topologies:  []*api.CSITopology{{Segments: map[string]string{"rack": "R1", "zone": "a"}}},
			Allocations: []*api.AllocationListStub{a.Stub(), a2.Stub()},
			Claims: []*api.CSIVolumeClaim{
				{AllocID: allocA, NodeID: nodeA, JobID: "web", Mode: api.CSIVolumeClaimWrite, Step: api.CSIClaimTaken, CreateTime: now.Add(-time.Hour).UnixNano()},
				{AllocID: allocA2, NodeID: nodeA, JobID: "web", Mode: api.CSIVolumeClaimWrite, Step: api.CSIClaimNodeDetached, Attempts: 3,
					LastError: "controller unpublish: rpc error: code = Unavailable", NextRetry: now.Add(30 * time.Second).UnixNano(),
					CreateTime: now.Add(-2 * time.Hour).UnixNano(),
					History: []api.CSIClaimTransition{
						{To: api.CSIClaimReserved, Time: now.Add(-2 * time.Hour).UnixNano(), Index: 10},
						{From: api.CSIClaimReserved, To: api.CSIClaimTaken, Time: now.Add(-2 * time.Hour).UnixNano(), Index: 11},
						{From: api.CSIClaimTaken, To: api.CSIClaimNodeDetached, Time: now.Add(-time.Minute).UnixNano(), Index: 20},
						{From: api.CSIClaimNodeDetached, To: api.CSIClaimNodeDetached, Time: now.Add(-time.Second).UnixNano(), Index: 23,
							Error: "controller unpublish: rpc error: code = Unavailable", Attempts: 3},
					}},
			},
			PastClaims: []*api.CSIVolumeClaim{
				{AllocID: "0dd0dd00-0000-4000-8000-000000000007", NodeID: nodeB, Mode: api.CSIVolumeClaimRead, Step: api.CSIClaimFreed,
					ReleaseReason: "detach -force", ModifyTime: now.Add(-3 * time.Hour).UnixNano()},
			},
		}
		f.volumes["data-2"] = &api.CSIVolume{ID: "data-2", Name: "data-2", Namespace: "default", PluginID: "hostpath"}
		f.volumes["logs"] = &api.CSIVolume{ID: "logs", Name: "logs", Namespace: "default", PluginID: "host-b"}

		f.plugins["hostpath"] = &api.CSIPlugin{
			ID: "hostpath", Provider: "hostpath.berth.io", Version: "0.1.0",
			ControllersHealthy: 1, ControllersExpected: 1, NodesHealthy: 0, NodesExpected: 1,
			Controllers: map[string]*api.CSIInfo{nodeB: {PluginID: "hostpath", AllocID: allocC, Healthy: true, HealthDescription: "healthy",
				ControllerInfo: &api.CSIControllerInfo{SupportsCreateDelete: true, SupportsGetCapacity: true},
				Capacity: &api.CSICapacity{AvailableBytes: 3 << 30, MaximumVolumeSize: 1 << 30,
					Topology: &api.CSITopology{Segments: map[string]string{"rack": "r1"}}}}},
			Nodes: map[string]*api.CSIInfo{nodeA: {PluginID: "hostpath", AllocID: allocA, Healthy: false,
				HealthDescription: "plugins unavailable: not root", NodeInfo: &api.CSINodeInfo{RequiresNodeStageVolume: true}}},
			Allocations: []*api.AllocationListStub{a.Stub()},
		}
		f.plugins["host-b"] = &api.CSIPlugin{ID: "host-b", Provider: "b.example.com"}
	})
}
