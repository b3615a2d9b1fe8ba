package command

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/api"
)

const webJobHCL = `job "web" {
  group "g" {
    volume "data" {
      type            = "csi"
      source          = "data"
      access_mode     = "single-node-writer"
      attachment_mode = "file-system"
    }
    task "web" {
      driver = "exec"
      config {
        command = "/bin/sleep"
        args    = ["1000"]
      }
      volume_mount {
        volume      = "data"
        destination = "/srv/data"
      }
    }
  }
}
`

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	must.NoError(t, os.WriteFile(p, []byte(content), 0o600))
	return p
}

// evalOf returns the only evaluation in the fake.
func (f *fakeAPI) evalOf() *api.Evaluation {
	for _, e := range f.evals {
		return e
	}
	f.t.Fatal("no evaluation")
	return nil
}

func TestJobRun_FollowsEvalAndAllocToRunning(t *testing.T) {
	f := newFakeAPI(t)
	f.script(
		// The scheduler places one alloc and completes the eval.
		func(f *fakeAPI) {
			e := f.evalOf()
			e.Status = api.EvalStatusComplete
			f.allocs[allocA] = testAlloc(allocA, "web", e.ID, nodeA, api.AllocClientStatusPending)
		},
		// The client starts it.
		func(f *fakeAPI) {
			a := f.allocs[allocA]
			a.ClientStatus = api.AllocClientStatusRunning
			a.TaskStates["web"] = &api.TaskState{State: "running", Events: []*api.TaskEvent{
				{Type: api.TaskReceived}, {Type: api.TaskStarted},
			}}
		},
	)
	path := writeFile(t, "web.hcl", webJobHCL)
	code, out, errOut := f.run("job", "run", path)
	must.Eq(t, 0, code, must.Sprintf("stdout:\n%s\nstderr:\n%s", out, errOut))
	mustOrder(t, out,
		`==> `, `Monitoring evaluation "e0a1b2c3"`,
		`Evaluation triggered by job "web"`,
		`Allocation "5e6f7a8b" created: node "9a0b1c2d", group "g"`,
		`Evaluation status changed: "pending" -> "complete"`,
		`==> `, `Evaluation "e0a1b2c3" finished with status "complete"`,
		`Allocation "5e6f7a8b" status changed: "pending" -> "running"`,
		`==> `, `Job "web": 1 running, 0 failed`,
	)
	// Routine events are not shown without -verbose.
	must.StrNotContains(t, out, "Task received by client")
	// Both waits were blocking queries: the script only advances on them.
	must.GreaterEq(t, 2, f.blocking)

	write, body, _ := f.lastWrite()
	must.StrHasPrefix(t, "PUT /v1/jobs", write)
	var req api.JobRegisterRequest
	must.NoError(t, json.Unmarshal([]byte(body), &req))
	must.Eq(t, "web", *req.Job.ID)
}

func TestJobRun_PlacementFailureShowsCSIReasonAndExits1(t *testing.T) {
	f := newFakeAPI(t)
	f.script(func(f *fakeAPI) {
		e := f.evalOf()
		e.Status = api.EvalStatusComplete
		e.BlockedEval = "b10cced0-0000-4000-8000-000000000009"
		e.FailedTGAllocs = map[string]*api.AllocationMetric{"g": {
			NodesEvaluated: 1, NodesFiltered: 1,
			ConstraintFiltered: map[string]int{"CSI volume data has exhausted its available writer claims": 1},
		}}
	})
	code, out, _ := f.run("job", "run", writeFile(t, "web.hcl", webJobHCL))
	must.Eq(t, 1, code)
	mustOrder(t, out,
		`Evaluation "e0a1b2c3" finished with status "complete" but failed to place all allocations:`,
		`Task Group "g" (failed to place 1 allocation):`,
		`* Constraint "CSI volume data has exhausted its available writer claims": 1 nodes excluded by filter`,
		`Evaluation "b10cced0" waiting for additional capacity to place remainder`,
		`Job "web": 0 running, 0 failed, 1 not placed`,
		`berth job status web`,
	)
}

func TestJobRun_FailedAllocShowsTaskEventAndExits1(t *testing.T) {
	f := newFakeAPI(t)
	f.script(
		func(f *fakeAPI) {
			e := f.evalOf()
			e.Status = api.EvalStatusComplete
			f.allocs[allocA] = testAlloc(allocA, "web", e.ID, nodeA, api.AllocClientStatusPending)
		},
		func(f *fakeAPI) {
			a := f.allocs[allocA]
			a.ClientStatus = api.AllocClientStatusFailed
			a.ClientDescription = "Failed tasks"
			a.TaskStates["web"] = &api.TaskState{State: "dead", Failed: true, Events: []*api.TaskEvent{
				{Type: api.TaskReceived},
				{Type: api.TaskSetupFailure, FailsTask: true, SetupError: `claiming volume "data": plugin "hostpath" has no healthy node instance on node 9a0b1c2d`},
			}}
		},
	)
	code, out, _ := f.run("job", "run", writeFile(t, "web.hcl", webJobHCL))
	must.Eq(t, 1, code)
	mustOrder(t, out,
		`Allocation "5e6f7a8b" task "web": Setup Failure: claiming volume "data": plugin "hostpath" has no healthy node instance`,
		`Allocation "5e6f7a8b" status changed: "pending" -> "failed" (Failed tasks)`,
		`Job "web": 0 running, 1 failed`,
		`See why with 'berth alloc status 5e6f7a8b'`,
	)
}

func TestJobRun_VerboseShowsEveryEventAndFullIDs(t *testing.T) {
	f := newFakeAPI(t)
	f.script(
		func(f *fakeAPI) {
			e := f.evalOf()
			e.Status = api.EvalStatusComplete
			a := testAlloc(allocA, "web", e.ID, nodeA, api.AllocClientStatusRunning)
			a.TaskStates["web"] = &api.TaskState{State: "running", Events: []*api.TaskEvent{{Type: api.TaskStarted}}}
			f.allocs[allocA] = a
		},
	)
	code, out, _ := f.run("job", "run", "-verbose", writeFile(t, "web.hcl", webJobHCL))
	must.Eq(t, 0, code)
	must.StrContains(t, out, `Allocation "`+allocA+`" task "web": Started: Task started by client`)
	must.StrContains(t, out, `Allocation "`+allocA+`" status changed: "pending" -> "running"`)
}

func TestJobRun_TimeoutExits1AndSaysJobIsRegistered(t *testing.T) {
	f := newFakeAPI(t) // no script: the eval stays pending
	code, _, errOut := f.run("job", "run", "-timeout", "200ms", writeFile(t, "web.hcl", webJobHCL))
	must.Eq(t, 1, code)
	must.StrContains(t, errOut, "Timed out after 200ms")
	must.StrContains(t, errOut, "berth job status web")
}

func TestJobRun_Detach(t *testing.T) {
	f := newFakeAPI(t)
	code, out, _ := f.run("job", "run", "-detach", writeFile(t, "web.hcl", webJobHCL))
	must.Eq(t, 0, code)
	must.StrContains(t, out, "Job registration successful")
	must.StrContains(t, out, "Evaluation ID: e0a1b2c3-")
	must.Eq(t, 0, f.blocking)
}

func TestJobRun_BadFileNamesLineAndColumn(t *testing.T) {
	f := newFakeAPI(t)
	path := writeFile(t, "bad.hcl", "job \"web\" {\n  group \"g\" {\n    count = \"many\"\n  }\n}\n")
	code, _, errOut := f.run("job", "run", path)
	must.Eq(t, 1, code)
	must.StrContains(t, errOut, path+":3,")
	write, _, _ := f.lastWrite()
	must.Eq(t, "", write) // nothing registered
}

func TestJobRun_OutputPrintsJSONWithoutRegistering(t *testing.T) {
	f := newFakeAPI(t)
	code, out, _ := f.run("job", "run", "-output", writeFile(t, "web.hcl", webJobHCL))
	must.Eq(t, 0, code)
	var req api.JobRegisterRequest
	mustJSON(t, out, &req)
	must.Eq(t, "web", *req.Job.ID)
	write, _, _ := f.lastWrite()
	must.Eq(t, "", write)
}

func TestJobRun_Usage(t *testing.T) {
	f := newFakeAPI(t)
	code, _, errOut := f.run("job", "run")
	must.Eq(t, 1, code)
	must.StrContains(t, errOut, "Usage: berth job run")
	must.True(t, strings.Contains(errOut, "jobspec file"))
}

func TestJobRun_NothingToChange(t *testing.T) {
	f := newFakeAPI(t)
	f.script(func(f *fakeAPI) { f.evalOf().Status = api.EvalStatusComplete })
	code, out, _ := f.run("job", "run", writeFile(t, "web.hcl", webJobHCL))
	must.Eq(t, 0, code)
	must.StrContains(t, out, `Job "web": the evaluation created or changed no allocations`)
}

func TestJobRun_FollowsNextEvaluation(t *testing.T) {
	f := newFakeAPI(t)
	next := "e0a1b2c3-0000-4000-8000-00000000000a"
	f.script(
		func(f *fakeAPI) {
			e := f.evalOf()
			e.Status, e.NextEval = api.EvalStatusComplete, next
			f.evals[next] = &api.Evaluation{ID: next, JobID: "web", Status: api.EvalStatusPending}
		},
		func(f *fakeAPI) {
			f.evals[next].Status = api.EvalStatusComplete
			f.allocs[allocA] = testAlloc(allocA, "web", next, nodeA, api.AllocClientStatusRunning)
		},
	)
	code, out, errOut := f.run("job", "run", writeFile(t, "web.hcl", webJobHCL))
	must.Eq(t, 0, code, must.Sprintf("stdout:\n%s\nstderr:\n%s", out, errOut))
	mustOrder(t, out, `Monitoring next evaluation "e0a1b2c3"`, `Allocation "5e6f7a8b" created`, `Job "web": 1 running, 0 failed`)
}
