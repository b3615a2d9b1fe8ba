package agent

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/api"
	"github.com/berth-io/berth/client"
	"github.com/berth-io/berth/client/logs"
	"github.com/berth-io/berth/plugins/drivers"
	"github.com/berth-io/berth/plugins/drivers/mock"
	"github.com/berth-io/berth/testutil"
)

// fakeLogs serves logs of alloc "a1b2c3", task "web", from dir.
type fakeLogs struct{ dir string }

func (f fakeLogs) AllocLogs(allocID, task, logType string) (*logs.Reader, error) {
	if allocID != "a1b2c3" {
		return nil, fmt.Errorf("alloc %s: %w", allocID, client.ErrUnknownAlloc)
	}
	if task != "web" {
		return nil, fmt.Errorf("task %s: %w", task, client.ErrUnknownTask)
	}
	return logs.Open(f.dir, task, logType)
}

func (fakeLogs) AllocIDs() []string { return []string{"a1b2c3", "ffff00"} }
func (fakeLogs) NodeID() string     { return "node-1" }

func serveLogs(t *testing.T, src logSource, target string) *httptest.ResponseRecorder {
	t.Helper()
	s := &HTTPServer{agent: &Agent{config: DevConfig()}, logger: hclog.NewNullLogger()}
	r := httptest.NewRequest(http.MethodGet, target, nil)
	w := httptest.NewRecorder()
	h := s.wrap(func(w http.ResponseWriter, r *http.Request) (any, error) {
		req, err := parseLogsRequest(r)
		if err != nil {
			return nil, err
		}
		return nil, s.serveAllocLogs(w, r, src, req)
	})
	h(w, r)
	return w
}

func TestClientFSLogs(t *testing.T) {
	dir := t.TempDir()
	must.NoError(t, os.WriteFile(logs.Path(dir, "web", logs.Stdout, 1), []byte("old\n"), 0o644))
	must.NoError(t, os.WriteFile(logs.Path(dir, "web", logs.Stdout, 0), []byte("new\n"), 0o644))
	src := fakeLogs{dir: dir}

	cases := []struct {
		name   string
		target string
		code   int
		body   string
	}{
		{"plain, across rotated files", "/v1/client/fs/logs/a1b2c3?task=web&type=stdout&plain=true", 200, "old\nnew\n"},
		{"unique prefix", "/v1/client/fs/logs/a1b?task=web&type=stdout&plain=true", 200, "old\nnew\n"},
		{"offset from start", "/v1/client/fs/logs/a1b2c3?task=web&type=stdout&plain=true&offset=2", 200, "d\nnew\n"},
		{"offset from end", "/v1/client/fs/logs/a1b2c3?task=web&type=stdout&plain=true&origin=end&offset=3", 200, "ew\n"},
		{"empty stream", "/v1/client/fs/logs/a1b2c3?task=web&type=stderr&plain=true", 200, ""},
		{"alloc elsewhere", "/v1/client/fs/logs/zzz?task=web&type=stdout", 400, "alloc zzz is not on this client (node node-1)"},
		{"unknown task", "/v1/client/fs/logs/a1b2c3?task=db&type=stdout", 400, `has no task "db"`},
		{"bad type", "/v1/client/fs/logs/a1b2c3?task=web&type=stdin", 400, `invalid log type "stdin"`},
		{"missing task", "/v1/client/fs/logs/a1b2c3?type=stdout", 400, "missing task name"},
		{"bad origin", "/v1/client/fs/logs/a1b2c3?task=web&type=stdout&origin=middle", 400, `invalid origin "middle"`},
		{"bad offset", "/v1/client/fs/logs/a1b2c3?task=web&type=stdout&offset=-1", 400, `invalid offset "-1"`},
		{"missing alloc", "/v1/client/fs/logs/?task=web&type=stdout", 400, "missing alloc ID"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := serveLogs(t, src, tc.target)
			must.Eq(t, tc.code, w.Code)
			if tc.code == 200 {
				must.Eq(t, tc.body, w.Body.String())
			} else {
				must.StrContains(t, w.Body.String(), tc.body)
			}
		})
	}

	t.Run("framed", func(t *testing.T) {
		w := serveLogs(t, src, "/v1/client/fs/logs/a1b2c3?task=web&type=stdout")
		must.Eq(t, 200, w.Code)
		var got strings.Builder
		dec := json.NewDecoder(w.Body)
		for {
			var f logFrame
			if err := dec.Decode(&f); err == io.EOF {
				break
			} else {
				must.NoError(t, err)
			}
			must.Eq(t, "alloc/logs/web.stdout.0", f.File)
			got.Write(f.Data)
			must.Eq(t, int64(got.Len()), f.Offset)
		}
		must.Eq(t, "old\nnew\n", got.String())
	})
}

// TestHTTP_ClientFSLogsFromADevAgent runs a mock task on a dev agent's own
// client and reads what it printed through the HTTP API.
func TestHTTP_ClientFSLogsFromADevAgent(t *testing.T) {
	cfg := DevConfig() // server and client
	cfg.Ports = &Ports{HTTP: intPtr(0), RPC: intPtr(0)}
	cfg.LogLevel = "OFF"
	cfg.ExtraDrivers = func(logger hclog.Logger, _ string) map[string]drivers.Driver {
		return map[string]drivers.Driver{mock.Name: mock.New(logger, mock.Config{})}
	}
	a, err := NewAgent(cfg, io.Discard)
	must.NoError(t, err)
	t.Cleanup(func() { a.Shutdown() })
	must.NotNil(t, a.client)
	job := &api.Job{
		ID: ptr("printer"),
		TaskGroups: []*api.TaskGroup{{
			Name: ptr("g"),
			Tasks: []*api.Task{{
				Name: "p", Driver: "mock",
				Config: map[string]any{"stdout_string": "hello from the task\n"},
			}},
		}},
	}
	resp, body := do(t, a, http.MethodPut, "/v1/jobs", api.JobRegisterRequest{Job: job})
	must.Eq(t, http.StatusOK, resp.StatusCode, must.Sprint(body))

	var allocID string
	testutil.WaitForResult(t, func() (bool, error) {
		allocs, _ := decode[[]*api.AllocationListStub](t, a, http.MethodGet, "/v1/job/printer/allocations", nil)
		if len(allocs) == 0 || allocs[0].ClientStatus != "running" {
			return false, fmt.Errorf("allocs: %d", len(allocs))
		}
		allocID = allocs[0].ID
		return true, nil
	})
	resp, body = get(t, a, "/v1/client/fs/logs/"+allocID+"?task=p&type=stdout&plain=true")
	must.Eq(t, http.StatusOK, resp.StatusCode, must.Sprint(body))
	must.Eq(t, "hello from the task\n", body)

	resp, body = get(t, a, "/v1/client/fs/logs/"+allocID+"?task=nope&type=stdout&plain=true")
	must.Eq(t, http.StatusBadRequest, resp.StatusCode)
	must.StrContains(t, body, `has no task "nope"`)
}
