package agent

import (
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/api"
)

// sparseJob is a job as Nomad's client sends it: pointers left nil, no
// defaults filled in.
func sparseJob(id string) *api.Job {
	return &api.Job{
		ID: &id,
		TaskGroups: []*api.TaskGroup{{
			Name: ptr("db"),
			Volumes: map[string]*api.VolumeRequest{"data": {
				Type: "csi", Source: "data", AccessMode: "single-node-writer", AttachmentMode: "file-system",
			}},
			Tasks: []*api.Task{{
				Name: "db", Driver: "raw_exec", Config: map[string]any{"command": "/bin/sleep", "args": []string{"60"}},
				VolumeMounts: []*api.VolumeMount{{Volume: ptr("data"), Destination: ptr("/data")}},
			}},
		}},
	}
}

func TestHTTP_JobLifecycle(t *testing.T) {
	a := newDevAgent(t)

	reply, resp := decode[jobRegisterReply](t, a, http.MethodPut, "/v1/jobs", api.JobRegisterRequest{Job: sparseJob("db")})
	must.NotEq(t, "", reply.EvalID)
	must.Eq(t, reply.Index, index(t, resp))
	must.Eq(t, reply.Index, reply.EvalCreateIndex)
	must.StrContains(t, reply.Warnings, `CSI volume "data" is not registered`)

	// Nomad's defaults were filled in by the server.
	job, resp := decode[api.Job](t, a, http.MethodGet, "/v1/job/db", nil)
	must.Eq(t, "default", *job.Namespace)
	must.Eq(t, "service", *job.Type)
	must.Eq(t, 50, *job.Priority)
	must.Eq(t, []string{"*"}, job.Datacenters)
	must.Eq(t, "global", *job.Region)
	must.Eq(t, 1, *job.TaskGroups[0].Count)
	must.Eq(t, 2, *job.TaskGroups[0].RestartPolicy.Attempts)
	must.Eq(t, 5*time.Second, *job.TaskGroups[0].Tasks[0].KillTimeout)
	must.Eq(t, 300, *job.TaskGroups[0].Tasks[0].Resources.MemoryMB)
	must.Eq(t, "data", job.TaskGroups[0].Volumes["data"].Name)
	must.Eq(t, "/data", *job.TaskGroups[0].Tasks[0].VolumeMounts[0].Destination)
	must.Positive(t, *job.SubmitTime)
	must.Eq(t, *job.ModifyIndex, index(t, resp))

	stubs, _ := decode[[]*api.JobListStub](t, a, http.MethodGet, "/v1/jobs", nil)
	must.SliceLen(t, 1, stubs)
	must.Eq(t, "db", stubs[0].ID)
	// The leader's scheduler may add a blocked eval (no nodes here).
	evals, _ := decode[[]*api.Evaluation](t, a, http.MethodGet, "/v1/job/db/evaluations", nil)
	var registered *api.Evaluation
	for _, e := range evals {
		if e.ID == reply.EvalID {
			registered = e
		}
	}
	must.NotNil(t, registered)
	must.Eq(t, "job-register", registered.TriggeredBy)
	allocs, _ := decode[[]*api.AllocationListStub](t, a, http.MethodGet, "/v1/job/db/allocations", nil)
	must.SliceEmpty(t, allocs)

	eval, _ := decode[api.Evaluation](t, a, http.MethodGet, "/v1/evaluation/"+reply.EvalID, nil)
	must.Eq(t, reply.EvalID, eval.ID)
	// The filter keeps exactly the matching evals. How many there are
	// depends on the scheduler's timing (the agent's own node registering
	// can unblock the job's blocked eval into a new one), so check the
	// filter's semantics rather than a count.
	list, _ := decode[[]*api.Evaluation](t, a, http.MethodGet, "/v1/evaluations?filter="+url.QueryEscape(`JobID == "db" and Status != "blocked"`), nil)
	must.SliceNotEmpty(t, list)
	ids := []string{}
	for _, e := range list {
		must.Eq(t, "db", e.JobID)
		must.NotEq(t, "blocked", e.Status)
		ids = append(ids, e.ID)
	}
	must.SliceContains(t, ids, reply.EvalID)

	// Stop, then purge.
	dereg, _ := decode[jobDeregisterReply](t, a, http.MethodDelete, "/v1/job/db", nil)
	must.NotEq(t, "", dereg.EvalID)
	job, _ = decode[api.Job](t, a, http.MethodGet, "/v1/job/db", nil)
	must.True(t, *job.Stop)
	decode[jobDeregisterReply](t, a, http.MethodDelete, "/v1/job/db?purge=true", nil)
	resp, body := do(t, a, http.MethodGet, "/v1/job/db", nil)
	must.Eq(t, http.StatusNotFound, resp.StatusCode)
	must.Eq(t, "job not found", body)
}

func TestHTTP_JobNamespaceFromQuery(t *testing.T) {
	a := newDevAgent(t)
	decode[jobRegisterReply](t, a, http.MethodPut, "/v1/jobs?namespace=prod", api.JobRegisterRequest{Job: sparseJob("db")})
	job, _ := decode[api.Job](t, a, http.MethodGet, "/v1/job/db?namespace=prod", nil)
	must.Eq(t, "prod", *job.Namespace)
	resp, _ := do(t, a, http.MethodGet, "/v1/job/db", nil)
	must.Eq(t, http.StatusNotFound, resp.StatusCode)
	all, _ := decode[[]*api.JobListStub](t, a, http.MethodGet, "/v1/jobs?namespace=*", nil)
	must.SliceLen(t, 1, all)
}

func TestHTTP_JobStatusCodes(t *testing.T) {
	a := newDevAgent(t)
	decode[jobRegisterReply](t, a, http.MethodPut, "/v1/jobs", api.JobRegisterRequest{Job: sparseJob("api")})
	decode[jobRegisterReply](t, a, http.MethodPost, "/v1/job/api-gw", api.JobRegisterRequest{Job: sparseJob("api-gw")})

	badJob := sparseJob("bad")
	badJob.Type = ptr("cron")
	badJob.TaskGroups[0].Tasks[0].Driver = ""
	cases := []struct {
		name, method, path string
		body               any
		code               int
		want               string
	}{
		{"exact", "GET", "/v1/job/api-gw", nil, 200, `"ID":"api-gw"`},
		{"a prefix names nothing", "GET", "/v1/job/api-", nil, 404, "job not found"},
		{"unknown", "GET", "/v1/job/nope", nil, 404, "job not found"},
		{"invalid job", "PUT", "/v1/jobs", api.JobRegisterRequest{Job: badJob}, 400, `invalid job type "cron"`},
		{"invalid job names every problem", "PUT", "/v1/jobs", api.JobRegisterRequest{Job: badJob}, 400, "missing driver"},
		{"no job", "PUT", "/v1/jobs", map[string]any{}, 400, "request body has no job"},
		{"enforce index", "PUT", "/v1/jobs", api.JobRegisterRequest{Job: sparseJob("x"), EnforceIndex: true}, 400, "EnforceIndex"},
		{"path and body disagree", "PUT", "/v1/job/other", api.JobRegisterRequest{Job: sparseJob("api")}, 400, "does not match"},
		{"deregister unknown", "DELETE", "/v1/job/nope", nil, 404, `job "nope" not found`},
		{"bad purge", "DELETE", "/v1/job/api?purge=please", nil, 400, "invalid purge"},
		{"list method", "DELETE", "/v1/jobs", nil, 405, "not allowed"},
		{"job method", "PATCH", "/v1/job/api", nil, 405, "not allowed"},
		{"allocations method", "PUT", "/v1/job/api/allocations", nil, 405, "not allowed"},
		{"unknown subpath", "GET", "/v1/job/api/scale", nil, 404, "no such endpoint"},
		{"unknown alloc", "GET", "/v1/allocation/nope", nil, 404, "alloc not found"},
		{"unknown eval", "GET", "/v1/evaluation/nope", nil, 404, "eval not found"},
		{"alloc list method", "PUT", "/v1/allocations", nil, 405, "not allowed"},
		{"bad per_page", "GET", "/v1/jobs?per_page=-1", nil, 400, "invalid per_page"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := do(t, a, tc.method, tc.path, tc.body)
			must.Eq(t, tc.code, resp.StatusCode, must.Sprint(body))
			must.StrContains(t, body, tc.want)
		})
	}
}

func TestHTTP_JobGetBlocksUntilTheJobChanges(t *testing.T) {
	a := newDevAgent(t)
	first, _ := decode[jobRegisterReply](t, a, http.MethodPut, "/v1/jobs", api.JobRegisterRequest{Job: sparseJob("db")})
	done := make(chan *http.Response, 1)
	go func() {
		resp, err := http.Get(fmt.Sprintf("http://%s/v1/job/db?index=%d&wait=20s", a.HTTPAddr(), first.Index))
		if err != nil {
			t.Error(err)
			done <- nil
			return
		}
		resp.Body.Close()
		done <- resp
	}()
	j := sparseJob("db")
	j.Meta = map[string]string{"version": "2"}
	second, _ := decode[jobRegisterReply](t, a, http.MethodPut, "/v1/jobs", api.JobRegisterRequest{Job: j})
	select {
	case resp := <-done:
		must.NotNil(t, resp)
		must.Eq(t, second.Index, index(t, resp))
	case <-time.After(15 * time.Second):
		t.Fatal("blocking job read did not return after the job changed")
	}
}

func TestHTTP_JobPlan(t *testing.T) {
	a := newDevAgent(t)
	registerPluginNode(t, a, 1, "hostpath", false)

	// The job's volume is not registered yet: nothing can be placed.
	plan, resp := decode[map[string]any](t, a, http.MethodPut, "/v1/job/db/plan", map[string]any{"Job": sparseJob("db"), "Diff": true})
	must.Positive(t, index(t, resp))
	must.MapContainsKey(t, plan, "Diff")
	must.MapContainsKey(t, plan["FailedTGAllocs"].(map[string]any), "db")
	must.SliceLen(t, 1, plan["CreatedEvals"].([]any))

	registerVolume(t, a, apiVolume("data", "hostpath"))
	reply, _ := decode[jobPlanReply](t, a, http.MethodPost, "/v1/job/db/plan", map[string]any{"Job": sparseJob("db")})
	must.Eq(t, uint64(1), reply.Annotations.DesiredTGUpdates["db"].Place)
	must.MapEmpty(t, reply.FailedTGAllocs)
	must.Eq(t, uint64(0), reply.JobModifyIndex)
	resp, _ = do(t, a, http.MethodGet, "/v1/job/db", nil)
	must.Eq(t, http.StatusNotFound, resp.StatusCode, must.Sprint("a plan registers nothing"))

	resp, body := do(t, a, http.MethodPut, "/v1/job/other/plan", map[string]any{"Job": sparseJob("db")})
	must.Eq(t, http.StatusBadRequest, resp.StatusCode)
	must.StrContains(t, body, "does not match")
	resp, _ = do(t, a, http.MethodGet, "/v1/job/db/plan", nil)
	must.Eq(t, http.StatusMethodNotAllowed, resp.StatusCode)
}

// TestHTTP_JobVersionsAndRevert: /versions lists the kept versions newest
// first, ?diffs=true adds the change from each to the next, and /revert
// registers an old spec again as a new version.
func TestHTTP_JobVersionsAndRevert(t *testing.T) {
	a := newDevAgent(t)
	decode[jobRegisterReply](t, a, http.MethodPut, "/v1/jobs", api.JobRegisterRequest{Job: sparseJob("db")})
	bigger := sparseJob("db")
	bigger.TaskGroups[0].Volumes["data"].AccessMode = "multi-node-multi-writer"
	bigger.TaskGroups[0].Count = ptr(3)
	decode[jobRegisterReply](t, a, http.MethodPut, "/v1/jobs", api.JobRegisterRequest{Job: bigger})

	plain, resp := decode[api.JobVersionsResponse](t, a, http.MethodGet, "/v1/job/db/versions", nil)
	must.SliceLen(t, 2, plain.Versions)
	must.Eq(t, 1, *plain.Versions[0].Version)
	must.Eq(t, 0, *plain.Versions[1].Version)
	must.Nil(t, plain.Diffs)
	must.Positive(t, index(t, resp))

	withDiffs, _ := decode[api.JobVersionsResponse](t, a, http.MethodGet, "/v1/job/db/versions?diffs=true", nil)
	must.SliceLen(t, 1, withDiffs.Diffs)
	d := withDiffs.Diffs[0]
	must.Eq(t, api.DiffTypeEdited, d.Type)
	must.Eq(t, "db", d.ID)
	must.SliceLen(t, 1, d.TaskGroups)
	var count *api.FieldDiff
	for _, f := range d.TaskGroups[0].Fields {
		if f.Name == "Count" {
			count = f
		}
	}
	must.NotNil(t, count)
	must.Eq(t, api.FieldDiff{Type: api.DiffTypeEdited, Name: "Count", Old: "1", New: "3"}, *count)
	// The job's own fields are shown for context, unchanged; the ones the
	// servers set (Version, SubmitTime, indexes) are not shown at all.
	for _, f := range d.Fields {
		must.Eq(t, api.DiffTypeNone, f.Type, must.Sprint(f.Name))
		must.SliceNotContains(t, []string{"Version", "SubmitTime", "JobModifyIndex", "Status"}, f.Name)
	}

	rev, resp := decode[jobRegisterReply](t, a, http.MethodPut, "/v1/job/db/revert", api.JobRevertRequest{JobID: "db", JobVersion: 0})
	must.NotEq(t, "", rev.EvalID)
	must.Eq(t, rev.Index, index(t, resp))
	job, _ := decode[api.Job](t, a, http.MethodGet, "/v1/job/db", nil)
	must.Eq(t, 2, *job.Version)
	must.Eq(t, 1, *job.TaskGroups[0].Count)

	st, resp := decode[jobStabilityReply](t, a, http.MethodPut, "/v1/job/db/stable", api.JobStabilityRequest{JobVersion: 1, Stable: true})
	must.Eq(t, st.Index, index(t, resp))
	must.Eq(t, st.Index, st.JobModifyIndex)
	after, _ := decode[api.JobVersionsResponse](t, a, http.MethodGet, "/v1/job/db/versions", nil)
	must.Eq(t, []bool{false, true, false}, []bool{*after.Versions[0].Stable, *after.Versions[1].Stable, *after.Versions[2].Stable})

	prior := uint64(1)
	cases := []struct {
		name, method, path string
		body               any
		code               int
		want               string
	}{
		{"unknown job", "GET", "/v1/job/nope/versions", nil, 404, "job versions not found"},
		{"a prefix names nothing", "GET", "/v1/job/d/versions", nil, 404, "job versions not found"},
		{"bad diffs", "GET", "/v1/job/db/versions?diffs=maybe", nil, 400, "invalid diffs"},
		{"diff_version", "GET", "/v1/job/db/versions?diff_version=0", nil, 400, "diff_version is not supported"},
		{"versions method", "PUT", "/v1/job/db/versions", nil, 405, "not allowed"},
		{"revert method", "GET", "/v1/job/db/revert", nil, 405, "not allowed"},
		{"revert to current", "PUT", "/v1/job/db/revert", api.JobRevertRequest{JobVersion: 2}, 400, "already at version 2"},
		{"revert to unknown", "PUT", "/v1/job/db/revert", api.JobRevertRequest{JobVersion: 9}, 404, "no version 9 kept"},
		{"revert enforce prior", "PUT", "/v1/job/db/revert", api.JobRevertRequest{JobVersion: 0, EnforcePriorVersion: &prior}, 409, "at version 2, not 1"},
		{"revert body and path disagree", "PUT", "/v1/job/db/revert", api.JobRevertRequest{JobID: "other"}, 400, "does not match"},
		{"revert unknown job", "PUT", "/v1/job/nope/revert", api.JobRevertRequest{}, 404, `job "nope" not found`},
		{"stable unknown version", "PUT", "/v1/job/db/stable", api.JobStabilityRequest{JobVersion: 9, Stable: true}, 404, "no version 9 kept"},
		{"stable method", "GET", "/v1/job/db/stable", nil, 405, "not allowed"},
		{"stable body and path disagree", "PUT", "/v1/job/db/stable", api.JobStabilityRequest{JobID: "other"}, 400, "does not match"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := do(t, a, tc.method, tc.path, tc.body)
			must.Eq(t, tc.code, resp.StatusCode, must.Sprint(body))
			must.StrContains(t, body, tc.want)
		})
	}
}
