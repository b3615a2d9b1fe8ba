package client

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/client/allocrunner"
	"github.com/berth-io/berth/client/internal/fakedriver"
	"github.com/berth-io/berth/client/internal/testlog"
	"github.com/berth-io/berth/client/state"
	"github.com/berth-io/berth/helper"
	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/plugins/drivers"
)

// advance moves the bubble's clock by d and lets everything due run. It is
// how these tests inject time (testing/synctest); it never waits for a
// condition.
func advance(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}

func testConfig(t *testing.T, srv RPCer, host *fakedriver.Host, dataDir string) *Config {
	return &Config{
		DataDir: dataDir,
		Node:    &structs.Node{Name: "node-a", Datacenter: "dc1", Meta: map[string]string{"rack": "r1"}},
		RPC:     srv,
		Drivers: map[string]drivers.Driver{"mock": host.Driver()},
		Logger:  testlog.Logger(t),
		// Deterministic backoff so tests can assert exact retry times.
		RetryBackoff: helper.Backoff{Base: time.Second, Max: 8 * time.Second, NoJitter: true},
	}
}

func newTestClient(t *testing.T, cfg *Config) *Client {
	t.Helper()
	c, err := New(cfg)
	must.NoError(t, err)
	return c
}

func testAlloc(nodeID, jobType string, tasks ...*structs.Task) *structs.Allocation {
	for _, task := range tasks {
		task.Driver = "mock"
	}
	return &structs.Allocation{
		ID: helper.UUID(), Name: "web.g[0]", Namespace: "default", NodeID: nodeID, JobID: "web", TaskGroup: "g",
		DesiredStatus: structs.AllocDesiredStatusRun, ClientStatus: structs.AllocClientStatusPending,
		Job: &structs.Job{ID: "web", Name: "web", Type: jobType, TaskGroups: []*structs.TaskGroup{{
			Name: "g", Tasks: tasks,
			RestartPolicy: &structs.RestartPolicy{Attempts: 0, Interval: time.Hour, Delay: time.Second, Mode: structs.RestartPolicyModeFail},
		}}},
	}
}

func TestHeartbeatInterval(t *testing.T) {
	cases := []struct {
		name string
		ttl  time.Duration
		r    float64
		want time.Duration
	}{
		{"no jitter is half the TTL", 10 * time.Second, 0, 5 * time.Second},
		{"full jitter takes a tenth off", 10 * time.Second, 0.999999, 4*time.Second + 1000*time.Nanosecond},
		{"half jitter", 20 * time.Second, 0.5, 9 * time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			must.Eq(t, tc.want, heartbeatInterval(tc.ttl, tc.r))
		})
	}
	must.Eq(t, 2500*time.Millisecond, heartbeatRetry(30*time.Second, 10*time.Second))
	must.Eq(t, time.Second, heartbeatRetry(time.Second, 10*time.Second))
}

func TestDiffAllocs(t *testing.T) {
	run := &structs.Allocation{ID: "new", DesiredStatus: structs.AllocDesiredStatusRun, AllocModifyIndex: 5}
	stoppedNew := &structs.Allocation{ID: "stopped-new", DesiredStatus: structs.AllocDesiredStatusStop, AllocModifyIndex: 5}
	changed := &structs.Allocation{ID: "changed", DesiredStatus: structs.AllocDesiredStatusStop, AllocModifyIndex: 9}
	same := &structs.Allocation{ID: "same", DesiredStatus: structs.AllocDesiredStatusRun, AllocModifyIndex: 3}
	cases := []struct {
		name   string
		known  map[string]uint64
		pulled []*structs.Allocation
		want   allocDiff
	}{
		{"empty", nil, nil, allocDiff{}},
		{"new alloc is added", nil, []*structs.Allocation{run}, allocDiff{added: []*structs.Allocation{run}}},
		{"new terminal alloc is ignored", nil, []*structs.Allocation{stoppedNew}, allocDiff{}},
		{"higher alloc index updates", map[string]uint64{"changed": 4, "same": 3}, []*structs.Allocation{changed, same},
			allocDiff{updated: []*structs.Allocation{changed}}},
		{"missing alloc is removed", map[string]uint64{"gone": 1, "same": 3}, []*structs.Allocation{same},
			allocDiff{removed: []string{"gone"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			must.Eq(t, tc.want, diffAllocs(tc.known, tc.pulled))
		})
	}
}

func TestClient_RegistersAndHeartbeatsAtServerTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newFakeServer(10 * time.Second)
		host := fakedriver.NewHost()
		c := newTestClient(t, testConfig(t, srv, host, t.TempDir()))
		defer c.Shutdown()
		synctest.Wait()

		n := srv.lastRegistered()
		must.NotNil(t, n)
		must.Eq(t, c.NodeID(), n.ID)
		must.NotEq(t, "", n.SecretID)
		must.Eq(t, "node-a", n.Name)
		must.Eq(t, "r1", n.Meta["rack"])
		must.Eq(t, structs.NodeStatusReady, n.Status)
		must.Eq(t, "linux", n.Attributes["kernel.name"])
		must.Eq(t, "1", n.Attributes["driver.mock"])
		must.MapContainsKey(t, n.Attributes, "unique.hostname")
		must.True(t, n.Drivers["mock"].Healthy)
		must.Positive(t, n.NodeResources.CPU)
		must.Positive(t, n.NodeResources.MemoryMB)

		advance(time.Minute)
		beats := srv.callTimes("Node.UpdateStatus")
		must.Between(t, 13, len(beats), 16)
		must.Eq(t, srv.callTimes("Node.Register")[0], beats[0], must.Sprint("the first heartbeat follows registration at once"))
		for i := 1; i < len(beats); i++ {
			must.Between(t, 4*time.Second, beats[i].Sub(beats[i-1]), 5*time.Second, must.Sprint("every TTL/2, less up to TTL/10 of jitter"))
		}
		must.Len(t, 1, srv.callTimes("Node.Register"))
		must.NoError(t, c.Shutdown())
	})
}

func TestClient_ReregistersWhenServersForgetTheNode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newFakeServer(10 * time.Second)
		c := newTestClient(t, testConfig(t, srv, fakedriver.NewHost(), t.TempDir()))
		defer c.Shutdown()
		synctest.Wait()
		srv.forgetNode(c.NodeID())
		advance(5 * time.Second)
		must.Len(t, 2, srv.callTimes("Node.Register"))
		beats := srv.callTimes("Node.UpdateStatus")
		must.Eq(t, srv.callTimes("Node.Register")[1], beats[len(beats)-1], must.Sprint("a heartbeat right after registering again"))
		must.NoError(t, c.Shutdown())
	})
}

func TestClient_HeartbeatFailuresRetryBeforeTheTTLRunsOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newFakeServer(8 * time.Second)
		c := newTestClient(t, testConfig(t, srv, fakedriver.NewHost(), t.TempDir()))
		defer c.Shutdown()
		synctest.Wait()
		fail := errors.New("connection refused")
		srv.failNext("Node.UpdateStatus", fail, fail, fail, fail)
		advance(20 * time.Second)
		beats := srv.callTimes("Node.UpdateStatus")
		must.Greater(t, 6, len(beats))
		// beats[0] followed registration; beats[1] is the first failure.
		// Retries come 1s, then 2s (the backoff's 2s, 4s, 8s capped at
		// TTL/4) later.
		must.Eq(t, time.Second, beats[2].Sub(beats[1]))
		must.Eq(t, 2*time.Second, beats[3].Sub(beats[2]))
		must.Eq(t, 2*time.Second, beats[4].Sub(beats[3]))
		must.Eq(t, 2*time.Second, beats[5].Sub(beats[4]))
		must.NoError(t, c.Shutdown())
	})
}

func TestClient_AllocWatchBacksOffOnErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newFakeServer(time.Hour)
		fail := structs.ErrNoLeader
		srv.failNext("Node.GetClientAllocs", fail, fail, fail, fail, fail)
		c := newTestClient(t, testConfig(t, srv, fakedriver.NewHost(), t.TempDir()))
		defer c.Shutdown()
		advance(30 * time.Second)
		calls := srv.callTimes("Node.GetClientAllocs")
		var gaps []time.Duration
		for i := 1; i < len(calls); i++ {
			gaps = append(gaps, calls[i].Sub(calls[i-1]))
		}
		// Five failures (1s, 2s, 4s, 8s, 8s apart), then a query that
		// answers at once (index 0) and one that blocks: no tight loop.
		must.Eq(t, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 8 * time.Second, 0}, gaps)
		must.NoError(t, c.Shutdown())
	})
}

func TestClient_AllocWatchNeverSpinsOnANonBlockingServer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newFakeServer(time.Hour)
		srv.noBlock = true
		c := newTestClient(t, testConfig(t, srv, fakedriver.NewHost(), t.TempDir()))
		defer c.Shutdown()
		advance(30 * time.Second)
		// 0s, then backoff 1s, 2s, 4s, 8s, 8s, 8s.
		must.Between(t, 6, len(srv.callTimes("Node.GetClientAllocs")), 7)
	})
}

// TestClient_GCOfTheNewestAllocIsSeen: the real server's alloc query index
// is the highest ModifyIndex of the node's allocs, so it goes down when
// that alloc is garbage collected, and the query only returns at its max
// wait. The client still applies that answer.
func TestClient_GCOfTheNewestAllocIsSeen(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newFakeServer(time.Hour)
		srv.nodeIndex = true
		cfg := testConfig(t, srv, fakedriver.NewHost(), t.TempDir())
		cfg.AllocWatchWait = time.Minute
		c := newTestClient(t, cfg)
		defer c.Shutdown()
		synctest.Wait()
		old := testAlloc(c.NodeID(), structs.JobTypeService, &structs.Task{Name: "t"})
		srv.placeAlloc(old)
		advance(time.Second)
		newest := testAlloc(c.NodeID(), structs.JobTypeBatch, &structs.Task{Name: "t", Config: map[string]any{"run_for": "1s"}})
		srv.placeAlloc(newest)
		advance(2 * time.Second)
		must.Eq(t, structs.AllocClientStatusComplete, srv.alloc(newest.ID).ClientStatus)
		srv.gcAlloc(newest.ID)
		advance(time.Minute)
		must.Eq(t, []string{old.ID}, c.AllocIDs())
		must.NoError(t, c.Shutdown())
	})
}

func TestClient_RunsAllocAndReportsRunningThenComplete(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newFakeServer(time.Hour)
		host := fakedriver.NewHost()
		c := newTestClient(t, testConfig(t, srv, host, t.TempDir()))
		defer c.Shutdown()
		synctest.Wait()

		a := testAlloc(c.NodeID(), structs.JobTypeBatch, &structs.Task{Name: "t", Config: map[string]any{"run_for": "3s"}})
		srv.placeAlloc(a)
		advance(time.Second)
		must.Eq(t, structs.AllocClientStatusRunning, srv.alloc(a.ID).ClientStatus)
		must.Eq(t, []string{a.ID}, c.AllocIDs())

		advance(3 * time.Second)
		got := srv.alloc(a.ID)
		must.Eq(t, structs.AllocClientStatusComplete, got.ClientStatus)
		must.True(t, got.TasksExited)
		must.Eq(t, structs.TaskStateDead, got.TaskStates["t"].State)
		must.Eq(t, []string{structs.AllocClientStatusRunning, structs.AllocClientStatusComplete}, srv.statuses(a.ID))
		must.NoError(t, c.Shutdown())
	})
}

func TestClient_FailingTaskRestartsThenAllocFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newFakeServer(time.Hour)
		host := fakedriver.NewHost()
		c := newTestClient(t, testConfig(t, srv, host, t.TempDir()))
		defer c.Shutdown()
		synctest.Wait()

		a := testAlloc(c.NodeID(), structs.JobTypeService, &structs.Task{Name: "t", Config: map[string]any{"run_for": "1s", "exit_code": 1}})
		a.Job.TaskGroups[0].RestartPolicy = &structs.RestartPolicy{Attempts: 2, Interval: time.Hour, Delay: 5 * time.Second, Mode: structs.RestartPolicyModeFail}
		srv.placeAlloc(a)
		advance(time.Minute)
		got := srv.alloc(a.ID)
		must.Eq(t, structs.AllocClientStatusFailed, got.ClientStatus)
		must.Eq(t, uint64(2), got.TaskStates["t"].Restarts)
		must.Eq(t, 3, host.Starts(a.ID+"/t"))
		must.True(t, got.TasksExited)
		must.NoError(t, c.Shutdown())
	})
}

func TestClient_StopThenGCDestroysAlloc(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newFakeServer(time.Hour)
		host := fakedriver.NewHost()
		dataDir := t.TempDir()
		c := newTestClient(t, testConfig(t, srv, host, dataDir))
		defer c.Shutdown()
		synctest.Wait()

		a := testAlloc(c.NodeID(), structs.JobTypeService, &structs.Task{Name: "t", KillTimeout: 2 * time.Second, Config: map[string]any{"ignore_sigterm": true}})
		srv.placeAlloc(a)
		advance(time.Second)
		must.Eq(t, structs.AllocClientStatusRunning, srv.alloc(a.ID).ClientStatus)
		allocDir := filepath.Join(dataDir, "alloc", a.ID)
		must.DirExists(t, allocDir)

		srv.stopAlloc(a.ID)
		advance(time.Second)
		must.True(t, host.Running(a.ID+"/t"), must.Sprint("within the kill timeout"))
		advance(time.Second)
		must.False(t, host.Running(a.ID+"/t"))
		advance(DefaultUpdateBatchWindow)
		got := srv.alloc(a.ID)
		must.Eq(t, structs.AllocClientStatusComplete, got.ClientStatus)
		must.True(t, got.TasksExited)

		srv.gcAlloc(a.ID)
		synctest.Wait()
		must.Eq(t, []string(nil), c.AllocIDs())
		_, err := os.Stat(allocDir)
		must.True(t, os.IsNotExist(err), must.Sprint("the alloc dir is removed"))
		allocs, err := c.db.GetAllocs()
		must.NoError(t, err)
		must.Len(t, 0, allocs)
		must.NoError(t, c.Shutdown())
	})
}

// TestClient_RestartReattachesToRunningTask: a second client process on the
// same data dir is the same node and re-attaches to the task (same pid)
// instead of starting it again, and reports its later exit.
func TestClient_RestartReattachesToRunningTask(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newFakeServer(time.Hour)
		host := fakedriver.NewHost()
		dataDir := t.TempDir()
		c1 := newTestClient(t, testConfig(t, srv, host, dataDir))
		defer c1.Shutdown()
		synctest.Wait()
		a := testAlloc(c1.NodeID(), structs.JobTypeBatch, &structs.Task{Name: "t"})
		srv.placeAlloc(a)
		advance(time.Second)
		taskID := a.ID + "/t"
		pid := host.PID(taskID)
		must.Positive(t, pid)

		start := time.Now()
		must.NoError(t, c1.Shutdown())
		must.Eq(t, 0, time.Since(start), must.Sprint("shutdown is prompt"))
		must.True(t, host.Running(taskID), must.Sprint("tasks outlive the client"))

		c2 := newTestClient(t, testConfig(t, srv, host, dataDir)) // a new driver instance too
		advance(time.Second)
		must.Eq(t, c1.NodeID(), c2.NodeID())
		must.Eq(t, 1, host.Starts(taskID), must.Sprint("re-attached, not restarted"))
		must.Eq(t, pid, host.PID(taskID))
		must.Eq(t, []string{a.ID}, c2.AllocIDs())

		must.NoError(t, host.Exit(taskID, 0))
		advance(time.Second)
		got := srv.alloc(a.ID)
		must.Eq(t, structs.AllocClientStatusComplete, got.ClientStatus)
		must.True(t, got.TasksExited)
		must.NoError(t, c2.Shutdown())
	})
}

func TestClient_ShutdownIsPromptAndLeavesTasksRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newFakeServer(time.Hour)
		host := fakedriver.NewHost()
		c := newTestClient(t, testConfig(t, srv, host, t.TempDir()))
		defer c.Shutdown()
		synctest.Wait()
		a := testAlloc(c.NodeID(), structs.JobTypeService, &structs.Task{Name: "t", KillTimeout: time.Minute})
		srv.placeAlloc(a)
		advance(time.Second)

		start := time.Now()
		must.NoError(t, c.Shutdown())
		must.Eq(t, 0, time.Since(start))
		must.True(t, host.Running(a.ID+"/t"))
		must.NoError(t, c.Shutdown(), must.Sprint("a second shutdown is a no-op"))
	})
}

// hungHook never returns from Prerun until released, whatever its ctx.
type hungHook struct{ release chan struct{} }

func (*hungHook) Name() string { return "hung" }

func (h *hungHook) Prerun(context.Context) error {
	<-h.release
	return nil
}

func TestClient_ShutdownIsBoundedWithAHungHook(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newFakeServer(time.Hour)
		cfg := testConfig(t, srv, fakedriver.NewHost(), t.TempDir())
		h := &hungHook{release: make(chan struct{})}
		cfg.AllocHooks = []allocrunner.HookFactory{func(*allocrunner.HookConfig) allocrunner.Hook { return h }}
		c := newTestClient(t, cfg)
		defer c.Shutdown()
		synctest.Wait()
		srv.placeAlloc(testAlloc(c.NodeID(), structs.JobTypeService, &structs.Task{Name: "t"}))
		advance(time.Second)

		start := time.Now()
		err := c.Shutdown()
		must.ErrorContains(t, err, "ignores cancellation")
		must.Eq(t, DefaultShutdownTimeout, time.Since(start))
		close(h.release)
	})
}

func TestClient_DevModeShutdownStopsTasksEvenWithAHungDriver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newFakeServer(time.Hour)
		host := fakedriver.NewHost()
		cfg := testConfig(t, srv, host, "")
		cfg.DevMode = true
		c := newTestClient(t, cfg)
		defer c.Shutdown()
		dataDir := c.dataDir
		must.DirExists(t, dataDir)
		synctest.Wait()

		a := testAlloc(c.NodeID(), structs.JobTypeService,
			&structs.Task{Name: "hung", KillTimeout: 2 * time.Second, Config: map[string]any{"stop_hangs": true}},
			&structs.Task{Name: "fine"})
		srv.placeAlloc(a)
		advance(time.Second)
		must.True(t, host.Running(a.ID+"/hung"))

		start := time.Now()
		must.NoError(t, c.Shutdown())
		// StopTask hangs; the task runner gives up after the kill timeout
		// plus the kill grace and destroys the task.
		must.Eq(t, 7*time.Second, time.Since(start))
		must.False(t, host.Running(a.ID+"/hung"))
		must.False(t, host.Running(a.ID+"/fine"))
		got := srv.alloc(a.ID)
		must.Eq(t, structs.AllocClientStatusComplete, got.ClientStatus, must.Sprint("the last statuses were flushed"))
		must.True(t, got.TasksExited)
		_, err := os.Stat(dataDir)
		must.True(t, os.IsNotExist(err), must.Sprint("the dev client's temporary data dir is removed"))
	})
}

// plainRPC hides RPCContext: calls cannot be cancelled.
type plainRPC struct{ srv *fakeServer }

func (p plainRPC) RPC(method string, args, reply any) error { return p.srv.RPC(method, args, reply) }

func TestClient_ShutdownWithAnUncancellableRPCer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newFakeServer(time.Hour)
		cfg := testConfig(t, plainRPC{srv}, fakedriver.NewHost(), t.TempDir())
		cfg.AllocWatchWait = time.Minute
		c := newTestClient(t, cfg)
		defer c.Shutdown()
		advance(time.Second) // the alloc query now blocks in the server
		start := time.Now()
		must.NoError(t, c.Shutdown())
		must.Eq(t, 0, time.Since(start), must.Sprint("shutdown does not wait for the blocking query"))
		// The abandoned call ends when the server answers, at MaxQueryTime.
		advance(time.Minute)
	})
}

func TestClient_TaskLogsReachFileAndReader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newFakeServer(time.Hour)
		c := newTestClient(t, testConfig(t, srv, fakedriver.NewHost(), t.TempDir()))
		defer c.Shutdown()
		synctest.Wait()
		a := testAlloc(c.NodeID(), structs.JobTypeService, &structs.Task{Name: "web", Config: map[string]any{"stdout": "hello from the task\n"}})
		srv.placeAlloc(a)
		advance(time.Second)

		must.FileExists(t, filepath.Join(c.dataDir, "alloc", a.ID, "alloc", "logs", "web.stdout.0"))
		r, err := c.AllocLogs(a.ID, "web", "stdout")
		must.NoError(t, err)
		b, err := io.ReadAll(r)
		must.NoError(t, err)
		must.NoError(t, r.Close())
		must.Eq(t, "hello from the task\n", string(b))

		r, err = c.AllocLogs(a.ID, "web", "stderr")
		must.NoError(t, err)
		must.Eq(t, int64(0), r.Size())
		r.Close()

		_, err = c.AllocLogs("nope", "web", "stdout")
		must.ErrorIs(t, err, ErrUnknownAlloc)
		_, err = c.AllocLogs(a.ID, "db", "stdout")
		must.ErrorIs(t, err, ErrUnknownTask)
		_, err = c.AllocLogs(a.ID, "web", "stdin")
		must.ErrorIs(t, err, ErrInvalidLogType)
		must.NoError(t, c.Shutdown())
	})
}

func TestClient_UnrunnableAllocIsReportedFailed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newFakeServer(time.Hour)
		c := newTestClient(t, testConfig(t, srv, fakedriver.NewHost(), t.TempDir()))
		defer c.Shutdown()
		synctest.Wait()
		a := testAlloc(c.NodeID(), structs.JobTypeService, &structs.Task{Name: "t"})
		a.TaskGroup = "missing"
		srv.placeAlloc(a)
		advance(time.Second)
		got := srv.alloc(a.ID)
		must.Eq(t, structs.AllocClientStatusFailed, got.ClientStatus)
		must.StrContains(t, got.ClientDescription, `has no group "missing"`)
		must.NoError(t, c.Shutdown())
	})
}

func TestClient_IdentityPersists(t *testing.T) {
	dataDir := t.TempDir()
	db, err := state.NewBoltDB(filepath.Join(dataDir, "client", "state.db"))
	must.NoError(t, err)
	must.NoError(t, db.PutNodeIdentity(&state.NodeIdentity{ID: "fixed-id", SecretID: "fixed-secret"}))
	must.NoError(t, db.Close())

	srv := newFakeServer(time.Hour)
	c := newTestClient(t, testConfig(t, srv, fakedriver.NewHost(), dataDir))
	defer c.Shutdown()
	defer c.Shutdown()
	must.Eq(t, "fixed-id", c.NodeID())
	must.Eq(t, "fixed-secret", c.Node().SecretID)
}
