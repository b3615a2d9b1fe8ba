package client

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/client/internal/testlog"
	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/plugins/drivers"
	"github.com/berth-io/berth/plugins/drivers/mock"
	"github.com/berth-io/berth/plugins/drivers/rawexec"
	"github.com/berth-io/berth/testutil"
)

// These tests use the real drivers, so they run on real time and wait on
// conditions with deadlines (testutil.WaitForResult).

func realConfig(t *testing.T, srv RPCer, dataDir string, factory func(stateDir string) map[string]drivers.Driver) *Config {
	return &Config{
		DataDir: dataDir, Node: &structs.Node{Name: "real", Datacenter: "dc1"}, RPC: srv,
		DriverFactory: factory, Logger: testlog.Logger(t), UpdateBatchWindow: 5 * time.Millisecond,
	}
}

func waitStatus(t *testing.T, srv *fakeServer, allocID, status string) *structs.Allocation {
	t.Helper()
	var got *structs.Allocation
	testutil.WaitForResult(t, func() (bool, error) {
		got = srv.alloc(allocID)
		if got.ClientStatus != status {
			return false, fmt.Errorf("alloc client status is %q, want %q", got.ClientStatus, status)
		}
		return true, nil
	})
	return got
}

// TestClient_RestartReattachesToRawExecProcess: a real process keeps its
// pid across a client restart, its output keeps landing in its log, and
// the new client reports how it later exits.
func TestClient_RestartReattachesToRawExecProcess(t *testing.T) {
	srv := newFakeServer(time.Hour)
	dataDir := t.TempDir()
	factory := func(stateDir string) map[string]drivers.Driver {
		return map[string]drivers.Driver{rawexec.Name: rawexec.New(hclog.NewNullLogger(), rawexec.Config{StateDir: stateDir})}
	}
	c1 := newTestClient(t, realConfig(t, srv, dataDir, factory))
	defer c1.Shutdown()

	// The task prints its pid once, then waits for a file holding its exit
	// code (polling inside the task; the test waits on conditions).
	a := testAlloc(c1.NodeID(), structs.JobTypeBatch, &structs.Task{Name: "sh", KillTimeout: time.Second,
		Config: map[string]any{"command": "/bin/sh", "args": []any{"-c",
			`echo "pid $$"; while [ ! -f "$NOMAD_TASK_DIR/exit" ]; do sleep 0.05; done; exit "$(cat "$NOMAD_TASK_DIR/exit")"`}}})
	a.Job.TaskGroups[0].Tasks[0].Driver = rawexec.Name
	testutil.WaitForResult(t, func() (bool, error) { return srv.lastRegistered() != nil, nil })
	srv.placeAlloc(a)
	waitStatus(t, srv, a.ID, structs.AllocClientStatusRunning)

	pid := 0
	t.Cleanup(func() {
		if pid > 0 {
			syscall.Kill(pid, syscall.SIGKILL) // only if the test failed midway
		}
	})
	testutil.WaitForResult(t, func() (bool, error) {
		out := readLog(t, c1, a.ID, "sh")
		rest, ok := strings.CutPrefix(out, "pid ")
		if !ok {
			return false, fmt.Errorf("stdout so far: %q", out)
		}
		var err error
		pid, err = strconv.Atoi(strings.TrimSpace(rest))
		return err == nil, err
	})

	must.NoError(t, c1.Shutdown())
	must.NoError(t, syscall.Kill(pid, 0), must.Sprint("the task outlives the client"))

	c2 := newTestClient(t, realConfig(t, srv, dataDir, factory))
	defer c2.Shutdown()
	must.Eq(t, c1.NodeID(), c2.NodeID())
	testutil.WaitForResult(t, func() (bool, error) {
		al, err := c2.Alloc(a.ID)
		if err != nil {
			return false, err
		}
		return al.TaskStates["sh"].State == structs.TaskStateRunning, nil
	})
	must.Eq(t, "pid "+strconv.Itoa(pid)+"\n", readLog(t, c2, a.ID, "sh"), must.Sprint("not started again"))
	must.NoError(t, syscall.Kill(pid, 0))

	taskDir := filepath.Join(dataDir, "alloc", a.ID, "sh", "local")
	must.NoError(t, os.WriteFile(filepath.Join(taskDir, "exit.tmp"), []byte("3"), 0o644))
	must.NoError(t, os.Rename(filepath.Join(taskDir, "exit.tmp"), filepath.Join(taskDir, "exit")))
	got := waitStatus(t, srv, a.ID, structs.AllocClientStatusFailed)
	var exit *structs.TaskEvent
	for _, e := range got.TaskStates["sh"].Events {
		if e.Type == "Terminated" {
			exit = e
		}
	}
	must.NotNil(t, exit)
	must.Eq(t, 3, exit.ExitCode)
	must.NoError(t, c2.Shutdown())
}

func readLog(t *testing.T, c *Client, allocID, task string) string {
	t.Helper()
	r, err := c.AllocLogs(allocID, task, "stdout")
	must.NoError(t, err)
	defer r.Close()
	b, err := io.ReadAll(r)
	must.NoError(t, err)
	return string(b)
}

// TestClient_RestartReattachesWithTheMockDriver does the same with the
// drivers package's mock, whose tasks are shared across driver instances.
func TestClient_RestartReattachesWithTheMockDriver(t *testing.T) {
	srv := newFakeServer(time.Hour)
	dataDir := t.TempDir()
	factory := func(string) map[string]drivers.Driver {
		return map[string]drivers.Driver{mock.Name: mock.New(hclog.NewNullLogger(), mock.Config{})}
	}
	c1 := newTestClient(t, realConfig(t, srv, dataDir, factory))
	defer c1.Shutdown()
	a := testAlloc(c1.NodeID(), structs.JobTypeBatch, &structs.Task{Name: "m", Config: map[string]any{"stdout_string": "once\n"}})
	testutil.WaitForResult(t, func() (bool, error) { return srv.lastRegistered() != nil, nil })
	srv.placeAlloc(a)
	waitStatus(t, srv, a.ID, structs.AllocClientStatusRunning)
	must.NoError(t, c1.Shutdown())

	c2 := newTestClient(t, realConfig(t, srv, dataDir, factory))
	defer c2.Shutdown()
	testutil.WaitForResult(t, func() (bool, error) {
		al, err := c2.Alloc(a.ID)
		if err != nil {
			return false, err
		}
		return al.TaskStates["m"].State == structs.TaskStateRunning, nil
	})
	must.Eq(t, "once\n", readLog(t, c2, a.ID, "m"), must.Sprint("re-attached, not started again"))
	must.NoError(t, mock.ExitTask(a.ID+"/m", 0))
	got := waitStatus(t, srv, a.ID, structs.AllocClientStatusComplete)
	testutil.WaitForResult(t, func() (bool, error) { return srv.alloc(a.ID).TasksExited, nil })
	must.False(t, got.TaskStates["m"].Failed)
	must.NoError(t, c2.Shutdown())
}
