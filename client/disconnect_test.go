package client

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"

	"github.com/berth-io/berth/client/allocrunner"
	"github.com/berth-io/berth/client/allocrunner/taskrunner"
	"github.com/berth-io/berth/client/internal/fakedriver"
	"github.com/berth-io/berth/client/internal/testlog"
	"github.com/berth-io/berth/helper"
	"github.com/berth-io/berth/nomad/structs"
	"github.com/berth-io/berth/plugins/csi/fake"
	"github.com/berth-io/berth/plugins/drivers"
	"github.com/berth-io/berth/plugins/drivers/mock"
	"github.com/berth-io/berth/testutil"
)

func TestDecideDisconnect(t *testing.T) {
	const (
		d     = 5 * time.Minute
		kill  = 5 * time.Second
		grace = 5 * time.Second
		// kill + 3×grace + unpublishAllowance + disconnectCheckInterval
		budget = 31 * time.Second
	)
	cases := []struct {
		name                   string
		elapsed, deadline      time.Duration
		longestKill, killGrace time.Duration
		want                   disconnectDecision
	}{
		{"no deadline never stops", time.Hour, 0, kill, grace, disconnectDecision{}},
		{"no deadline, no allocs", 0, 0, 0, grace, disconnectDecision{}},
		{"fresh contact waits until D/2", 0, d, kill, grace,
			disconnectDecision{wait: d / 2, budget: budget}},
		{"a clock gone back counts as fresh", -time.Minute, d, kill, grace,
			disconnectDecision{wait: d / 2, budget: budget}},
		{"before D/2 waits until D/2", 2 * time.Minute, d, kill, grace,
			disconnectDecision{wait: 30 * time.Second, budget: budget}},
		{"after D/2 looks every second", 3 * time.Minute, d, kill, grace,
			disconnectDecision{wait: disconnectCheckInterval, budget: budget}},
		{"just before the stop waits the rest", d - budget - 300*time.Millisecond, d, kill, grace,
			disconnectDecision{wait: 300 * time.Millisecond, budget: budget}},
		{"D minus budget stops", d - budget, d, kill, grace,
			disconnectDecision{stop: true, budget: budget}},
		{"past the deadline stops", time.Hour, d, kill, grace,
			disconnectDecision{stop: true, budget: budget}},
		{"a longer kill timeout stops earlier", d - 2*time.Minute, d, 94 * time.Second, grace,
			disconnectDecision{stop: true, budget: 2 * time.Minute}},
		{"the budget never exceeds D/2", d / 2, d, time.Hour, grace,
			disconnectDecision{stop: true, budget: d / 2, capped: true}},
		{"so nothing stops before D/2", d/2 - time.Second, d, time.Hour, grace,
			disconnectDecision{wait: time.Second, budget: d / 2, capped: true}},
		{"a short deadline is halved", 15 * time.Second, 30 * time.Second, kill, grace,
			disconnectDecision{stop: true, budget: 15 * time.Second, capped: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			must.Eq(t, tc.want, decideDisconnect(tc.elapsed, tc.deadline, tc.longestKill, tc.killGrace))
		})
	}
}

// partition stands between a client and its servers: while cut, every
// call fails the way an unreachable server's does, and none reaches them.
type partition struct {
	srv ContextRPCer
	cut atomic.Bool
}

func (p *partition) RPC(method string, args, reply any) error {
	return p.RPCContext(context.Background(), method, args, reply)
}

func (p *partition) RPCContext(ctx context.Context, method string, args, reply any) error {
	if p.cut.Load() {
		return fmt.Errorf("no server of [10.0.0.1:4647] answered %s: dial tcp 10.0.0.1:4647: connect: no route to host", method)
	}
	return p.srv.RPCContext(ctx, method, args, reply)
}

// lastBeat is when the last heartbeat the servers received was sent.
func lastBeat(t *testing.T, srv *fakeServer) time.Time {
	t.Helper()
	beats := srv.callTimes("Node.UpdateStatus")
	must.SliceNotEmpty(t, beats)
	return beats[len(beats)-1]
}

// blockPrerun is an alloc hook whose Prerun blocks until its ctx ends
// for the alloc with ID id (a claim that cannot reach the servers).
type blockPrerun struct{ id, allocID string }

func (*blockPrerun) Name() string { return "block" }

func (h *blockPrerun) Prerun(ctx context.Context) error {
	if h.allocID != h.id {
		return nil
	}
	<-ctx.Done()
	return ctx.Err()
}

func eventWith(ts *structs.TaskState, typ, msg string) *structs.TaskEvent {
	for _, e := range ts.Events {
		if e.Type == typ && strings.Contains(e.Message, msg) {
			return e
		}
	}
	return nil
}

// TestClient_DisconnectDeadlineStopsAllocs: heartbeats fail; at the last
// contact + D − budget every live alloc is stopped — a running one, whose
// stubborn task takes its kill timeout, and one still in Prerun — and all
// are dead, failed, with the reason, by the last contact + D. Contact back,
// the servers learn it, and nothing runs again, even when the servers
// still want the alloc to run.
func TestClient_DisconnectDeadlineStopsAllocs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const deadline = 2 * time.Minute
		srv := newFakeServer(10 * time.Second)
		servers := &partition{srv: srv}
		host := fakedriver.NewHost()
		cfg := testConfig(t, servers, host, t.TempDir())
		cfg.DisconnectDeadline = deadline
		cfg.disconnectStopsAll = true // fake allocs without volumes
		stuck := testAlloc("", structs.JobTypeService, &structs.Task{Name: "t"})
		cfg.AllocHooks = []allocrunner.HookFactory{func(hc *allocrunner.HookConfig) allocrunner.Hook {
			return &blockPrerun{id: stuck.ID, allocID: hc.Alloc.ID}
		}}
		c := newTestClient(t, cfg)
		defer c.Shutdown()
		synctest.Wait()

		a := testAlloc(c.NodeID(), structs.JobTypeService,
			&structs.Task{Name: "t", KillTimeout: 20 * time.Second, Config: map[string]any{"ignore_sigterm": true}})
		stuck.NodeID = c.NodeID()
		srv.placeAlloc(a)
		srv.placeAlloc(stuck)
		advance(time.Second)
		taskID := a.ID + "/t"
		must.True(t, host.Running(taskID))
		must.Eq(t, structs.AllocClientStatusPending, srv.alloc(stuck.ID).ClientStatus)

		servers.cut.Store(true)
		last := lastBeat(t, srv)
		// budget = 20s kill timeout + 3×5s kill grace + 10s + 1s = 46s.
		due := last.Add(deadline - 46*time.Second)
		advance(time.Until(due) - time.Second)
		must.True(t, host.Running(taskID), must.Sprint("a second before the stop"))
		got, err := c.Alloc(stuck.ID)
		must.NoError(t, err)
		must.Eq(t, structs.AllocClientStatusPending, got.ClientStatus)

		advance(time.Second)
		msg := "Stopped: lost contact with the servers for 1m14s (disconnect deadline 2m0s)"
		got, err = c.Alloc(stuck.ID)
		must.NoError(t, err)
		must.Eq(t, structs.AllocClientStatusFailed, got.ClientStatus, must.Sprint("stopped before its tasks started, and failed"))
		must.NotNil(t, eventWith(got.TaskStates["t"], taskrunner.EventKilling, msg))
		must.True(t, got.TasksExited)
		must.Eq(t, 0, host.Starts(stuck.ID+"/t"))
		got, err = c.Alloc(a.ID)
		must.NoError(t, err)
		must.NotNil(t, eventWith(got.TaskStates["t"], taskrunner.EventKilling, msg))
		must.True(t, host.Running(taskID), must.Sprint("within its kill timeout"))

		advance(20 * time.Second)
		must.False(t, host.Running(taskID))
		must.False(t, time.Now().After(last.Add(deadline)), must.Sprint("stopped by the deadline"))
		got, err = c.Alloc(a.ID)
		must.NoError(t, err)
		must.Eq(t, structs.AllocClientStatusFailed, got.ClientStatus)
		must.True(t, got.TaskStates["t"].Failed)
		must.Eq(t, structs.TaskStateDead, got.TaskStates["t"].State)
		must.True(t, got.TasksExited)
		must.Eq(t, structs.AllocClientStatusRunning, srv.alloc(a.ID).ClientStatus, must.Sprint("the servers heard nothing yet"))

		servers.cut.Store(false)
		advance(30 * time.Second)
		for _, id := range []string{a.ID, stuck.ID} {
			got := srv.alloc(id)
			must.Eq(t, structs.AllocClientStatusFailed, got.ClientStatus)
			must.True(t, got.TasksExited)
			must.NotNil(t, eventWith(got.TaskStates["t"], taskrunner.EventKilling, msg))
		}

		// Servers that never marked the node down still want it running.
		srv.placeAlloc(srv.alloc(a.ID))
		advance(time.Minute)
		must.Eq(t, 1, host.Starts(taskID), must.Sprint("never started again"))
		must.Eq(t, 0, host.Starts(stuck.ID+"/t"))
		got, err = c.Alloc(a.ID)
		must.NoError(t, err)
		must.Eq(t, structs.AllocClientStatusFailed, got.ClientStatus)

		// New allocs run as usual once contact is back.
		b := testAlloc(c.NodeID(), structs.JobTypeService, &structs.Task{Name: "t"})
		srv.placeAlloc(b)
		advance(time.Second)
		must.True(t, host.Running(b.ID+"/t"))
		advance(10 * time.Minute)
		must.True(t, host.Running(b.ID+"/t"))
		must.NoError(t, c.Shutdown())
	})
}

func TestClient_NoDisconnectDeadlineNeverStopsAllocs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newFakeServer(10 * time.Second)
		servers := &partition{srv: srv}
		host := fakedriver.NewHost()
		c := newTestClient(t, testConfig(t, servers, host, t.TempDir()))
		defer c.Shutdown()
		synctest.Wait()
		must.Eq(t, 0, srv.lastRegistered().DisconnectDeadline, must.Sprint("the node promises nothing"))
		a := testAlloc(c.NodeID(), structs.JobTypeService, &structs.Task{Name: "t"})
		srv.placeAlloc(a)
		advance(time.Second)

		servers.cut.Store(true)
		advance(time.Hour)
		must.True(t, host.Running(a.ID+"/t"))
		got, err := c.Alloc(a.ID)
		must.NoError(t, err)
		must.Eq(t, structs.AllocClientStatusRunning, got.ClientStatus)
		servers.cut.Store(false)
		advance(10 * time.Second)
		must.NoError(t, c.Shutdown())
		must.Len(t, 1, srv.callTimes("Node.Register"), must.Sprint("nothing to take back at shutdown"))
	})
}

func TestClient_ContactBackBeforeTheDisconnectDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const deadline = 2 * time.Minute
		srv := newFakeServer(10 * time.Second)
		servers := &partition{srv: srv}
		host := fakedriver.NewHost()
		cfg := testConfig(t, servers, host, t.TempDir())
		cfg.DisconnectDeadline = deadline
		cfg.disconnectStopsAll = true // fake allocs without volumes
		c := newTestClient(t, cfg)
		defer c.Shutdown()
		synctest.Wait()
		a := testAlloc(c.NodeID(), structs.JobTypeService, &structs.Task{Name: "t"})
		srv.placeAlloc(a)
		advance(time.Second)

		for range 3 { // each outage ends just before the stop would be due
			servers.cut.Store(true)
			// budget = 5s default kill timeout + 3×5s + 10s + 1s = 31s; the
			// retried heartbeat (every TTL/4) lands within 2.5s.
			advance(time.Until(lastBeat(t, srv).Add(deadline-31*time.Second)) - 3*time.Second)
			servers.cut.Store(false)
			advance(5 * time.Minute)
		}
		must.True(t, host.Running(a.ID+"/t"))
		must.Eq(t, 1, host.Starts(a.ID+"/t"))
		must.Eq(t, []string{structs.AllocClientStatusRunning}, srv.statuses(a.ID))
		must.NoError(t, c.Shutdown())
	})
}

// TestClient_NodeCarriesDisconnectDeadline: the node promises the deadline
// while the client runs, and a clean shutdown takes the promise back: the
// tasks keep running with no client to stop them.
func TestClient_NodeCarriesDisconnectDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newFakeServer(10 * time.Second)
		cfg := testConfig(t, srv, fakedriver.NewHost(), t.TempDir())
		cfg.DisconnectDeadline = 5 * time.Minute
		cfg.disconnectStopsAll = true           // fake allocs without volumes
		cfg.Node.DisconnectDeadline = time.Hour // a template cannot promise what the client does not keep
		c := newTestClient(t, cfg)
		defer c.Shutdown()
		synctest.Wait()
		must.Eq(t, 5*time.Minute, srv.lastRegistered().DisconnectDeadline)
		must.Eq(t, 5*time.Minute, c.Node().DisconnectDeadline)

		must.NoError(t, c.Shutdown())
		must.Len(t, 2, srv.callTimes("Node.Register"))
		must.Eq(t, 0, srv.lastRegistered().DisconnectDeadline)
	})
}

// TestClient_RestartPastTheDisconnectDeadline: a client that shut down
// while the servers were unreachable could not take its promise back; one
// that comes back after its deadline without contact stops the allocs it
// restores at once.
func TestClient_RestartPastTheDisconnectDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newFakeServer(10 * time.Second)
		servers := &partition{srv: srv}
		host := fakedriver.NewHost()
		dataDir := t.TempDir()
		cfg := testConfig(t, servers, host, dataDir)
		cfg.DisconnectDeadline = 2 * time.Minute
		cfg.disconnectStopsAll = true // fake allocs without volumes
		c1 := newTestClient(t, cfg)
		defer c1.Shutdown()
		synctest.Wait()
		a := testAlloc(c1.NodeID(), structs.JobTypeService, &structs.Task{Name: "t"})
		srv.placeAlloc(a)
		advance(time.Second)

		servers.cut.Store(true)
		last := lastBeat(t, srv)
		advance(10 * time.Second)
		must.NoError(t, c1.Shutdown())
		must.Eq(t, 2*time.Minute, srv.lastRegistered().DisconnectDeadline, must.Sprint("not taken back"))
		must.True(t, host.Running(a.ID+"/t"))
		advance(3 * time.Minute)

		c2 := newTestClient(t, cfg) // a new process on the same data dir
		defer c2.Shutdown()
		synctest.Wait()
		must.False(t, host.Running(a.ID+"/t"))
		got, err := c2.Alloc(a.ID)
		must.NoError(t, err)
		must.Eq(t, structs.AllocClientStatusFailed, got.ClientStatus)
		lost := time.Since(last).Round(time.Second)
		must.NotNil(t, eventWith(got.TaskStates["t"], taskrunner.EventKilling,
			fmt.Sprintf("Stopped: lost contact with the servers for %s (disconnect deadline 2m0s)", lost)))
		must.NoError(t, c2.Shutdown())
	})
}

// TestClient_RestartAfterACleanShutdownCountsAfresh: a client that took
// its promise back on shutdown counts from its own start when it comes
// back, however long it was gone, even if the servers are unreachable.
func TestClient_RestartAfterACleanShutdownCountsAfresh(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := newFakeServer(10 * time.Second)
		servers := &partition{srv: srv}
		host := fakedriver.NewHost()
		cfg := testConfig(t, servers, host, t.TempDir())
		cfg.DisconnectDeadline = 2 * time.Minute
		cfg.disconnectStopsAll = true // fake allocs without volumes
		c1 := newTestClient(t, cfg)
		defer c1.Shutdown()
		synctest.Wait()
		a := testAlloc(c1.NodeID(), structs.JobTypeService, &structs.Task{Name: "t"})
		srv.placeAlloc(a)
		advance(time.Second)
		must.NoError(t, c1.Shutdown())
		must.Eq(t, 0, srv.lastRegistered().DisconnectDeadline, must.Sprint("taken back"))

		servers.cut.Store(true)
		advance(time.Hour)
		start := time.Now()
		c2 := newTestClient(t, cfg)
		defer c2.Shutdown()
		// budget = 5s default kill timeout + 3×5s + 10s + 1s = 31s.
		advance(2*time.Minute - 31*time.Second - time.Second)
		must.True(t, host.Running(a.ID+"/t"))
		advance(time.Second)
		must.False(t, host.Running(a.ID+"/t"))
		got, err := c2.Alloc(a.ID)
		must.NoError(t, err)
		must.Eq(t, start.Add(2*time.Minute-31*time.Second).UnixNano(), got.TaskStates["t"].FinishedAt, must.Sprint("counted from the start"))
		must.NoError(t, c2.Shutdown())
	})
}

// TestClient_DisconnectDeadlineUnpublishesVolumes: with real gRPC to a CSI
// plugin, the stop at the deadline unpublishes the alloc's volume on the
// node while the servers are still unreachable; they hear of it once
// contact is back.
func TestClient_DisconnectDeadlineUnpublishesVolumes(t *testing.T) {
	srv := newCSIFakeServer(&structs.CSIVolume{ID: "vol1", Namespace: "default", PluginID: "fakeplug"})
	srv.ttl = time.Second // heartbeats every ~0.5s keep the contact fresh
	servers := &partition{srv: srv}
	cfg := &Config{
		DataDir: t.TempDir(), Node: &structs.Node{Name: "n"}, RPC: servers, Logger: testlog.Logger(t),
		Drivers:           map[string]drivers.Driver{mock.Name: mock.New(hclog.NewNullLogger(), mock.Config{MountConfig: structs.MountConfigSupportAll})},
		UpdateBatchWindow: 5 * time.Millisecond, CSI: fastCSIConfig(),
		RetryBackoff:       helper.Backoff{Base: 50 * time.Millisecond, Max: 200 * time.Millisecond},
		DisconnectDeadline: 10 * time.Second, // stops 5s (D/2) after the last contact
	}
	c := newTestClient(t, cfg)
	defer c.Shutdown()
	sock := shortSocket(t)
	p := fake.Start(t, sock)
	registerNodePlugin(t, c, "fakeplug", sock)
	testutil.WaitForResult(t, func() (bool, error) { return srv.lastRegistered() != nil, nil })
	a := csiTestAlloc(c.NodeID(), mock.Name, "vol1", &structs.Task{Name: "db", KillTimeout: 100 * time.Millisecond})
	srv.placeAlloc(a)
	waitStatus(t, srv.fakeServer, a.ID, structs.AllocClientStatusRunning)
	// An alloc without volumes is not part of the promise: it keeps running.
	web := testAlloc(c.NodeID(), structs.JobTypeService, &structs.Task{Name: "web", Driver: mock.Name, Config: map[string]any{"run_for": "1h"}})
	srv.placeAlloc(web)
	waitStatus(t, srv.fakeServer, web.ID, structs.AllocClientStatusRunning)
	must.Eq(t, 1, p.Calls("NodePublishVolume"))

	servers.cut.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), testutil.WaitTimeout)
	defer cancel()
	must.NoError(t, p.WaitForCalls(ctx, "NodeUnpublishVolume", 1))
	testutil.WaitForResult(t, func() (bool, error) {
		got, err := c.Alloc(a.ID)
		if err != nil {
			return false, err
		}
		return got.ClientStatus == structs.AllocClientStatusFailed, fmt.Errorf("client status %q", got.ClientStatus)
	})
	_, unpublishes := srv.counts()
	must.Eq(t, 0, unpublishes, must.Sprint("the servers are unreachable"))
	got, err := c.Alloc(web.ID)
	must.NoError(t, err)
	must.Eq(t, structs.AllocClientStatusRunning, got.ClientStatus, must.Sprint("an alloc without volumes was stopped"))

	servers.cut.Store(false)
	testutil.WaitForResult(t, func() (bool, error) {
		_, unpublishes := srv.counts()
		return unpublishes == 1, fmt.Errorf("%d Unpublish RPCs", unpublishes)
	})
	got = waitStatus(t, srv.fakeServer, a.ID, structs.AllocClientStatusFailed)
	testutil.WaitForResult(t, func() (bool, error) { return srv.alloc(a.ID).TasksExited, nil })
	must.NotNil(t, eventWith(got.TaskStates["db"], taskrunner.EventKilling, "Stopped: lost contact with the servers"))
	must.NoError(t, c.Shutdown())
}
