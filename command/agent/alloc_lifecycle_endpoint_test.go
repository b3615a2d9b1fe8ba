package agent

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/api"
	"github.com/berth-io/berth/plugins/drivers"
	"github.com/berth-io/berth/plugins/drivers/mock"
	"github.com/berth-io/berth/testutil"
)

// TestHTTP_AllocLifecycle drives alloc signal, restart and stop on a dev
// agent running a mock task: signal and restart reach the task through
// the servers and the client's node session, and stop has the scheduler
// place a replacement.
func TestHTTP_AllocLifecycle(t *testing.T) {
	cfg := DevConfig()
	cfg.Ports = &Ports{HTTP: intPtr(0), RPC: intPtr(0)}
	cfg.LogLevel = "OFF"
	var drv *mock.Driver
	cfg.ExtraDrivers = func(logger hclog.Logger, _ string) map[string]drivers.Driver {
		drv = mock.New(logger, mock.Config{})
		return map[string]drivers.Driver{mock.Name: drv}
	}
	a, err := NewAgent(cfg, io.Discard)
	must.NoError(t, err)
	t.Cleanup(func() { a.Shutdown() })
	job := &api.Job{
		ID: ptr("sleeper"),
		TaskGroups: []*api.TaskGroup{{
			Name:  ptr("g"),
			Tasks: []*api.Task{{Name: "p", Driver: "mock"}},
		}},
	}
	resp, body := do(t, a, http.MethodPut, "/v1/jobs", api.JobRegisterRequest{Job: job})
	must.Eq(t, http.StatusOK, resp.StatusCode, must.Sprint(body))
	running := func(not string) *api.Allocation {
		var out *api.Allocation
		testutil.WaitForResult(t, func() (bool, error) {
			allocs, _ := decode[[]*api.AllocationListStub](t, a, http.MethodGet, "/v1/job/sleeper/allocations", nil)
			for _, s := range allocs {
				if s.ID != not && s.ClientStatus == "running" && s.DesiredStatus == "run" {
					out, _ = decode[*api.Allocation](t, a, http.MethodGet, "/v1/allocation/"+s.ID, nil)
					return true, nil
				}
			}
			return false, fmt.Errorf("no running alloc besides %q among %d", not, len(allocs))
		})
		return out
	}
	alloc := running("")
	path := "/v1/client/allocation/" + alloc.ID

	// Signal: the driver gets it, the task keeps running, an event says so.
	resp, body = do(t, a, http.MethodPut, path+"/signal", map[string]string{"Task": "p", "Signal": "SIGHUP"})
	must.Eq(t, http.StatusOK, resp.StatusCode, must.Sprint(body))
	must.Eq(t, []string{"SIGHUP"}, drv.Signals(alloc.ID+"/p"))
	testutil.WaitForResult(t, func() (bool, error) {
		got, _ := decode[*api.Allocation](t, a, http.MethodGet, "/v1/allocation/"+alloc.ID, nil)
		evs := got.TaskStates["p"].Events
		ok := slices.ContainsFunc(evs, func(e *api.TaskEvent) bool { return e.Type == "Signaling" })
		return ok, fmt.Errorf("no Signaling event in %d events", len(evs))
	})

	cases := []struct {
		name, path string
		body       any
		code       int
		msg        string
	}{
		{"unknown signal", path + "/signal", map[string]string{"Task": "p", "Signal": "SIGNOPE"}, 400, `unknown signal "SIGNOPE"`},
		{"unknown task", path + "/signal", map[string]string{"Task": "q", "Signal": "SIGHUP"}, 404, `no task "q"`},
		{"unknown alloc", "/v1/client/allocation/00000000-0000-0000-0000-000000000000/restart", nil, 404, "not found"},
		{"prefix is not an ID", "/v1/allocation/" + alloc.ID[:8] + "/stop", nil, 404, "not found"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := do(t, a, http.MethodPut, tc.path, tc.body)
			must.Eq(t, tc.code, resp.StatusCode, must.Sprint(body))
			must.StrContains(t, body, tc.msg)
		})
	}

	// Restart: the task runs again, one restart on its record.
	resp, body = do(t, a, http.MethodPut, path+"/restart", map[string]string{"TaskName": "p"})
	must.Eq(t, http.StatusOK, resp.StatusCode, must.Sprint(body))
	testutil.WaitForResult(t, func() (bool, error) {
		got, _ := decode[*api.Allocation](t, a, http.MethodGet, "/v1/allocation/"+alloc.ID, nil)
		ts := got.TaskStates["p"]
		return ts.Restarts == 1 && ts.State == "running", fmt.Errorf("task %s after %d restarts", ts.State, ts.Restarts)
	})

	// Stop: a new eval, the alloc stopped, a replacement running.
	stop, resp := decode[allocStopReply](t, a, http.MethodPut, "/v1/allocation/"+alloc.ID+"/stop", nil)
	must.Eq(t, http.StatusOK, resp.StatusCode)
	must.NotEq(t, "", stop.EvalID)
	repl := running(alloc.ID)
	must.NotEq(t, alloc.ID, repl.ID)
	old, _ := decode[*api.Allocation](t, a, http.MethodGet, "/v1/allocation/"+alloc.ID, nil)
	must.Eq(t, "stop", old.DesiredStatus)
	// Each names the other, as a drain's or a reschedule's replacement.
	must.Eq(t, repl.ID, old.NextAllocation)
	full, _ := decode[*api.Allocation](t, a, http.MethodGet, "/v1/allocation/"+repl.ID, nil)
	must.Eq(t, alloc.ID, full.PreviousAllocation)

	// A stopped alloc cannot be stopped, restarted or signalled again.
	resp, body = do(t, a, http.MethodPut, "/v1/allocation/"+alloc.ID+"/stop", nil)
	must.Eq(t, http.StatusConflict, resp.StatusCode, must.Sprint(body))
	resp, body = do(t, a, http.MethodPut, path+"/signal", map[string]string{"Signal": "SIGHUP"})
	must.Eq(t, http.StatusConflict, resp.StatusCode, must.Sprint(body))
}
